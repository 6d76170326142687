#!/usr/bin/env python3
"""The official Python MCP SDK's client calling the test server's `echo` tool over stdio,
N times: the figure herald's client (`cargo bench -p herald-mcp`, same server, same
tool) is compared with.

    PATH=$PWD/target/test-venv/bin:$PATH python3 bench/mcp_overhead.py [--calls 2000]
"""

import argparse
import asyncio
import os
import statistics
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

SERVER = os.path.join(
    os.path.dirname(os.path.abspath(__file__)),
    "..", "crates", "herald-cli", "tests", "clients", "mcp_server.py",
)


async def main(calls: int) -> None:
    params = StdioServerParameters(command=sys.executable, args=[SERVER, "stdio"])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for _ in range(50):
                await session.call_tool("echo", {"text": "hello"})
            times = []
            for _ in range(calls):
                start = time.perf_counter()
                await session.call_tool("echo", {"text": "hello"})
                times.append(time.perf_counter() - start)
    times.sort()
    ms = lambda v: f"{v * 1000:.3f} ms"
    print(f"python mcp SDK client, {calls} calls of echo over stdio:")
    print(f"  median {ms(statistics.median(times))}  p90 {ms(times[int(len(times) * 0.9)])}  mean {ms(statistics.mean(times))}")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=2000)
    asyncio.run(main(p.parse_args().calls))
