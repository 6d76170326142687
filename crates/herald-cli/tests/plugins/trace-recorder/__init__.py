"""Observer hooks that write what they are given to <HERMES_HOME>/trace.jsonl,
one JSON line each."""

import json
import os


def _record(hook):
    def record(**kwargs):
        with open(os.path.join(os.environ["HERMES_HOME"], "trace.jsonl"), "a", encoding="utf-8") as f:
            f.write(json.dumps({"hook": hook, "fields": kwargs}, default=str) + "\n")
    return record


def register(ctx):
    for hook in ("pre_api_request", "post_api_request", "pre_tool_call", "post_tool_call",
                 "on_session_start", "on_session_end", "post_llm_call", "pre_llm_call",
                 "subagent_start", "subagent_stop"):
        ctx.register_hook(hook, _record(hook))
