"""llm_request that returns a partial request (a full replacement: never merged)."""


def partial(request, **kwargs):
    kept = {k: request[k] for k in ("model", "messages", "stream") if k in request}
    return {"request": kept, "source": "hostile-partial"}


def register(ctx):
    ctx.register_middleware("llm_request", partial)
