"""Terminal-Bench's session class beside tmux-engine's drop-in, over the same
30 scripted agent steps on a local-process environment (Harbor's
``BaseEnvironment.exec`` signature, ``bash -c`` on this machine), in one run.

Per class: steps whose output came back exactly (the step's expected text
verbatim in the ``get_incremental_output`` that follows it), steps whose
exit code the class gives and gets right, wall time, and processes per step
(``exec`` calls, each one process in the environment). A step that runs
into its timeout unexpectedly is followed by C-c, as an agent would send
it, so one stuck step does not sink the rest.

Two ways for each class: ``blocking`` (``send_keys(..., block=True)`` for
every command: Harbor's class types ``; tmux wait -S done`` after it), and
Terminus-2's own (``block=False`` with the model's ``duration`` as
``min_timeout_sec``, 1 s here, then ``get_incremental_output``).

Run by scripts/bench-terminal-bench (it makes the venv with Harbor from
PyPI); prints a Markdown table and writes JSON to $BENCH_JSON if set.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

PAYLOAD = "".join(f"{n:07d}\n" for n in range(25_000))  # 200,000 bytes
FIFTY_K = "".join(f"{n}\n" for n in range(1, 50_001))


@dataclass
class Step:
    keys: List[str]
    expected: Optional[str]  # verbatim in the incremental output; None: not judged
    exit_code: Optional[int] = None  # the command's, when it ends
    block: bool = True
    timeout: float = 10.0
    times_out: bool = False


STEPS: List[Step] = [
    Step(["echo hello", "Enter"], "hello\n", 0),
    Step(["printf 'a\\tb\\n'", "Enter"], "a\tb\n", 0),
    Step(["false", "Enter"], None, 1),
    Step(["(exit 3)", "Enter"], None, 3),
    Step(["cd /tmp && pwd", "Enter"], "/tmp\n", 0),
    Step(["cat > bench-notes.txt <<'EOF'\nalpha\n beta; gamma\nEOF", "Enter"], None, 0),
    Step(["cat bench-notes.txt", "Enter"], "alpha\n beta; gamma\n", 0),
    Step(["python3 -q", "Enter"], ">>> ", None),
    Step(["6*7", "Enter"], "42\n", None),
    Step(["print('x' * 3)", "Enter"], "xxx\n", None),
    Step(["exit()", "Enter"], None, 0),
    Step(["read -p 'name? ' who; echo hello-$who", "Enter"], "name? ", None),
    Step(["ada", "Enter"], "hello-ada\n", 0),
    Step([f"wc -c <<'EOF'\n{PAYLOAD}EOF", "Enter"], f"{len(PAYLOAD)}\n", 0, timeout=120),
    Step(["seq 1 50000", "Enter"], FIFTY_K, 0, timeout=120),
    Step(["seq 1 50000 | tail -n 1", "Enter"], "50000\n", 0),
    Step(["sleep 600", "Enter"], None, None, timeout=2, times_out=True),
    Step(["C-c"], None, None, block=False, timeout=0),
    Step(["echo after-timeout", "Enter"], "after-timeout\n", 0),
    Step(["for i in 1 2 3; do echo loop-$i; done", "Enter"], "loop-1\nloop-2\nloop-3\n", 0),
    Step(["echo 'semi; colon'; echo two", "Enter"], "semi; colon\ntwo\n", 0),
    Step(["ls /nonexistent-bench-dir", "Enter"], "No such file or directory", 2),
    Step(["export V=value && echo $V", "Enter"], "value\n", 0),
    Step(["echo $((6*7))", "Enter"], "42\n", 0),
    Step(["printf 'no newline'", "Enter"], "no newline", 0),
    Step(["yes | head -n 3", "Enter"], "y\ny\ny\n", 0),
    Step(["printf '%s\\n' \"$(seq 1 3)\"", "Enter"], "1\n2\n3\n", 0),
    Step(["test -d /tmp && echo dir", "Enter"], "dir\n", 0),
    Step(["echo 'quote \"inside\"'", "Enter"], 'quote "inside"\n', 0),
    Step(["echo done-$((1+1))", "Enter"], "done-2\n", 0),
]
assert len(STEPS) == 30


@dataclass
class Result:
    stdout: Optional[str]
    stderr: Optional[str]
    return_code: int


class LocalEnvironment:
    """Harbor's ``exec`` on this machine; counts the processes it starts."""

    session_id = "bench"

    def __init__(self, env: Dict[str, str], cwd: str):
        self.env = env
        self.cwd = cwd
        self.calls = 0

    async def exec(self, command: str, cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None,
                   timeout_sec: Optional[int] = None, user: Union[str, int, None] = None) -> Any:
        self.calls += 1
        process = await asyncio.create_subprocess_exec(
            "bash", "-c", command, cwd=cwd or self.cwd, env={**self.env, **(env or {})},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), timeout_sec)
        return result_type()(stdout=out.decode(errors="replace"), stderr=err.decode(errors="replace"),
                             return_code=process.returncode)

    async def upload_file(self, source_path: Any, target_path: str) -> None:
        Path(target_path).write_bytes(Path(source_path).read_bytes())

    async def download_file(self, source_path: str, target_path: Any) -> None:
        Path(target_path).write_bytes(Path(source_path).read_bytes())


def result_type() -> Any:
    try:
        from harbor.environments.base import ExecResult  # Harbor's own, where installed
        return ExecResult
    except ImportError:
        return Result


@dataclass
class Outcome:
    name: str
    exact: int = 0
    judged: int = 0
    exit_codes: int = 0
    exit_judged: int = 0
    wall: float = 0.0
    calls: List[int] = field(default_factory=list)
    misses: List[str] = field(default_factory=list)


def normalized(text: str) -> str:
    return text.replace("\r\n", "\n")


# Terminus-2's way: every command non-blocking, the model's `duration`
# waited (a guess: one second here, two for the command that outlives it).
DURATION = 1.0


async def drive(name: str, session: Any, environment: LocalEnvironment, blocking: bool) -> Outcome:
    outcome = Outcome(name)
    started = time.monotonic()
    await session.start()
    await session.get_incremental_output()
    for number, step in enumerate(STEPS, 1):
        before = environment.calls
        answer = None
        try:
            if step.block and blocking:
                answer = await session.send_keys(step.keys, block=True, max_timeout_sec=step.timeout)
            elif step.block:
                duration = DURATION if step.timeout >= DURATION else step.timeout
                await session.send_keys(step.keys, block=False, min_timeout_sec=duration)
            else:
                await session.send_keys(step.keys, block=False, min_timeout_sec=0.0)
        except TimeoutError:
            if not step.times_out:
                outcome.misses.append(f"{number}: timed out")
                # As an agent would: C-c, so one stuck step does not sink
                # every step after it (the same for both classes).
                await session.send_keys(["C-c"], block=False, min_timeout_sec=0.5)
        text = normalized(await session.get_incremental_output())
        outcome.calls.append(environment.calls - before)
        if step.expected is not None:
            outcome.judged += 1
            if step.expected in text:
                outcome.exact += 1
            else:
                outcome.misses.append(f"{number}: {step.keys[0][:30]!r} not exact")
        if step.exit_code is not None:
            outcome.exit_judged += 1
            code = answer.get("exit_code") if isinstance(answer, dict) else None
            if code == step.exit_code:
                outcome.exit_codes += 1
    outcome.wall = time.monotonic() - started
    return outcome


async def main() -> None:
    from tmux_engine.terminal_bench import TmuxSession as EngineSession

    classes = [("tmux-engine drop-in", EngineSession)]
    try:
        from harbor.agents.terminus_2.tmux_session import TmuxSession as HarborSession
        classes.insert(0, ("Harbor TmuxSession", HarborSession))
    except ImportError as error:
        print(f"Harbor is not installed ({error}): its row is missing", file=sys.stderr)
        if os.environ.get("BENCH_NEED_HARBOR"):
            sys.exit(1)
    outcomes = []
    runs = [(f"{name}, {way}", cls, way == "blocking") for way in ("blocking", "Terminus-2's way")
            for name, cls in classes]
    for name, cls, blocking in runs:
        with tempfile.TemporaryDirectory(prefix="tb-") as work:
            os.chmod(work, 0o700)
            env = dict(os.environ)
            env.pop("TMUX", None)
            # Private tmux and engine directories for each class.
            env.update(TMUX_TMPDIR=work, TMUX_ENGINE_STATE_DIR=f"{work}/state",
                       TMUX_ENGINE_RUNTIME_DIR=f"{work}/rt", HOME=work)
            environment = LocalEnvironment(env, work)
            session = cls("bench", environment, Path(work) / "pane.log", None, None)
            try:
                outcomes.append(await drive(name, session, environment, blocking))
            finally:
                await environment.exec("tmux kill-server 2>/dev/null; "
                                       "tmux-engine kill bench >/dev/null 2>&1; true")
    print("| class | exact outputs | exit codes | wall time | processes per step (median, max) |")
    print("|---|---|---|---|---|")
    for o in outcomes:
        print(f"| {o.name} | {o.exact} of {o.judged} | {o.exit_codes} of {o.exit_judged} | {o.wall:.1f} s "
              f"| {statistics.median(o.calls):g}, {max(o.calls)} |")
    for o in outcomes:
        for miss in o.misses:
            print(f"- {o.name}: step {miss}")
    if os.environ.get("BENCH_JSON"):
        Path(os.environ["BENCH_JSON"]).write_text(json.dumps([o.__dict__ for o in outcomes], indent=2))


if __name__ == "__main__":
    asyncio.run(main())
