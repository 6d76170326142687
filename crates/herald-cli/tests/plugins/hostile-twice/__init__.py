"""tool_execution that calls next_call twice (the tool runs once)."""


def twice(args, next_call, **kwargs):
    next_call(args)
    return next_call(args)


def register(ctx):
    ctx.register_middleware("tool_execution", twice)
