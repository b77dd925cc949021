#!/usr/bin/env python3
"""The Python side of `lachesis bench mcp`: N sequential tool calls through the official MCP SDK
(`mcp`), over stdio (spawning the server) or streamable HTTP (an already running server).

Prints one JSON object on stdout: {"sdk": version, "times_ns": [...], "wall_s": float}. The raw
round trips go back to the Rust side, which computes the percentiles for both clients the same way.
Each call is timed from just before `call_tool` to just after its result, as the Rust side does.
"""

import argparse
import asyncio
import importlib.metadata
import json
import sys
import time

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

try:
    # The name since mcp 1.x's later releases; the older `streamablehttp_client` yields a third
    # item (a session-id getter) that is dropped below.
    from mcp.client.streamable_http import streamable_http_client as http_client
except ImportError:  # pragma: no cover - older SDKs
    from mcp.client.streamable_http import streamablehttp_client as http_client


async def run_calls(session: ClientSession, tool: str, calls: int, warmup: int) -> dict:
    await session.initialize()
    # Warm-up: the first calls pay for imports, JIT and connection setup on both ends.
    for i in range(warmup):
        await session.call_tool(tool, {"message": f"warm {i}"})
    times = []
    started = time.perf_counter()
    for i in range(calls):
        t0 = time.perf_counter_ns()
        result = await session.call_tool(tool, {"message": f"ping {i}"})
        times.append(time.perf_counter_ns() - t0)
        # `is_error` in the current SDK, `isError` in older ones.
        if getattr(result, "is_error", None) or getattr(result, "isError", None):
            raise RuntimeError(f"the tool reported an error: {result}")
    wall = time.perf_counter() - started
    return {"sdk": importlib.metadata.version("mcp"), "times_ns": times, "wall_s": wall}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--transport", choices=["stdio", "http"], required=True)
    parser.add_argument("--server", help="the server program (stdio)")
    parser.add_argument("--url", help="the server's endpoint (http)")
    parser.add_argument("--tool", default="echo")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()

    if args.transport == "stdio":
        if not args.server:
            parser.error("--server is required for stdio")
        params = StdioServerParameters(command=args.server, args=[])
        # The server's stderr would interleave with our diagnostics; it is not needed.
        with open("/dev/null", "w") as devnull:
            async with stdio_client(params, errlog=devnull) as streams:
                read, write = streams[0], streams[1]
                async with ClientSession(read, write) as session:
                    report = await run_calls(session, args.tool, args.calls, args.warmup)
    else:
        if not args.url:
            parser.error("--url is required for http")
        async with http_client(args.url) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                report = await run_calls(session, args.tool, args.calls, args.warmup)
    json.dump(report, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    asyncio.run(main())
