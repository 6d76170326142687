"""Tool names herald must refuse: one of 100 characters, one with a space, slashes and a
semicolon, an HTML tag, an MCP tool's `mcp__` name and a built-in's (`terminal`, not
enabled in the test's session), beside a good one that still works."""


def answer(args, **kwargs):
    return "from the plugin: " + args.get("text", "")


def register(ctx):
    def schema(name):
        return {
            "name": name,
            "description": "A tool of the tool-names plugin.",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
        }

    for name in ["n" * 100, "a b/../c;rm", "<img>", "mcp__calc__echo", "terminal", "good_tool-1"]:
        ctx.register_tool(name, "name_tests", schema(name), answer)
