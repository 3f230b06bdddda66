"""tmux-engine for Python: terminals in private tmux servers, driven with
exact output, exit codes and cursors.

    from tmux_engine import Engine
    engine = Engine()
    sh = engine.spawn(name="sh")
    result = sh.run("echo hi; false")
    result.output, result.exit_code   # ("hi\\n", 1) with an integrated shell
    sh.kill()

The ``tmux-engine`` binary this package installs does the work; each call
is one ``tmux-engine --json`` process. The pytest plugin (installed with the
package) gives a ``terminal`` fixture: a private registry per test.
"""

from ._answers import Command, EngineError, Match, Page, Screen, SendResult, Snapshot
from ._client import AsyncEngine, AsyncTerminal, Engine, Terminal, find_binary

__all__ = [
    "AsyncEngine",
    "AsyncTerminal",
    "Command",
    "Engine",
    "EngineError",
    "Match",
    "Page",
    "Screen",
    "SendResult",
    "Snapshot",
    "Terminal",
    "find_binary",
]
