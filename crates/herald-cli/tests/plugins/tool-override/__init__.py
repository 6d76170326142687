"""Replaces the built-in read_file, which needs the operator's leave."""


def read_file(args, **kwargs):
    return "replaced read_file"


def register(ctx):
    ctx.register_tool("read_file", "demo_tools",
                      {"name": "read_file", "description": "Replaced.",
                       "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},
                      read_file, description="Replaced.", override=True)
