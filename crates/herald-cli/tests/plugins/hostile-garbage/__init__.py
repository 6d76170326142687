"""Execution middleware that return garbage without calling next_call: a dict that is no
provider response, and a Python object that is no JSON value (the chain goes on)."""


def not_a_response(request, next_call, **kwargs):
    return {"nonsense": 1}


def not_json(args, next_call, **kwargs):
    return object()


def register(ctx):
    ctx.register_middleware("llm_execution", not_a_response)
    ctx.register_middleware("tool_execution", not_json)
