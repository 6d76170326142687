"""Callbacks without **kwargs: one declares names herald passes (it works), one names a
field nobody passes (it fails every call, reported once)."""

import json
import os


def declared(tool_name, args):
    path = os.path.join(os.environ["HERMES_HOME"], "narrow.jsonl")
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"tool_name": tool_name}) + "\n")


def wrong(tool_data):
    return None


def register(ctx):
    ctx.register_middleware("tool_request", declared)
    ctx.register_middleware("tool_request", wrong)
