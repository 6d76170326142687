"""llm_execution that raises after next_call succeeded (the response is kept)."""


def after(request, next_call, **kwargs):
    next_call(request)
    raise RuntimeError("raised after next_call")


def register(ctx):
    ctx.register_middleware("llm_execution", after)
