"""The pytest plugin's own contract, in an inner pytest run: a failing
test leaves its terminals' screen and scrollback as artifacts, and no
terminal, tmux server or directory behind, passed or failed."""

import os
import subprocess


def test_a_failure_writes_artifacts_and_every_terminal_is_gone(pytester, tmp_path):
    artifacts = tmp_path / "artifacts"
    runtimes = tmp_path / "runtimes.txt"
    pytester.makepyfile(
        test_inner=f"""
        def test_fails(terminal, tmux_engine):
            open({str(runtimes)!r}, "a").write(tmux_engine.env["TMUX_ENGINE_RUNTIME_DIR"] + "\\n")
            tmux_engine.spawn("sh", "-c", "echo second-terminal; exec sleep 1000", name="second")
            terminal.run("echo marker-$((6*7))")
            assert False, "the test fails on purpose"

        def test_passes(terminal, tmux_engine):
            open({str(runtimes)!r}, "a").write(tmux_engine.env["TMUX_ENGINE_RUNTIME_DIR"] + "\\n")
            assert terminal.run("echo fine").exit_code == 0
        """
    )
    os.environ["TMUX_ENGINE_FIXTURE_ARTIFACTS"] = str(artifacts)
    try:
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    finally:
        del os.environ["TMUX_ENGINE_FIXTURE_ARTIFACTS"]
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*tmux-engine artifacts*", "*terminal.screen.txt*"])
    [failed] = [d for d in artifacts.iterdir()]
    assert "test_fails" in failed.name
    screen = (failed / "terminal.screen.txt").read_text()
    assert "marker-42" in screen, screen
    assert "marker-42" in (failed / "terminal.scrollback.txt").read_text()
    assert "second-terminal" in (failed / "second.screen.txt").read_text()
    dirs = runtimes.read_text().split()
    assert len(dirs) == 2
    for runtime in dirs:
        assert not os.path.exists(runtime), runtime
        left = subprocess.run(["pgrep", "-f", runtime], capture_output=True, text=True).stdout
        assert left == "", f"processes of {runtime} left: {left}"
