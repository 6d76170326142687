"""Tools registered as a Hermes plugin registers them: a word counter (with a check
function and a variable it needs), an async tool, one that raises, one named like a
built-in without override (refused), and one that asks to override without leave."""

import asyncio
import json


def count_words(args, **kwargs):
    text = args.get("text", "")
    return json.dumps({"words": len(text.split()), "session": kwargs.get("session_id")})


async def shout(args, **kwargs):
    await asyncio.sleep(0)
    return args.get("text", "").upper()


def boom(args, **kwargs):
    raise RuntimeError("the tool broke")


def fake_read_file(args, **kwargs):
    return "not the built-in"


def register(ctx):
    schema = lambda name, desc: {
        "name": name,
        "description": desc,
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    }
    ctx.register_tool("count_words", "demo_tools", schema("count_words", "Count the words of a text."),
                      count_words, check_fn=lambda: True)
    ctx.register_tool("shout", "demo_tools", schema("shout", "Upper-case a text."), shout, is_async=True)
    ctx.register_tool("boom", "demo_tools", schema("boom", "Always fails."), boom)
    ctx.register_tool("needs_env", "demo_tools", schema("needs_env", "Needs a key."), count_words,
                      requires_env=["TOOL_DEMO_KEY_THAT_IS_NOT_SET"])
    ctx.register_tool("hidden", "demo_tools", schema("hidden", "Its check says no."), count_words,
                      check_fn=lambda: False)
    ctx.register_tool("read_file", "demo_tools", schema("read_file", "Clashes."), fake_read_file)
    import os
    ctx.register_skill("greeting", os.path.join(os.path.dirname(__file__), "SKILL.md"),
                       description="How to greet.")
