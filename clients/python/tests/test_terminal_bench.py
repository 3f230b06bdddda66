"""The Terminal-Bench drop-in (``tmux_engine.terminal_bench.TmuxSession``)
through a local-process environment with Harbor's ``exec`` signature: the
agent scenarios a benchmark task meets, each answer exact."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Dict, Optional, Union

import pytest

from tmux_engine import Engine
from tmux_engine.terminal_bench import TmuxSession, is_key_name


@dataclass
class ExecResult:
    """Harbor's ``ExecResult`` fields."""

    stdout: Optional[str]
    stderr: Optional[str]
    return_code: int


class LocalEnvironment:
    """Harbor's ``BaseEnvironment.exec`` on this machine: ``bash -c``."""

    session_id = "local"

    def __init__(self, env: Dict[str, str], cwd: str):
        self.env = env
        self.cwd = cwd
        self.commands = []

    async def exec(self, command: str, cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None,
                   timeout_sec: Optional[int] = None, user: Union[str, int, None] = None) -> ExecResult:
        self.commands.append(command)
        process = await asyncio.create_subprocess_exec(
            "bash", "-c", command, cwd=cwd or self.cwd, env={**self.env, **(env or {})},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout_sec)
        return ExecResult(stdout.decode(errors="replace"), stderr.decode(errors="replace"), process.returncode)


def new_output(text: str) -> str:
    assert text.startswith("New Terminal Output:\n"), text[:500]
    return text[len("New Terminal Output:\n"):]


@pytest.fixture
def session(tmux_engine: Engine, tmp_path):
    env = {**tmux_engine.env, "TMUX_ENGINE_OWNER": "pytest"}
    # The terminal starts in the directory its spawn ran in: the test's.
    environment = LocalEnvironment(env, str(tmp_path))
    return TmuxSession("agent", environment, "/tmp/unused.log", None, None, pane_width=120, pane_height=30,
                       extra_env={"BENCH_MARK": "set-by-extra-env"}, binary=tmux_engine.binary,
                       state_dir=tmux_engine.state_dir)


def test_key_names_are_told_from_text():
    for key in ["Enter", "C-c", "c-d", "M-x", "^C", "Escape", "F12", "PageUp", "KPEnter", "BSpace"]:
        assert is_key_name(key), key
    for text in ["q", "exit()", "README", "echo hi", "ls -la", "C-", "F13", ""]:
        assert not is_key_name(text), text


def test_a_benchmark_session_answers_exactly(session: TmuxSession):
    async def scenario() -> None:
        await session.start()
        assert await session.is_session_alive()
        first = await session.get_incremental_output()
        assert first.startswith("Current Terminal Screen:\n"), first

        # A command's exact output and its exit code (Harbor's class has none).
        answer = await session.send_keys(["printf 'a\\tb\\n'; echo $BENCH_MARK; (exit 3)", "Enter"], block=True)
        assert answer["exit_code"] == 3 and session.last_exit_code == 3, answer
        assert "a\tb\nset-by-extra-env\n" in new_output(await session.get_incremental_output())

        # A heredoc: no `; tmux wait -S done` lands in its body.
        await session.send_keys(["cat > notes.txt <<'EOF'\nfirst line\n  second; line\nEOF\n"], block=True,
                                max_timeout_sec=30)
        answer = await session.send_keys(["cat notes.txt", "Enter"], block=True)
        assert answer["output"] == "first line\n  second; line\n", answer
        assert "first line\n  second; line\n" in new_output(await session.get_incremental_output())

        # A REPL: the blocking send returns at its prompt, not at the timeout.
        answer = await session.send_keys(["python3 -q", "Enter"], block=True, max_timeout_sec=30)
        assert answer["wait_reason"] == "stdin_read", answer
        answer = await session.send_keys(["6*7", "Enter"], block=True, max_timeout_sec=30)
        assert "42\n" in answer["output"], answer
        answer = await session.send_keys(["exit()", "Enter"], block=True, max_timeout_sec=30)
        assert answer["exit_code"] == 0, answer
        await session.get_incremental_output()

        # A `read` prompt answered by the next send.
        answer = await session.send_keys(["read -p 'name? ' who; echo hello-$who", "Enter"], block=True)
        assert answer["wait_reason"] == "stdin_read", answer
        answer = await session.send_keys(["ada", "Enter"], block=True)
        assert answer["exit_code"] == 0, answer
        assert "hello-ada\n" in new_output(await session.get_incremental_output())

        # 50,000 lines: every one of them in the incremental output, though
        # most scrolled out of the screen long ago.
        answer = await session.send_keys(["seq 1 50000", "Enter"], block=True, max_timeout_sec=120)
        assert answer["exit_code"] == 0, answer
        text = new_output(await session.get_incremental_output())
        expected = "".join(f"{n}\n" for n in range(1, 50001))
        assert expected in text, (len(text), text[:200], text[-200:])

        # 200 KB of text: staged through files, typed in one send.
        payload = "".join(f"{n:07d}\n" for n in range(25_000))
        answer = await session.send_keys([f"wc -c <<'EOF'\n{payload}EOF", "Enter"], block=True,
                                         max_timeout_sec=120)
        assert answer["exit_code"] == 0, answer
        assert answer["output"].strip().endswith(str(len(payload))), answer["output"][-200:]
        assert any("--stdin" in command for command in session.environment.commands)
        await session.get_incremental_output()

        # A command that outlives its timeout: TimeoutError, as Harbor's
        # class raises; C-c then ends it, and its exit code is known.
        with pytest.raises(TimeoutError):
            await session.send_keys(["sleep 600", "Enter"], block=True, max_timeout_sec=1)
        await session.send_keys(["C-c"], min_timeout_sec=0.0)
        answer = await session.send_keys(["echo after-timeout", "Enter"], block=True, max_timeout_sec=30)
        assert answer["output"] == "after-timeout\n", answer
        assert "after-timeout\n" in new_output(await session.get_incremental_output())

        # Nothing new: the screen, as Harbor's class answers.
        quiet = await session.get_incremental_output()
        assert quiet.startswith("Current Terminal Screen:\n") and "after-timeout" in quiet, quiet
        assert "after-timeout" in await session.capture_pane()
        whole = await session.capture_pane(capture_entire=True)
        assert "after-timeout" in whole and whole.count("\n") > 30, whole[-500:]
        await session.stop()
        assert await session.is_session_alive()

    asyncio.run(scenario())


def test_a_failed_start_says_why(tmux_engine: Engine, tmp_path):
    env = {**tmux_engine.env, "TMUX_ENGINE_OWNER": "pytest"}
    session = TmuxSession("twice", LocalEnvironment(env, str(tmp_path)), tmp_path / "log", None, None,
                          binary=tmux_engine.binary, state_dir=tmux_engine.state_dir)
    again = TmuxSession("twice", LocalEnvironment(env, str(tmp_path)), tmp_path / "log", None, None,
                        binary=tmux_engine.binary, state_dir=tmux_engine.state_dir)

    async def scenario() -> None:
        await session.start()
        with pytest.raises(RuntimeError, match="Failed to start tmux session"):
            await again.start()

    asyncio.run(scenario())
    with pytest.raises(ValueError):
        TmuxSession("bad", LocalEnvironment(env, str(tmp_path)), tmp_path / "log", None, None, pane_width=0)


def test_a_recording_lands_where_harbor_asks(tmux_engine: Engine, tmp_path):
    env = {**tmux_engine.env, "TMUX_ENGINE_OWNER": "pytest"}
    remote = tmp_path / "remote.cast"
    session = TmuxSession("recorded", LocalEnvironment(env, str(tmp_path)), tmp_path / "log", None, remote,
                          binary=tmux_engine.binary, state_dir=tmux_engine.state_dir)

    async def scenario() -> None:
        await session.start()
        await session.send_keys(["echo recorded-$((2*21))", "Enter"], block=True)
        await session.stop()

    asyncio.run(scenario())
    cast = remote.read_text()
    header = json.loads(cast.splitlines()[0])
    assert header["version"] == 2 and header["width"] == 160, header
    events = [json.loads(line) for line in cast.splitlines()[1:]]
    assert "recorded-42" in "".join(event[2] for event in events if event[1] == "o")
