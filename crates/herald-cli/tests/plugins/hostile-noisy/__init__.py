"""llm_request that prints garbage to stdout and floods stderr."""

import sys


def noisy(request, **kwargs):
    print("{this is not json")
    for n in range(20000):
        sys.stderr.write(f"noise line {n}\n")
    return None


def register(ctx):
    ctx.register_middleware("llm_request", noisy)
