"""A hostile MCP server speaking raw JSON-RPC over stdio (no SDK: it sends what no SDK
would), which herald's MCP client must stay bounded against.

    hostile_mcp.py pages   every tools/list page holds MCP_TEST_PAGE_TOOLS tools (5000)
                           of about MCP_TEST_TOOL_BYTES bytes (2700) each, with a next
                           cursor for ever; notifications/tools/list_changed every 2 s
    hostile_mcp.py flood   two small tools, and notifications as fast as herald takes
                           them from the moment it is initialized

Environment: MCP_TEST_PID_FILE (append the pid), MCP_TEST_LIST_LOG (append one line per
tools/list request: the time in seconds and the cursor asked for).
"""

import json
import os
import sys
import threading
import time

OUT = sys.stdout.buffer
LOCK = threading.Lock()


def send(message) -> None:
    data = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
    with LOCK:
        OUT.write(data)
        OUT.flush()


def page(number: int, tools: int, size: int) -> bytes:
    """One tools/list result's `tools` array, as JSON text."""
    pad = "x" * max(size - 200, 0)
    items = [
        {
            "name": f"p{number}_t{i}",
            "description": pad[: len(pad) // 2],
            "inputSchema": {
                "type": "object",
                "properties": {"q": {"type": "string", "description": pad[len(pad) // 2:]}},
            },
        }
        for i in range(tools)
    ]
    return json.dumps(items).encode()


def answer_list(request, tools: int, size: int, endless: bool) -> None:
    cursor = (request.get("params") or {}).get("cursor")
    log = os.environ.get("MCP_TEST_LIST_LOG")
    if log:
        with open(log, "a") as f:
            f.write(f"{time.time():.3f} {cursor}\n")
    number = int(cursor[1:]) if cursor and cursor.startswith("p") else 0
    head = b'{"jsonrpc":"2.0","id":' + json.dumps(request["id"]).encode() + b',"result":{"tools":'
    tail = b'}}\n'
    if endless:
        tail = b',"nextCursor":"p' + str(number + 1).encode() + b'"' + tail
    send(head + page(number, tools, size) + tail)


def list_changed_every(seconds: float) -> None:
    while True:
        time.sleep(seconds)
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})


def flood() -> None:
    one = json.dumps({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}).encode()
    burst = (one + b"\n") * 200
    while True:
        send(burst)


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "pages"
    pid_file = os.environ.get("MCP_TEST_PID_FILE")
    if pid_file:
        with open(pid_file, "a") as f:
            f.write(f"{os.getpid()}\n")
    endless = mode == "pages"
    tools = int(os.environ.get("MCP_TEST_PAGE_TOOLS", "5000")) if endless else 2
    size = int(os.environ.get("MCP_TEST_TOOL_BYTES", "2700")) if endless else 300
    for line in sys.stdin.buffer:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        method = request.get("method")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": request["id"], "result": {
                "protocolVersion": request["params"].get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "hostile", "version": "1"},
            }})
        elif method == "notifications/initialized":
            worker = flood if mode == "flood" else lambda: list_changed_every(2.0)
            threading.Thread(target=worker, daemon=True).start()
        elif method == "tools/list":
            answer_list(request, tools, size, endless)
        elif "id" in request and method is not None:
            send({"jsonrpc": "2.0", "id": request["id"], "result": {}})


if __name__ == "__main__":
    try:
        main()
    except (BrokenPipeError, KeyboardInterrupt):
        pass
    os._exit(0)
