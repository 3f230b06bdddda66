"""The pytest plugin (registered by the package's ``pytest11`` entry point):

- ``tmux_engine``: an :class:`~tmux_engine.Engine` on a private registry of
  its own (a state and a runtime directory under the test's ``tmp_path``),
  so tests never see each other's terminals or the user's;
- ``terminal``: a shell terminal spawned in it.

Every terminal the test's engine holds is killed when the test ends,
passed or failed. When the test fails, each one's screen and scrollback
are written first to ``$TMUX_ENGINE_FIXTURE_ARTIFACTS`` (else
``.tmux-engine-artifacts`` under pytest's root), one directory per test,
and the report names the files (as the Rust fixture does for a panic).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Iterator, List

import pytest

from ._answers import EngineError
from ._client import Engine, Terminal

ARTIFACTS_ENV = "TMUX_ENGINE_FIXTURE_ARTIFACTS"
# Whether the test body failed: the engine fixture's teardown reads it.
_CALL_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    # The call phase's outcome, for the fixtures' teardown to read.
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.stash[_CALL_FAILED] = report.failed


def _artifacts_dir(request: pytest.FixtureRequest) -> Path:
    base = os.environ.get(ARTIFACTS_ENV)
    root = Path(base) if base else Path(str(request.config.rootpath)) / ".tmux-engine-artifacts"
    name = re.sub(r"[^A-Za-z0-9_.\[\]-]+", "_", request.node.nodeid).strip("._") or "unnamed"
    return root / name


def _write_artifacts(engine: Engine, directory: Path) -> List[Path]:
    written: List[Path] = []
    for snapshot in engine.list():
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", snapshot.name or snapshot.id)
        directory.mkdir(parents=True, exist_ok=True)
        try:
            screen = engine.screen(snapshot.id)
            path = directory / f"{stem}.screen.txt"
            path.write_text(screen.text + "\n")
            written.append(path)
            page = engine.read(snapshot.id, count=10000)
            path = directory / f"{stem}.scrollback.txt"
            path.write_text("\n".join(page.lines) + "\n")
            written.append(path)
        except EngineError as error:
            path = directory / f"{stem}.error.txt"
            path.write_text(f"{error}\n")
            written.append(path)
    return written


@pytest.fixture
def tmux_engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    """An Engine on a private registry, every terminal killed at the end."""
    # A short runtime path: tmux's socket path must fit sun_path (108 bytes),
    # which a deep tmp_path may not.
    with tempfile.TemporaryDirectory(prefix="te-") as runtime, tempfile.TemporaryDirectory(
        prefix="tmux-engine-state-"
    ) as state:
        os.chmod(runtime, 0o700)
        env = dict(os.environ)
        env["TMUX_ENGINE_RUNTIME_DIR"] = runtime
        env.pop("TMUX", None)
        engine = Engine(state_dir=state, owner="pytest", env=env)
        try:
            yield engine
        finally:
            failures: List[str] = []
            if request.node.stash.get(_CALL_FAILED, False):
                try:
                    files = _write_artifacts(engine, _artifacts_dir(request))
                    if files:
                        request.node.add_report_section(
                            "teardown", "tmux-engine artifacts", "\n".join(map(str, files))
                        )
                except EngineError as error:
                    failures.append(f"artifacts: {error}")
            for snapshot in engine.list():
                try:
                    engine.kill(snapshot.id)
                except EngineError as error:
                    if error.code not in ("NO_TERMINAL", "TERMINAL_DEAD"):
                        failures.append(f"kill {snapshot.id}: {error}")
            engine.close()
            if failures:
                raise RuntimeError("tmux-engine cleanup failed: " + "; ".join(failures))


@pytest.fixture
def terminal(tmux_engine: Engine) -> Terminal:
    """A shell (``$TMUX_ENGINE_SHELL``, else ``$SHELL``) in the test's
    private registry, with the engine's shell integration: ``run`` gives
    each command's exact output and exit code."""
    return tmux_engine.spawn(name="terminal")
