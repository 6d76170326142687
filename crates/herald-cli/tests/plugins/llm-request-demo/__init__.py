"""An llm_request middleware as Hermes's documentation shows it: copy the request,
add extra_body.metadata, return the replacement with a source and a reason."""

import copy


def tag_request(request, **kwargs):
    changed = copy.deepcopy(request)
    extra_body = changed.setdefault("extra_body", {})
    metadata = extra_body.setdefault("metadata", {})
    metadata["hermes_middleware_demo"] = True
    return {"request": changed, "source": "llm-request-demo", "reason": "tag the request"}


def register(ctx):
    ctx.register_middleware("llm_request", tag_request)
