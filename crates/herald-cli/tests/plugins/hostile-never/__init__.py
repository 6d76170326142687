"""llm_execution that never calls next_call and returns nothing (the chain goes on)."""


def never(request, next_call, **kwargs):
    return None


def register(ctx):
    ctx.register_middleware("llm_execution", never)
