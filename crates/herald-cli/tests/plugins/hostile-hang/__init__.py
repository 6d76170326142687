"""tool_request that hangs (skipped after plugins.host.callback_timeout)."""

import time


def hang(tool_name, args, **kwargs):
    time.sleep(600)


def register(ctx):
    ctx.register_middleware("tool_request", hang)
