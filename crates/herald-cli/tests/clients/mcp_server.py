"""An MCP server built with the official Python SDK (mcp 2.x `MCPServer`), which
herald's MCP client tests connect to.

    mcp_server.py stdio          serve on stdin/stdout
    mcp_server.py http PORT      serve Streamable HTTP on 127.0.0.1:PORT/mcp
    mcp_server.py sse PORT       serve the older HTTP+SSE on 127.0.0.1:PORT/sse
    mcp_server.py https PORT CERT KEY CLIENT_CA
                                 Streamable HTTP over TLS at https://127.0.0.1:PORT/mcp,
                                 asking for a client certificate signed by CLIENT_CA

Environment: MCP_TEST_PID_FILE (write the pid there), MCP_TEST_START_DELAY (seconds to
wait before serving: a slow or hanging server), MCP_TEST_TERM_FILE (append the pid there
when the server ends on SIGTERM or on its closed stdin, that is not killed).
"""

import asyncio
import os
import signal
import sys
import time

import warnings

from mcp import types
from mcp.server.mcpserver import Context, MCPServer

warnings.simplefilter("ignore")

server = MCPServer("herald-test")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return text


@server.tool()
async def sleep(seconds: float) -> str:
    """Wait, then answer."""
    await asyncio.sleep(seconds)
    return "slept"


@server.tool()
def die() -> str:
    """End the server process in the middle of the call."""
    os._exit(3)


@server.tool()
def env(name: str) -> str:
    """The value of an environment variable of the server, or <unset>."""
    return os.environ.get(name, "<unset>")


@server.tool()
def fail() -> str:
    """Fail with a message that holds a credential."""
    raise ValueError("broken with token=abc123secret")


@server.tool()
async def ask(question: str, ctx: Context) -> str:
    """Ask the client's model (MCP sampling) and return its answer."""
    result = await ctx.request_context.session.create_message(
        [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=question))],
        max_tokens=9999,
        system_prompt="Answer briefly.",
        model_preferences=types.ModelPreferences(hints=[types.ModelHint(name="fake-model")]),
    )
    return f"{result.model}: {result.content.text}"


@server.resource("note://hello")
def hello() -> str:
    """A note."""
    return "hello from a resource"


@server.prompt()
def greet(who: str) -> str:
    """A greeting prompt."""
    return f"Say hello to {who}"


_ENDED = []


def ended() -> None:
    """Records the end once (a SIGTERM may come while the closed stdin ends it)."""
    if _ENDED:
        return
    _ENDED.append(True)
    if os.environ.get("MCP_TEST_TERM_FILE"):
        with open(os.environ["MCP_TEST_TERM_FILE"], "a") as f:
            f.write(f"{os.getpid()}\n")


def on_term(_sig, _frame) -> None:
    ended()
    os._exit(0)


def main() -> None:
    if os.environ.get("MCP_TEST_TERM_FILE"):
        signal.signal(signal.SIGTERM, on_term)
    pid_file = os.environ.get("MCP_TEST_PID_FILE")
    if pid_file:
        with open(pid_file, "a") as f:
            f.write(f"{os.getpid()}\n")
    delay = float(os.environ.get("MCP_TEST_START_DELAY", "0"))
    if delay:
        time.sleep(delay)
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    elif len(sys.argv) > 2 and sys.argv[1] == "sse":
        server.run("sse", host="127.0.0.1", port=int(sys.argv[2]))
    elif len(sys.argv) > 5 and sys.argv[1] == "https":
        import ssl

        import uvicorn

        app = server.streamable_http_app(host="127.0.0.1")
        uvicorn.run(
            app,
            host="127.0.0.1",
            port=int(sys.argv[2]),
            ssl_certfile=sys.argv[3],
            ssl_keyfile=sys.argv[4],
            ssl_ca_certs=sys.argv[5],
            ssl_cert_reqs=ssl.CERT_REQUIRED,
            log_level="warning",
        )
    else:
        server.run()
        ended()


if __name__ == "__main__":
    main()
