"""tool_execution that raises before calling next_call (the tool still runs)."""


def boom(args, next_call, **kwargs):
    raise ValueError("raised before next_call")


def register(ctx):
    ctx.register_middleware("tool_execution", boom)
