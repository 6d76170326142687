"""An llm_execution middleware that times the provider call."""

import time


def time_llm_execution(request, next_call, **kwargs):
    started = time.monotonic()
    try:
        return next_call(request)
    finally:
        elapsed = (time.monotonic() - started) * 1000
        print(f"llm_execution took {elapsed:.1f} ms")


def register(ctx):
    ctx.register_middleware("llm_execution", time_llm_execution)
