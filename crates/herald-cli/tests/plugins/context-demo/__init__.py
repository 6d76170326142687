"""Two pre_llm_call hooks: one answers a string, one {"context": ...}; both reach the
user message."""


def plain(**kwargs):
    return "context one"


def mapped(**kwargs):
    return {"context": "context two"}


def register(ctx):
    ctx.register_hook("pre_llm_call", plain)
    ctx.register_hook("pre_llm_call", mapped)
