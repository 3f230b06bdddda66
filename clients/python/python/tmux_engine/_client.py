"""The client: one long-lived ``tmux-engine mcp`` process per engine object
(the registry's verbs over stdio, JSON-RPC), so cursors, a shell's command
marks and waits span calls exactly as in any long-lived face; the
terminals live in the state directory's registry and outlive the client.
Sync, or asyncio over the same process."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ._answers import EngineError, Match, Page, Screen, SendResult, Snapshot, commands_of

Target = Union[str, "Terminal", "AsyncTerminal"]
PROTOCOL_VERSION = "2025-06-18"


def find_binary() -> str:
    """The ``tmux-engine`` binary: ``$TMUX_ENGINE_BIN``, else the one this
    package's wheel installed beside the interpreter, else ``PATH``'s."""
    explicit = os.environ.get("TMUX_ENGINE_BIN")
    if explicit:
        return explicit
    for directory in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        candidate = Path(directory) / "tmux-engine"
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("tmux-engine")
    if found:
        return found
    raise EngineError("TMUX_ENGINE_MISSING", "no tmux-engine binary (pip install tmux-engine)")


def _target(t: Target) -> str:
    return t if isinstance(t, str) else t.id


def _drop_none(arguments: Dict[str, Any]) -> Dict[str, Any]:
    return {key: value for key, value in arguments.items() if value is not None}


class _Process:
    """``tmux-engine mcp``: requests by id, answers routed by a reader thread."""

    def __init__(self, argv: List[str], env: Dict[str, str]):
        self.argv = argv
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        self.ids = itertools.count(1)
        self.pending: Dict[int, Future] = {}
        self.lock = threading.Lock()
        self.stderr: List[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "tmux-engine-python", "version": "0.1.0"},
            },
        ).result()
        self._write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _write(self, message: Dict[str, Any]) -> None:
        data = (json.dumps(message) + "\n").encode()
        with self.lock:
            assert self.process.stdin is not None
            self.process.stdin.write(data)
            self.process.stdin.flush()

    def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr = (self.stderr + [line])[-50:]

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if "method" in message:
                if "id" in message:  # A request of the server's (ping): answered empty.
                    self._write({"jsonrpc": "2.0", "id": message["id"], "result": {}})
                continue
            future = self.pending.pop(message.get("id"), None)
            if future is not None:
                future.set_result(message)
        ended = EngineError("ENGINE_GONE", "tmux-engine mcp ended: " + b"".join(self.stderr).decode(errors="replace"))
        for future in list(self.pending.values()):
            future.set_exception(ended)
        self.pending.clear()

    def request(self, method: str, params: Dict[str, Any]) -> Future:
        future: Future = Future()
        if self.process.poll() is not None:
            future.set_exception(EngineError("ENGINE_GONE", "tmux-engine mcp has ended"))
            return future
        request_id = next(self.ids)
        self.pending[request_id] = future
        self._write({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return future

    def call(self, tool: str, arguments: Dict[str, Any]) -> Future:
        """A tool's answer (a future of the JSON value, or of its EngineError)."""
        answer: Future = Future()

        def settle(message_future: Future) -> None:
            try:
                answer.set_result(_tool_answer(message_future.result()))
            except BaseException as error:  # noqa: BLE001 - handed to the caller
                answer.set_exception(error)

        self.request("tools/call", {"name": tool, "arguments": arguments}).add_done_callback(settle)
        return answer

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _tool_answer(message: Dict[str, Any]) -> Any:
    if "error" in message:
        error = message["error"]
        raise EngineError("INVALID_INPUT", str(error.get("message", error)))
    result = message["result"]
    texts = [block.get("text", "") for block in result.get("content", []) if block.get("type") == "text"]
    if result.get("isError"):
        text = "\n".join(texts)
        code, _, rest = text.partition(": ")
        if code and code.replace("_", "").isalpha() and code.isupper():
            raise EngineError(code, rest)
        raise EngineError("ENGINE_FAILED", text)
    if "structuredContent" in result:
        return result["structuredContent"]
    return json.loads(texts[0]) if texts else None


class Engine:
    """The registry of one state directory, as one owner: spawn terminals
    that outlive this process, then drive them. Synchronous; see
    :class:`AsyncEngine` for asyncio. ``close()`` (or ``with``) ends the
    engine's process; the terminals keep running."""

    def __init__(
        self,
        state_dir: Union[str, os.PathLike, None] = None,
        owner: Optional[str] = None,
        *,
        binary: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
    ):
        self.binary = binary or find_binary()
        self.state_dir = None if state_dir is None else os.fspath(state_dir)
        self.owner = owner
        self.env = dict(os.environ if env is None else env)
        argv = [self.binary]
        if self.state_dir is not None:
            argv += ["--state-dir", self.state_dir]
        if self.owner is not None:
            argv += ["--owner", self.owner]
        self._process = _Process(argv + ["mcp"], self.env)

    def close(self) -> None:
        self._process.close()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def _call(self, tool: str, **arguments: Any) -> Any:
        return self._process.call(tool, _drop_none(arguments)).result()

    def spawn(
        self,
        *command: str,
        name: Optional[str] = None,
        cwd: Union[str, os.PathLike, None] = None,
        env: Optional[Mapping[str, str]] = None,
        size: Optional[Tuple[int, int]] = None,
        shell: Optional[str] = None,
        keep_history: Optional[bool] = None,
        agent: bool = False,
    ) -> "Terminal":
        """Starts a terminal: ``command`` run exactly (no shell parsing),
        ``shell`` as ``$SHELL -c LINE``, or neither: the shell."""
        return Terminal(self, Snapshot.of(self._call("terminal_spawn", **_spawn(command, name, cwd, env, size, shell, keep_history, agent))))

    def terminal(self, t: str) -> "Terminal":
        """A terminal already spawned, by id or name."""
        return Terminal(self, self.show(t))

    def list(self) -> List[Snapshot]:
        """The owner's terminals in creation order."""
        return [Snapshot.of(s) for s in _items(self._call("terminal_list"))]

    def show(self, t: Target) -> Snapshot:
        return Snapshot.of(self._call("terminal_show", terminal=_target(t)))

    def send(
        self,
        t: Target,
        text: str = "",
        *,
        submit: bool = False,
        wait: Optional[str] = None,
        timeout: Optional[float] = None,
        keys: Optional[Sequence[str]] = None,
        include_screen: Optional[bool] = None,
        max_bytes: Optional[int] = None,
    ) -> SendResult:
        """Types ``text`` exactly (``submit``: then Enter) and waits
        (``wait``: ``stdin``, the default, until the program asks for
        input again; ``command``; ``idle``; ``exit``; ``none``)."""
        return SendResult.of(self._call("terminal_send", **_send(t, text, submit, wait, timeout, keys, include_screen, max_bytes)))

    def run(self, t: Target, command: str, *, timeout: Optional[float] = None) -> SendResult:
        """Runs one shell command line: typed, submitted, waited for."""
        return self.send(t, command, submit=True, timeout=timeout)

    def read(
        self,
        t: Target,
        *,
        offset: Optional[int] = None,
        count: Optional[int] = None,
        since: Optional[str] = None,
        format: Optional[str] = None,
        max_bytes: Optional[int] = None,
    ) -> Page:
        """A page of scrollback, or with ``since`` (a cursor) the output
        after it: ``format`` ``text`` (the default here), ``lines`` or ``bytes``."""
        return Page.of(self._call("terminal_read", **_read(t, offset, count, since, format, max_bytes)))

    def screen(self, t: Target) -> Screen:
        return Screen.of(self._call("terminal_screen", terminal=_target(t)))

    def wait(
        self,
        t: Target,
        *,
        text: Optional[str] = None,
        regex: Optional[str] = None,
        exit: Optional[bool] = None,
        command: Optional[str] = None,
        since: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> Match:
        """Until ``text``/``regex`` shows, the program exits, or a command
        ends; ``EngineError`` with code ``TIMEOUT`` past ``timeout``."""
        return Match.of(self._call("terminal_wait", terminal=_target(t), text=text, regex=regex, exit=exit,
                                   command=command, since=since, timeout_secs=timeout))

    def signal(self, t: Target, signal: str) -> Dict[str, Any]:
        """A real signal (``INT``, ``TERM``, ...) to the foreground process group."""
        return self._call("terminal_signal", terminal=_target(t), signal=signal)

    def kill(self, t: Target) -> Dict[str, Any]:
        """Kills the terminal's whole process tree and server, and forgets it."""
        return self._call("terminal_kill", terminal=_target(t))

    def commands(self, t: Target, *, limit: Optional[int] = None) -> List[Any]:
        """The newest commands an integrated shell marked."""
        return commands_of(self._call("terminal_commands", terminal=_target(t), limit=limit))

    def search(self, regex: str, *, terminal: Optional[Target] = None, context: Optional[int] = None,
               max_matches: Optional[int] = None) -> Dict[str, Any]:
        """Searches scrollback: one terminal's, or all of the owner's."""
        return self._call("terminal_search", regex=regex, terminal=None if terminal is None else _target(terminal),
                          context=context, max_matches=max_matches)


def _items(answer: Any) -> List[Dict[str, Any]]:
    if isinstance(answer, list):
        return answer
    for key in ("terminals", "items", "result"):
        if isinstance(answer, dict) and isinstance(answer.get(key), list):
            return answer[key]
    raise EngineError("ENGINE_FAILED", f"an unexpected list answer: {answer!r}")


def _spawn(command: Sequence[str], name: Optional[str], cwd: Union[str, os.PathLike, None],
           env: Optional[Mapping[str, str]], size: Optional[Tuple[int, int]], shell: Optional[str],
           keep_history: Optional[bool], agent: bool) -> Dict[str, Any]:
    return {
        "name": name,
        "command": list(command) or None,
        "shell": shell,
        "cwd": None if cwd is None else os.fspath(cwd),
        "env": None if env is None else dict(env),
        "cols": None if size is None else size[0],
        "rows": None if size is None else size[1],
        "keep_history": keep_history,
        "agent": agent,
    }


def _send(t: Target, text: str, submit: bool, wait: Optional[str], timeout: Optional[float],
          keys: Optional[Sequence[str]], include_screen: Optional[bool], max_bytes: Optional[int]) -> Dict[str, Any]:
    return {
        "terminal": _target(t),
        "text": text,
        "submit": submit,
        "wait": wait,
        "timeout_secs": timeout,
        "keys": None if keys is None else list(keys),
        "include_screen": include_screen,
        "max_bytes": max_bytes,
    }


def _read(t: Target, offset: Optional[int], count: Optional[int], since: Optional[str], format: Optional[str],
          max_bytes: Optional[int]) -> Dict[str, Any]:
    return {
        "terminal": _target(t),
        "offset": offset,
        "count": count,
        "since": since,
        "format": (format or "text") if since is not None else None,
        "max_bytes": max_bytes,
    }


class Terminal:
    """One terminal of an :class:`Engine`: the engine's verbs, bound to it."""

    def __init__(self, engine: Engine, snapshot: Snapshot):
        self.engine = engine
        self.snapshot = snapshot
        self.id = snapshot.id
        self.name = snapshot.name

    def __repr__(self) -> str:
        return f"Terminal({self.id!r}, name={self.name!r})"

    def send(self, text: str = "", **options: Any) -> SendResult:
        return self.engine.send(self, text, **options)

    def run(self, command: str, *, timeout: Optional[float] = None) -> SendResult:
        return self.engine.run(self, command, timeout=timeout)

    def read(self, **options: Any) -> Page:
        return self.engine.read(self, **options)

    def screen(self) -> Screen:
        return self.engine.screen(self)

    def wait(self, **options: Any) -> Match:
        return self.engine.wait(self, **options)

    def signal(self, signal: str) -> Dict[str, Any]:
        return self.engine.signal(self, signal)

    def kill(self) -> Dict[str, Any]:
        return self.engine.kill(self)

    def commands(self, *, limit: Optional[int] = None) -> List[Any]:
        return self.engine.commands(self, limit=limit)

    def show(self) -> Snapshot:
        return self.engine.show(self)


class AsyncEngine:
    """:class:`Engine` for asyncio: the same verbs, awaited; calls run
    concurrently over the one engine process."""

    def __init__(self, state_dir: Union[str, os.PathLike, None] = None, owner: Optional[str] = None, *,
                 binary: Optional[str] = None, env: Optional[Mapping[str, str]] = None):
        self.sync = Engine(state_dir, owner, binary=binary, env=env)

    async def _call(self, tool: str, **arguments: Any) -> Any:
        return await asyncio.wrap_future(self.sync._process.call(tool, _drop_none(arguments)))

    async def aclose(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.sync.close)

    async def __aenter__(self) -> "AsyncEngine":
        return self

    async def __aexit__(self, *_: Any) -> None:
        await self.aclose()

    async def spawn(self, *command: str, name: Optional[str] = None, cwd: Union[str, os.PathLike, None] = None,
                    env: Optional[Mapping[str, str]] = None, size: Optional[Tuple[int, int]] = None,
                    shell: Optional[str] = None, keep_history: Optional[bool] = None,
                    agent: bool = False) -> "AsyncTerminal":
        raw = await self._call("terminal_spawn", **_spawn(command, name, cwd, env, size, shell, keep_history, agent))
        return AsyncTerminal(self, Snapshot.of(raw))

    async def list(self) -> List[Snapshot]:
        return [Snapshot.of(s) for s in _items(await self._call("terminal_list"))]

    async def show(self, t: Target) -> Snapshot:
        return Snapshot.of(await self._call("terminal_show", terminal=_target(t)))

    async def send(self, t: Target, text: str = "", *, submit: bool = False, wait: Optional[str] = None,
                   timeout: Optional[float] = None, keys: Optional[Sequence[str]] = None,
                   include_screen: Optional[bool] = None, max_bytes: Optional[int] = None) -> SendResult:
        return SendResult.of(await self._call("terminal_send", **_send(t, text, submit, wait, timeout, keys,
                                                                        include_screen, max_bytes)))

    async def run(self, t: Target, command: str, *, timeout: Optional[float] = None) -> SendResult:
        return await self.send(t, command, submit=True, timeout=timeout)

    async def read(self, t: Target, *, offset: Optional[int] = None, count: Optional[int] = None,
                   since: Optional[str] = None, format: Optional[str] = None,
                   max_bytes: Optional[int] = None) -> Page:
        return Page.of(await self._call("terminal_read", **_read(t, offset, count, since, format, max_bytes)))

    async def screen(self, t: Target) -> Screen:
        return Screen.of(await self._call("terminal_screen", terminal=_target(t)))

    async def wait(self, t: Target, *, text: Optional[str] = None, regex: Optional[str] = None,
                   exit: Optional[bool] = None, command: Optional[str] = None, since: Optional[str] = None,
                   timeout: Optional[float] = None) -> Match:
        return Match.of(await self._call("terminal_wait", terminal=_target(t), text=text, regex=regex, exit=exit,
                                         command=command, since=since, timeout_secs=timeout))

    async def signal(self, t: Target, signal: str) -> Dict[str, Any]:
        return await self._call("terminal_signal", terminal=_target(t), signal=signal)

    async def kill(self, t: Target) -> Dict[str, Any]:
        return await self._call("terminal_kill", terminal=_target(t))

    async def commands(self, t: Target, *, limit: Optional[int] = None) -> List[Any]:
        return commands_of(await self._call("terminal_commands", terminal=_target(t), limit=limit))

    async def search(self, regex: str, *, terminal: Optional[Target] = None, context: Optional[int] = None,
                     max_matches: Optional[int] = None) -> Dict[str, Any]:
        return await self._call("terminal_search", regex=regex,
                                terminal=None if terminal is None else _target(terminal),
                                context=context, max_matches=max_matches)


class AsyncTerminal:
    """One terminal of an :class:`AsyncEngine`."""

    def __init__(self, engine: AsyncEngine, snapshot: Snapshot):
        self.engine = engine
        self.snapshot = snapshot
        self.id = snapshot.id
        self.name = snapshot.name

    def __repr__(self) -> str:
        return f"AsyncTerminal({self.id!r}, name={self.name!r})"

    async def send(self, text: str = "", **options: Any) -> SendResult:
        return await self.engine.send(self, text, **options)

    async def run(self, command: str, *, timeout: Optional[float] = None) -> SendResult:
        return await self.engine.run(self, command, timeout=timeout)

    async def read(self, **options: Any) -> Page:
        return await self.engine.read(self, **options)

    async def screen(self) -> Screen:
        return await self.engine.screen(self)

    async def wait(self, **options: Any) -> Match:
        return await self.engine.wait(self, **options)

    async def signal(self, signal: str) -> Dict[str, Any]:
        return await self.engine.signal(self, signal)

    async def kill(self) -> Dict[str, Any]:
        return await self.engine.kill(self)

    async def commands(self, *, limit: Optional[int] = None) -> List[Any]:
        return await self.engine.commands(self, limit=limit)
