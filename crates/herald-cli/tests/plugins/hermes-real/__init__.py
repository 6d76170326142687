"""A plugin written against Hermes's real hermes_cli package (0.19.0): it uses the
middleware kind constants, VALID_HOOKS, and hermes_cli.middleware.middleware_payload,
which only the real package has."""

from hermes_cli.middleware import (
    LLM_REQUEST_MIDDLEWARE,
    MIDDLEWARE_SCHEMA_VERSION,
    middleware_payload,
)
from hermes_cli.plugins import VALID_HOOKS


def tag(request, middleware_schema_version=None, **kwargs):
    changed = dict(request)
    stamped = middleware_payload(seen=middleware_schema_version == MIDDLEWARE_SCHEMA_VERSION)
    changed["extra_body"] = {"metadata": {"hermes_real": stamped["seen"],
                                          "hooks_known": "post_tool_call" in VALID_HOOKS}}
    return {"request": changed, "source": "hermes-real"}


def register(ctx):
    ctx.register_middleware(LLM_REQUEST_MIDDLEWARE, tag)
