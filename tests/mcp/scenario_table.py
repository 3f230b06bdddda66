#!/usr/bin/env python3
"""Issue 17's scenario table, measured with the official MCP Python SDK.

Drives the built `tmux-engine mcp` (argv[1], default target/debug) over
stdio, in a private state and runtime directory, with bash as the shell,
RUNS times, and prints per step: tool calls, median latency of the step,
median answer bytes (the JSON text the tools return). Not a test: figures
for the report (issue 17's "Done when").

    python3 tests/mcp/scenario_table.py [BINARY] [RUNS]
"""

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

BINARY = sys.argv[1] if len(sys.argv) > 1 else "target/debug/tmux-engine"
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 5


async def call(session, tool, args, sizes):
    result = await session.call_tool(tool, args)
    text = result.content[0].text
    sizes.append(len(text.encode()))
    if result.is_error:
        raise RuntimeError(f"{tool}: {text}")
    return json.loads(text)


async def run_once(session, run, rows):
    def step(name):
        return rows.setdefault(name, {"calls": [], "secs": [], "bytes": []})

    async def timed(name, calls):
        row = step(name)
        sizes = []
        start = time.perf_counter()
        answer = await calls(sizes)
        row["secs"].append(time.perf_counter() - start)
        row["calls"].append(len(sizes))
        row["bytes"].append(sum(sizes))
        return answer

    name = f"s{run}"
    send = lambda text: {"terminal": name, "text": text, "submit": True}

    await timed("spawn a shell", lambda s: call(session, "terminal_spawn", {"name": name}, s))
    a = await timed("echo $((6*7)) -> 42",
                    lambda s: call(session, "terminal_send", send("echo $((6*7))"), s))
    assert a["output"] == "42\n" and a["exit_code"] == 0, a
    a = await timed("sleep 3; echo done; false -> exit_code 1",
                    lambda s: call(session, "terminal_send", send("sleep 3; echo done; false"), s))
    assert a["output"] == "done\n" and a["exit_code"] == 1, a

    async def repl(s):
        await call(session, "terminal_send", send("python3 -q"), s)
        answer = await call(session, "terminal_send", send("1+1"), s)
        await call(session, "terminal_send", send("exit()"), s)
        return answer
    a = await timed("python3 -q, 1+1 -> 2, exit()", repl)
    assert "2\n" in a["output"], a

    a = await timed("seq 1 200000 (bounded)",
                    lambda s: call(session, "terminal_send", send("seq 1 200000"), s))
    assert a["truncated"] and a["exit_code"] == 0, a

    async def every_line(s):
        cursor, lines = a["start_cursor"], []
        while True:
            page = await call(session, "terminal_read", {"terminal": name, "since": cursor}, s)
            lines += page["lines"]
            cursor = page["next_cursor"]
            if not page["more"]:
                return lines
    lines = await timed("every seq line by cursor", every_line)
    numbers = [line for line in lines if line.isdigit()]
    assert numbers == [str(n) for n in range(1, 200001)], len(numbers)

    await timed("kill", lambda s: call(session, "terminal_kill", {"terminal": name}, s))


async def main():
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(f"{root}/rt")
        env = dict(os.environ,
                   TMUX_ENGINE_STATE_DIR=f"{root}/state", XDG_RUNTIME_DIR=f"{root}/rt",
                   TMUX_ENGINE_SHELL="/bin/bash", TMUX_ENGINE_OWNER="bench")
        env.pop("TMUX_ENGINE_RUNTIME_DIR", None)
        params = StdioServerParameters(command=BINARY, args=["mcp"], env=env)
        rows = {}
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                for run in range(RUNS):
                    await run_once(session, run, rows)
    print(f"| step | calls | median latency | answer bytes (median) |")
    print(f"|---|---|---|---|")
    for name, row in rows.items():
        print(f"| {name} | {statistics.median(row['calls']):g} "
              f"| {statistics.median(row['secs']) * 1000:.0f} ms "
              f"| {statistics.median(row['bytes']):,.0f} |")


asyncio.run(main())
