"""The engine's JSON answers as typed values (the fields every face shares;
each keeps the whole answer in ``raw`` for the ones added later)."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple


class EngineError(Exception):
    """An engine error: its stable ``code`` (``NO_TERMINAL``, ``TIMEOUT``,
    ...; the same strings the CLI, HTTP API and MCP report) and message."""

    def __init__(self, code: str, message: str, exit_status: Optional[int] = None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.exit_status = exit_status


@dataclass(frozen=True)
class Snapshot:
    """A terminal as ``spawn``, ``show`` and ``list`` describe it."""

    id: str
    name: Optional[str]
    status: str
    pid: Optional[int]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def of(cls, raw: Dict[str, Any]) -> "Snapshot":
        return cls(raw["id"], raw.get("name"), raw.get("status", ""), raw.get("pid"), raw)


@dataclass(frozen=True)
class Command:
    """A command an integrated shell marked: its text, exit code and output."""

    id: Optional[str]
    command: Optional[str]
    exit_code: Optional[int]
    output: Optional[str]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def of(cls, raw: Dict[str, Any]) -> "Command":
        return cls(
            raw.get("id"),
            raw.get("command", raw.get("text")),
            raw.get("exit_code"),
            raw.get("output"),
            raw,
        )

    @property
    def duration_secs(self) -> Optional[float]:
        """Seconds from its start to its end (to now while it runs), by the
        times the shell stamped on its marks: the same whichever process
        listed it. ``None`` where the answer gives none."""
        return self.raw.get("duration_secs")

    @property
    def running(self) -> bool:
        """Whether it has not ended yet."""
        return bool(self.raw.get("running", False))


@dataclass(frozen=True)
class SendResult:
    """What a send produced: its output, why it returned (``wait_reason``:
    ``command``, ``stdin_read``, ``idle``, ``busy``, ``exited``,
    ``timeout``, ``cancelled``), the exit code when an integrated shell
    marked the command's end, and the cursors around the output."""

    output: str
    wait_reason: str
    exit_code: Optional[int]
    status: str
    typed: bool
    truncated: bool
    commands: Tuple[Command, ...]
    cursor: Optional[str]
    start_cursor: Optional[str]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def of(cls, raw: Dict[str, Any]) -> "SendResult":
        return cls(
            raw.get("output", ""),
            raw.get("wait_reason", ""),
            raw.get("exit_code"),
            raw.get("status", ""),
            raw.get("typed", True),
            raw.get("truncated", False),
            tuple(Command.of(c) for c in raw.get("commands", [])),
            raw.get("cursor"),
            raw.get("start_cursor"),
            raw,
        )


@dataclass(frozen=True)
class Page:
    """A ``read``: scrollback lines, or with ``since`` the output after a
    cursor (``text`` for ``format="text"``, ``data`` for ``"bytes"``), and
    ``next_cursor`` to read on from."""

    lines: Tuple[str, ...]
    text: Optional[str]
    data: Optional[bytes]
    next_cursor: Optional[str]
    more: bool
    truncated: bool
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def of(cls, raw: Dict[str, Any]) -> "Page":
        data = raw.get("bytes")
        return cls(
            tuple(raw.get("lines") or ()),
            raw.get("text"),
            base64.b64decode(data) if isinstance(data, str) else None,
            raw.get("next_cursor"),
            bool(raw.get("more", False)),
            bool(raw.get("truncated", False)),
            raw,
        )


@dataclass(frozen=True)
class Screen:
    """The visible screen: its rows top first, size and cursor ``(col, row)``."""

    lines: Tuple[str, ...]
    cols: int
    rows: int
    cursor: Tuple[int, int]

    @classmethod
    def of(cls, raw: Dict[str, Any]) -> "Screen":
        col, row = raw["cursor"]
        return cls(tuple(raw["lines"]), raw["cols"], raw["rows"], (col, row))

    @property
    def text(self) -> str:
        """The rows joined by newlines, trailing blanks kept as the engine gives them."""
        return "\n".join(self.lines)


@dataclass(frozen=True)
class Match:
    """What ``wait`` saw: the matched line, or a command's end."""

    matched: Any
    exit_code: Optional[int]
    output: Optional[str]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def of(cls, raw: Dict[str, Any]) -> "Match":
        return cls(raw.get("matched"), raw.get("exit_code"), raw.get("output"), raw)


def commands_of(raw: Dict[str, Any]) -> List[Command]:
    return [Command.of(c) for c in raw.get("commands", [])]
