"""A drop-in for Terminal-Bench's ``TmuxSession`` (Harbor's
``harbor.agents.terminus_2.tmux_session.TmuxSession``): the same
constructor and methods, backed by the ``tmux-engine`` binary in the
environment, one ``tmux-engine --json ...`` process per call through the
environment's ``exec`` (Docker, E2B, Kubernetes, a local process: anything
with Harbor's ``BaseEnvironment.exec``).

What changes for the agent:

- A blocking ``send_keys`` returns when the shell marks the command's end
  (no ``; tmux wait -S done`` typed after the command, so heredocs, REPLs
  and ``read`` prompts are not broken by it), or as soon as the program
  waits for input (a REPL's prompt, a password prompt) instead of at the
  timeout. The command's exit code is in the answer it returns and in
  :attr:`TmuxSession.last_exit_code`.
- ``get_incremental_output`` is the output since the previous call, read
  from the engine's stream by cursor: exact even after the old text
  scrolled out of the screen and the scrollback, never a diff of
  captures.

Usage in a Harbor agent (``tmux-engine`` and ``tmux`` installed in the
environment's image)::

    from tmux_engine.terminal_bench import TmuxSession
    session = TmuxSession("main", environment, logging_path, None, None)
    await session.start()
    await session.send_keys(["make test", "Enter"], block=True, max_timeout_sec=600)
    print(await session.get_incremental_output())

Harbor itself is not imported: the environment is used through ``exec``
only, so this module works with any object that has Harbor's ``exec``
signature and returns an object with ``stdout``, ``stderr`` and
``return_code``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shlex
import time
import uuid
from pathlib import Path, PurePosixPath
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

# tmux's key names (`key_string_lookup_string`: case-insensitive names,
# modifier prefixes, `^X`): what `tmux send-keys` takes as a key rather
# than as text, and so what Harbor's class sends as one.
_KEY_NAME = re.compile(
    r"^(?:(?:[CMS]-)+\S+|\^.|"
    r"(?:Enter|Escape|Tab|BTab|BSpace|Space|Up|Down|Left|Right|Home|End|"
    r"PageUp|PgUp|PPage|PageDown|PgDn|NPage|IC|Insert|DC|Delete|F(?:[1-9]|1[0-2])|"
    r"KP(?:Enter|[0-9]|/|\*|-|\+|\.)))$",
    re.IGNORECASE,
)


def is_key_name(key: str) -> bool:
    """Whether ``tmux send-keys`` would press ``key`` as a named key."""
    return _KEY_NAME.match(key) is not None


class EngineCallError(RuntimeError):
    """A ``tmux-engine`` call in the environment failed: its error code
    (``NO_TERMINAL``, ``TIMEOUT``, ...) and message."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class TmuxSession:
    """Harbor's ``TmuxSession``, backed by tmux-engine (see the module's
    documentation). The constructor and the public methods take the same
    arguments as Harbor's; ``send_keys`` also returns the engine's answer
    for a blocking send (its ``output``, ``exit_code``, ``wait_reason``)."""

    _ENTER_KEYS = {"Enter", "C-m", "KPEnter", "C-j", "^M", "^J"}
    # The engine's answer bound for one read page (its maximum).
    _PAGE_BYTES = 65536
    # Text longer than this goes through a staged file (one argument of a
    # command line may hold 128 KiB; the rest of the line needs room).
    _ARGUMENT_BYTES = 96 * 1024
    # Base64 characters per staging `exec` (Harbor's figure: under Modal's
    # 64 KiB bound on an exec's arguments, a multiple of 4).
    _BASE64_CHUNK = 32_768

    def __init__(
        self,
        session_name: str,
        environment: Any,
        logging_path: Union[Path, PurePosixPath],
        local_asciinema_recording_path: Optional[Path],
        remote_asciinema_recording_path: Union[Path, PurePosixPath, None],
        pane_width: int = 160,
        pane_height: int = 40,
        extra_env: Optional[Dict[str, str]] = None,
        user: Union[str, int, None] = None,
        *,
        binary: str = "tmux-engine",
        state_dir: Optional[str] = None,
    ):
        try:
            self._pane_width = int(pane_width)
            self._pane_height = int(pane_height)
        except (ValueError, TypeError):
            raise ValueError("pane_width and pane_height must be valid integers.")
        if self._pane_width <= 0 or self._pane_height <= 0:
            raise ValueError("pane_width and pane_height must be positive integers.")
        self._session_name = session_name
        self.environment = environment
        self._logging_path = logging_path
        self._local_asciinema_recording_path = local_asciinema_recording_path
        self._remote_asciinema_recording_path = remote_asciinema_recording_path
        self._extra_env: Dict[str, str] = dict(extra_env or {})
        self._user = user
        self._binary = binary
        self._state_dir = state_dir
        self._cursor: Optional[str] = None
        self._id: Optional[str] = None
        # The pid of the background `tmux-engine record`, while it runs.
        self._recorder: Optional[str] = None
        #: The exit code of the last command a blocking send followed to
        #: its end (``None``: it did not end, or no shell marked it).
        self.last_exit_code: Optional[int] = None
        #: ``environment.exec`` calls made so far (one process each).
        self.exec_count = 0

    # -- the engine, through the environment -----------------------------

    async def _engine(self, *args: str, timeout_sec: Optional[float] = None,
                      stdin_file: Optional[str] = None) -> Any:
        command = self._words("--json", *args)
        if stdin_file is not None:
            command += f" < {shlex.quote(stdin_file)}"
        self.exec_count += 1
        kwargs: Dict[str, Any] = {"command": command, "user": self._user}
        if timeout_sec is not None:
            kwargs["timeout_sec"] = int(timeout_sec) + 30
        result = await self.environment.exec(**kwargs)
        stdout = (result.stdout or "").strip()
        if result.return_code != 0:
            try:
                error = json.loads(result.stderr or "")["error"]
            except (ValueError, KeyError, TypeError):
                raise EngineCallError("ENGINE_FAILED", f"{self._binary} {args[0]}: exit {result.return_code}: "
                                      f"{(result.stderr or stdout)[-2000:]}")
            raise EngineCallError(error.get("code", "ENGINE_FAILED"), error.get("message", ""))
        return json.loads(stdout) if stdout else None

    def _target(self) -> str:
        return self._id or self._session_name

    # -- Harbor's interface ----------------------------------------------

    async def start(self) -> None:
        """Starts the terminal: the user's shell, integrated, at the pane's
        size, with ``extra_env``; recorded as asciicast v2 into the remote
        recording path when one is given."""
        args = ["spawn", "--name", self._session_name, "--size", f"{self._pane_width}x{self._pane_height}"]
        for key, value in self._extra_env.items():
            args += ["--env", f"{key}={value}"]
        try:
            snapshot = await self._engine(*args)
        except EngineCallError as error:
            raise RuntimeError(f"Failed to start tmux session. Error: {error}") from error
        self._id = snapshot["id"]
        self._cursor = None
        if self._remote_asciinema_recording_path is not None:
            await self._start_recording(str(self._remote_asciinema_recording_path))

    def _words(self, *args: str) -> str:
        words = [self._binary]
        if self._state_dir is not None:
            words += ["--state-dir", self._state_dir]
        return shlex.join([*words, *args])

    async def _start_recording(self, path: str) -> None:
        """`tmux-engine record` in the background, as Harbor runs `asciinema
        rec` in the pane: an asciicast v2 of everything from now on, its
        header written before this returns."""
        self.exec_count += 1
        started = await self.environment.exec(
            command=f"nohup {self._words('record', self._target(), path)} >/dev/null 2>&1 </dev/null & echo $!",
            user=self._user,
        )
        self._recorder = (started.stdout or "").strip()
        if started.return_code != 0 or not self._recorder.isdigit():
            raise RuntimeError(f"Failed to start the recording: {started.stderr}")
        # The header is written once the recorder has the terminal's screen:
        # until then, output would be missing from the recording.
        self.exec_count += 1
        ready = await self.environment.exec(
            command=f"timeout 30 sh -c 'until test -s {shlex.quote(path)}; do "
            f"kill -0 {self._recorder} 2>/dev/null || exit 1; sleep 0.05; done'",
            user=self._user,
        )
        if ready.return_code != 0:
            raise RuntimeError(f"The recording did not start: {ready.stderr}")

    async def stop(self) -> None:
        """Ends the recording (its file complete where Harbor asked, and
        downloaded to the local path when one is given); the terminal keeps
        running, as with Harbor's class: the environment's end ends it."""
        if self._recorder is None:
            return
        recorder, self._recorder = self._recorder, None
        self.exec_count += 1
        ended = await self.environment.exec(
            command=f"kill -INT {recorder} 2>/dev/null; timeout 30 sh -c "
            f"'while kill -0 {recorder} 2>/dev/null; do sleep 0.05; done'",
            user=self._user,
        )
        if ended.return_code != 0:
            raise RuntimeError(f"The recording did not end: {ended.stderr}")
        if self._local_asciinema_recording_path is not None:
            self._local_asciinema_recording_path.parent.mkdir(parents=True, exist_ok=True)
            await self.environment.download_file(
                source_path=str(self._remote_asciinema_recording_path),
                target_path=self._local_asciinema_recording_path,
            )

    async def is_session_alive(self) -> bool:
        try:
            shown = await self._engine("show", self._target())
        except EngineCallError:
            return False
        return (shown.get("status") or {}).get("kind") == "running"

    def _is_executing(self, key: str) -> bool:
        return key in self._ENTER_KEYS or key.endswith(("\r", "\n"))

    def _split(self, keys: Sequence[str]) -> Tuple[str, List[str]]:
        """The text typed literally (every leading key that is no key name),
        then the rest as `send --key` words, each a key name or text, in
        order, as `tmux send-keys` takes them."""
        text: List[str] = []
        rest = list(keys)
        while rest and not is_key_name(rest[0]):
            text.append(rest.pop(0))
        return "".join(text), rest

    def _send_args(self, text: str, keys: Sequence[str], *options: str) -> List[str]:
        # Options first, then `--`: a text that starts with `-` stays text.
        args = ["send", *(f"--key={key}" for key in keys), *options, "--", self._target()]
        if text:
            args.append(text)
        return args

    async def _send(self, text: str, keys: Sequence[str], *options: str,
                    timeout_sec: Optional[float] = None) -> Any:
        """One `send`; a text too long for one argument of a command line
        (the kernel's 128 KiB) is staged in a file, 32 KiB of base64 per
        `exec` as Harbor's class stages its pastes, and read with `--stdin`."""
        data = text.encode()
        if len(data) <= self._ARGUMENT_BYTES:
            return await self._engine(*self._send_args(text, keys, *options), timeout_sec=timeout_sec)
        staged = f"/tmp/.tmux-engine-send-{uuid.uuid4().hex}"
        payload = base64.b64encode(data).decode("ascii")
        try:
            for offset in range(0, len(payload), self._BASE64_CHUNK):
                redirect = ">>" if offset else ">"
                chunk = payload[offset:offset + self._BASE64_CHUNK]
                self.exec_count += 1
                staging = await self.environment.exec(
                    command=f"printf %s {chunk} | base64 -d {redirect} {staged}", user=self._user
                )
                if staging.return_code != 0:
                    raise EngineCallError("IO", f"staging the text: {staging.stderr}")
            args = self._send_args("", keys, "--stdin", *options)
            return await self._engine(*args, stdin_file=staged, timeout_sec=timeout_sec)
        finally:
            self.exec_count += 1
            await self.environment.exec(command=f"rm -f {staged}", user=self._user)

    async def send_keys(
        self,
        keys: Union[str, List[str]],
        block: bool = False,
        min_timeout_sec: float = 0.0,
        max_timeout_sec: float = 180.0,
    ) -> Optional[Dict[str, Any]]:
        """Types ``keys`` (each a tmux key name or text, as Harbor's class
        sends them). ``block`` with a last key that runs the line (Enter, or
        text ending in a newline): returns once the command ends, with the
        engine's answer (``output``, ``exit_code``, ``wait_reason``), or as
        soon as a program waits for input; ``TimeoutError`` past
        ``max_timeout_sec``, the command left running, as Harbor's does.
        Otherwise types and waits ``min_timeout_sec``."""
        if isinstance(keys, str):
            keys = [keys]
        keys = list(keys)
        started = time.monotonic()
        if block and keys and self._is_executing(keys[-1]):
            # The line runs by the engine's submit: the trailing Enters
            # and newlines are dropped, as Harbor's class drops them.
            while keys and self._is_executing(keys[-1]):
                if keys[-1] in self._ENTER_KEYS:
                    keys.pop()
                else:
                    keys[-1] = keys[-1].rstrip("\r\n")
                    if not keys[-1]:
                        keys.pop()
            text, rest = self._split(keys)
            timeout = str(max(0.001, float(max_timeout_sec)))
            answer = await self._send(text, rest, "--submit", "--wait", "command", "--timeout", timeout,
                                      timeout_sec=max_timeout_sec)
            self.last_exit_code = answer.get("exit_code")
            if answer.get("wait_reason") == "timeout":
                raise TimeoutError(f"Command timed out after {max_timeout_sec} seconds")
            return answer
        text, rest = self._split(keys)
        if text or rest:
            await self._send(text, rest, "--wait", "none")
        left = min_timeout_sec - (time.monotonic() - started)
        if left > 0:
            await asyncio.sleep(left)
        return None

    async def capture_pane(self, capture_entire: bool = False) -> str:
        """The visible screen, or with ``capture_entire`` the scrollback
        and the screen (its newest 10,000 lines, 65,536 bytes at most), as text lines."""
        if not capture_entire:
            screen = await self._engine("screen", self._target())
            return "\n".join(screen["lines"]) + "\n"
        page = await self._engine(
            "read", self._target(), "--count", "10000", "--max-bytes", str(self._PAGE_BYTES)
        )
        return "\n".join(page["lines"]) + "\n"

    async def _read_since(self, cursor: str) -> Tuple[str, str]:
        """Everything after ``cursor`` (paged), and the cursor after it."""
        parts: List[str] = []
        while True:
            page = await self._engine(
                "read", self._target(), "--since", cursor, "--format", "text",
                "--max-bytes", str(self._PAGE_BYTES),
            )
            parts.append(page.get("text", ""))
            cursor = page["next_cursor"]
            if not page.get("more"):
                return "".join(parts), cursor

    async def _now(self) -> str:
        page = await self._engine("read", self._target(), "--count", "1")
        return page["next_cursor"]

    async def get_incremental_output(self) -> str:
        """``New Terminal Output:`` and every byte of text since the previous
        call (the first call: ``Current Terminal Screen:`` and the screen, as
        Harbor's class answers); the screen when nothing new came."""
        if self._cursor is None:
            self._cursor = await self._now()
            return f"Current Terminal Screen:\n{await self.capture_pane()}"
        text, self._cursor = await self._read_since(self._cursor)
        if text.strip():
            return f"New Terminal Output:\n{text}"
        return f"Current Terminal Screen:\n{await self.capture_pane()}"
