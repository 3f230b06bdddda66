"""The client against the real binary (the wheel's, installed in this venv)
and real tmux, each test on the plugin's private registry."""

import asyncio
import os
import shutil
import time

import pytest

import tmux_engine
from tmux_engine import AsyncEngine, Engine, EngineError


def test_the_wheel_put_the_binary_beside_the_interpreter():
    binary = tmux_engine.find_binary()
    assert os.path.dirname(binary) == os.path.dirname(os.path.abspath(os.sys.executable)) or binary == os.environ.get(
        "TMUX_ENGINE_BIN"
    )
    assert shutil.which("tmux-engine") is not None


def test_run_gives_exact_output_and_the_exit_code(terminal):
    result = terminal.run("printf 'a  b\\n\\tc\\n'; (exit 3)")
    assert result.wait_reason == "command", result.raw
    assert result.exit_code == 3
    assert result.output == "a  b\n\tc\n", result.raw
    ok = terminal.run("true")
    assert (ok.exit_code, ok.output) == (0, "")


def test_read_since_a_cursor_is_the_output_after_it(terminal):
    first = terminal.run("echo one")
    assert first.cursor, first.raw
    terminal.run("echo two")
    page = terminal.read(since=first.cursor)
    assert "two" in page.text and "one" not in page.text, page.raw
    assert page.next_cursor
    exact = terminal.read(since=first.cursor, format="bytes")
    assert b"two\r\n" in exact.data
    nothing = terminal.read(since=page.next_cursor)
    assert nothing.text == "", nothing.raw


def test_screen_wait_commands_and_search(tmux_engine, terminal):
    terminal.run("echo needle-$((40+2))")
    screen = terminal.screen()
    assert any("needle-42" in line for line in screen.lines), screen
    assert screen.cols > 0 and screen.rows > 0
    assert terminal.wait(text="needle-42", since="screen").matched
    with pytest.raises(EngineError) as timeout:
        terminal.wait(text="never-printed", timeout=0.3)
    assert timeout.value.code == "TIMEOUT"
    commands = terminal.commands()
    assert any((c.command or "").startswith("echo needle") and c.exit_code == 0 for c in commands), commands
    assert terminal.run("sleep 0.3").exit_code == 0
    slept = terminal.commands()[-1]
    assert slept.command == "sleep 0.3" and not slept.running, slept.raw
    assert slept.duration_secs >= 0.3, slept.raw
    found = tmux_engine.search("needle-4[0-9]")
    assert "needle-42" in str(found), found


def _sleep_in_front(shell):
    """Whether a ``sleep 1000`` child of ``shell`` leads its terminal's
    foreground process group (/proc/PID/stat: pgrp == tpgid)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                if cmdline.read() != b"sleep\x001000\x00":
                    continue
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(") ", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        ppid, pgrp, tpgid = int(fields[1]), int(fields[2]), int(fields[5])
        if ppid == shell and pgrp == tpgid:
            return True
    return False


def test_signal_interrupts_the_foreground_command(terminal):
    # The prompt first: then the shell runs what is typed at once.
    assert terminal.run("true").exit_code == 0
    started = terminal.send("sleep 1000", submit=True, wait="none")
    assert started.typed
    # The send returned once the text was typed: the shell marks the
    # command's start when it reads the line, a moment later.
    deadline = time.monotonic() + 20
    running = terminal.commands()
    while not (running and running[-1].command == "sleep 1000") and time.monotonic() < deadline:
        time.sleep(0.02)
        running = terminal.commands()
    assert running and running[-1].command == "sleep 1000", running
    # The shell marks the command's start before it forks it: the signal
    # goes to the foreground group, so wait until that is sleep's own
    # (else bash itself gets the SIGINT, and sleep runs on).
    shell = terminal.show().pid
    while not _sleep_in_front(shell) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _sleep_in_front(shell), "sleep 1000 never came to the foreground"
    sent = terminal.signal("INT")
    assert sent["signal"] in ("SIGINT", "INT"), sent
    ended = terminal.wait(command="last", timeout=20)
    assert ended.exit_code == 130, ended.raw


def test_kill_forgets_the_terminal(tmux_engine):
    t = tmux_engine.spawn("sh", "-c", "echo spawned; exec sleep 1000", name="doomed")
    t.wait(text="spawned", since="screen")
    assert [s.name for s in tmux_engine.list()] == ["doomed"]
    t.kill()
    assert tmux_engine.list() == []
    with pytest.raises(EngineError) as gone:
        t.screen()
    assert gone.value.code == "NO_TERMINAL"


def test_a_program_that_exits_reports_its_status(tmux_engine):
    t = tmux_engine.spawn("sh", "-c", "exit 7")
    match = t.wait(exit=True, timeout=20)
    assert "7" in str(match.matched), match.raw


def test_asyncio_client_drives_the_same_verbs(tmux_engine):
    async def body():
        engine = AsyncEngine(state_dir=tmux_engine.state_dir, owner="pytest", env=tmux_engine.env)
        t = await engine.spawn(name="async")
        results = await asyncio.gather(t.run("echo left"), engine.screen(t))
        assert results[0].output == "left\n", results[0].raw
        assert (await engine.list())[0].name == "async"
        await t.kill()
        assert await engine.list() == []
        await engine.aclose()

    asyncio.run(body())


def test_errors_carry_their_stable_codes(tmux_engine):
    with pytest.raises(EngineError) as error:
        tmux_engine.screen("no-such-terminal")
    assert error.value.code == "NO_TERMINAL"
    with pytest.raises(EngineError) as bad:
        tmux_engine.spawn(cwd="relative/dir")
    assert bad.value.code in ("INVALID_INPUT", "IO"), bad.value


def test_another_owner_sees_nothing(tmux_engine, terminal):
    other = Engine(state_dir=tmux_engine.state_dir, owner="someone-else", env=tmux_engine.env)
    with other:
        assert other.list() == []
        with pytest.raises(EngineError) as foreign:
            other.screen(terminal.id)
        assert foreign.value.code == "FOREIGN_TERMINAL"


def test_the_wheel_carries_the_relay_every_terminal_uses(tmux_engine, terminal):
    # The small relay beside the binary, not the whole engine per terminal.
    relay = os.path.join(os.path.dirname(tmux_engine.binary), "tmux-engine-relay")
    assert os.access(relay, os.X_OK), relay
    runtime = tmux_engine.env["TMUX_ENGINE_RUNTIME_DIR"]
    assert terminal.run("echo relayed").output == "relayed\n"
    relays = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                words = f.read().split(b"\0")
        except OSError:
            continue
        if len(words) > 2 and words[1] == b"__stream-relay" and words[2].decode(errors="replace").startswith(runtime):
            relays.append(words[0].decode())
    assert relays == [relay], relays
