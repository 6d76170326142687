"""Blocks the three ways herald honours: a pre_tool_call directive, a pre_tool_call hook
that fails (fails closed), and an execution middleware that raises MiddlewareBlocked."""

import herald


def gate(tool_name, args, **kwargs):
    command = args.get("command", "")
    if "forbidden" in command:
        return {"action": "block", "message": "not today"}
    if "crash" in command:
        raise RuntimeError("the gate itself broke")
    return None


def policy(args, next_call, **kwargs):
    if "policy" in args.get("command", ""):
        raise herald.MiddlewareBlocked("stopped by policy")
    return next_call(args)


def register(ctx):
    ctx.register_hook("pre_tool_call", gate)
    ctx.register_middleware("tool_execution", policy)
