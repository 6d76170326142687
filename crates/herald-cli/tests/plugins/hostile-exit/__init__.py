"""A hook that exits the interpreter the first time it runs (the host dies)."""

import os


def bye(**kwargs):
    flag = os.path.join(os.environ["HERMES_HOME"], "exited-once")
    if not os.path.exists(flag):
        open(flag, "w").close()
        os._exit(3)


def register(ctx):
    ctx.register_hook("post_api_request", bye)
