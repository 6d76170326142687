"""A tool that sleeps three seconds whatever happens, then notes that it ended: a run
interrupted while it works ends only when it returns."""

import os
import time


def slow_step(args, **kwargs):
    time.sleep(3)
    path = os.environ.get("SLOW_TOOL_LOG")
    if path:
        with open(path, "a") as f:
            f.write("ended\n")
    return "stepped"


def register(ctx):
    schema = {
        "name": "slow_step",
        "description": "One slow step.",
        "parameters": {"type": "object", "properties": {}},
    }
    ctx.register_tool("slow_step", "slow_tools", schema, slow_step)
