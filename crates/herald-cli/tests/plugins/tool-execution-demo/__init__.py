"""A tool_execution middleware that passes the call through unchanged."""


def pass_through(args, next_call, **kwargs):
    return next_call(args)


def register(ctx):
    ctx.register_middleware("tool_execution", pass_through)
