"""A tool_request middleware: terminal commands run in <HERMES_HOME>/work unless the
model named a workdir."""

import os


def default_workdir(tool_name, args, **kwargs):
    if tool_name != "terminal":
        return None
    changed = dict(args)
    changed.setdefault("workdir", os.path.join(os.environ["HERMES_HOME"], "work"))
    return {"args": changed, "source": "tool-request-demo", "reason": "default workdir"}


def register(ctx):
    ctx.register_middleware("tool_request", default_workdir)
