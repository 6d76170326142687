"""pre_tool_call directives as Hermes 0.19.0 reads them: a block without a message is
no directive, the first valid one wins (an approve before a later block), and an approve
sends the call to the approval gate. A tool_request middleware rewrites a command, and
every pre_tool_call's arguments are recorded in <HERMES_HOME>/pre_tool.jsonl."""

import json
import os


def record(tool_name, args, **kwargs):
    with open(os.path.join(os.environ["HERMES_HOME"], "pre_tool.jsonl"), "a") as f:
        f.write(json.dumps({"tool_name": tool_name, "args": args}) + "\n")


def ignored(tool_name, args, **kwargs):
    return {"action": "block"}


def ask(tool_name, args, **kwargs):
    if "ask-me" in args.get("command", ""):
        return {"action": "approve", "message": "the policy asks a human", "rule_key": "asker"}
    return None


def late(tool_name, args, **kwargs):
    if "ask-me" in args.get("command", ""):
        return {"action": "block", "message": "a later block never wins"}
    return None


def rewrite(tool_name, args, **kwargs):
    command = args.get("command", "")
    if tool_name != "terminal" or "REWRITE" not in command:
        return None
    return {"args": {**args, "command": command.replace("REWRITE", "rewritten")},
            "source": "approving", "reason": "rewrite"}


def register(ctx):
    ctx.register_hook("pre_tool_call", record)
    ctx.register_hook("pre_tool_call", ignored)
    ctx.register_hook("pre_tool_call", ask)
    ctx.register_hook("pre_tool_call", late)
    ctx.register_middleware("tool_request", rewrite)
