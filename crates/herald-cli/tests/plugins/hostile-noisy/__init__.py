"""llm_request that prints garbage to stdout, bytes that are not UTF-8 to stderr, and
then floods stderr (far past a pipe's buffer). It notes in noisy.txt whether its
stderr was drained to the end or broke under it."""

import os
import sys


def noisy(request, **kwargs):
    print("{this is not json")
    try:
        sys.stderr.flush()
        sys.stderr.buffer.write(b"\xff\xfe not utf-8\n")
        sys.stderr.buffer.flush()
        for n in range(20000):
            sys.stderr.write(f"noise line {n}\n")
        sys.stderr.flush()
        outcome = "drained"
    except OSError as e:
        outcome = f"broken: {type(e).__name__}"
    with open(os.path.join(os.environ["HERMES_HOME"], "noisy.txt"), "a") as f:
        f.write(outcome + "\n")
    return None


def register(ctx):
    ctx.register_middleware("llm_request", noisy)
