"""llm_execution that lets a failed provider call through: it neither catches nor
wraps what next_call raises, so the failure is the provider's, not this plugin's."""


def let_through(request, next_call, **kwargs):
    return next_call(request)


def caught_and_reraised(request, next_call, **kwargs):
    try:
        return next_call(request)
    except Exception:
        raise


def register(ctx):
    ctx.register_middleware("llm_execution", let_through)
    ctx.register_middleware("llm_execution", caught_and_reraised)
