"""Records on_session_end, on_session_finalize and what post_api_request's
assistant_message holds, read as attributes (Hermes passes the SDK's message object)
and as keys, into <HERMES_HOME>/lifecycle.jsonl."""

import json
import os


def note(**entry):
    with open(os.path.join(os.environ["HERMES_HOME"], "lifecycle.jsonl"), "a") as f:
        f.write(json.dumps(entry) + "\n")


def ended(completed=None, interrupted=None, **kwargs):
    note(hook="on_session_end", completed=completed, interrupted=interrupted)


def finalized(session_id=None, platform=None, reason=None, **kwargs):
    note(hook="on_session_finalize", session_id=session_id, platform=platform, reason=reason)


def answered(assistant_message=None, **kwargs):
    m = assistant_message
    note(hook="post_api_request", content=m.content, finish_reason=m.finish_reason,
         tool_calls=len(m.tool_calls or []), reasoning=m.reasoning,
         usage_is_set=m.usage is not None, as_key=m["content"])


def register(ctx):
    ctx.register_hook("on_session_end", ended)
    ctx.register_hook("on_session_finalize", finalized)
    ctx.register_hook("post_api_request", answered)
