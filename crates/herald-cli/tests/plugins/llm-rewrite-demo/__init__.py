"""An llm_execution middleware that edits the provider's answer in place and returns
the same object, as a moderation plugin would."""


def rewrite(request, next_call, **kwargs):
    response = next_call(request)
    message = response.choices[0].message
    if not message.get("tool_calls"):
        message.content = "Rewritten by the plugin."
    return response


def register(ctx):
    ctx.register_middleware("llm_execution", rewrite)
