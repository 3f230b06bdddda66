"""A client generated from serve's own OpenAPI document (issue 47 item 8):
openapi-python-client (PyPI, pinned in scripts/lib/python-tools) generates
it from ``/api/openapi.json`` of a real serve, and the test drives spawn,
send (its exit code), read since a cursor, screen and kill through it."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

import tmux_engine


@pytest.fixture
def serve(tmp_path):
    """A real serve on 127.0.0.1 (a free port), on a private registry."""
    token = "generated-" + os.urandom(16).hex()
    runtime = tempfile.mkdtemp(prefix="te-")
    env = dict(os.environ, TMUX_ENGINE_TOKEN=token, TMUX_ENGINE_RUNTIME_DIR=runtime)
    env.pop("TMUX", None)
    state = tmp_path / "state"
    out = open(tmp_path / "serve.out", "w+")
    process = subprocess.Popen(
        [tmux_engine.find_binary(), "--state-dir", str(state), "--owner", "generated",
         "serve", "--listen", "127.0.0.1:0", "--pool", "0"],
        stdout=out, stderr=subprocess.PIPE, env=env,
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "serve.out").read_text().strip():
        assert process.poll() is None, process.stderr.read().decode()
        assert time.monotonic() < deadline, "serve printed no link"
        time.sleep(0.05)
    url = (tmp_path / "serve.out").read_text().splitlines()[0].split("/#")[0].rstrip("/")
    try:
        yield url, token
    finally:
        process.terminate()
        process.wait(timeout=30)
        # Whatever the test left (a failure before its kill), then the
        # runtime directory: the registry's socket directory, now empty.
        with tmux_engine.Engine(state_dir=state, owner="generated", env=env) as engine:
            for snapshot in engine.list():
                engine.kill(snapshot.id)
        shutil.rmtree(runtime)


def generate(url, token, into: Path) -> Path:
    request = urllib.request.Request(url + "/api/openapi.json", headers={"Authorization": "Bearer " + token})
    document = into / "openapi.json"
    document.write_bytes(urllib.request.urlopen(request).read())
    generator = os.environ["OPENAPI_PYTHON_CLIENT"]
    # No post hooks: they run ruff, which is no part of this test.
    config = into / "config.yaml"
    config.write_text("post_hooks: []\n")
    done = subprocess.run(
        [generator, "generate", "--path", str(document), "--output-path", str(into / "client"),
         "--meta", "none", "--config", str(config)],
        capture_output=True, text=True, cwd=into,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # Every operation and schema generated: the generator warns of what it skipped.
    assert "Warning" not in done.stdout and "Unable to" not in done.stdout, done.stdout
    return into / "client"


def test_a_generated_client_spawns_sends_reads_and_kills(serve, tmp_path):
    url, token = serve
    package = generate(url, token, tmp_path)
    sys.path.insert(0, str(package.parent))
    try:
        drive(package.name, url, token)
    finally:
        sys.path.remove(str(package.parent))


def drive(name, url, token):
    import importlib

    client_module = importlib.import_module(name)
    api = importlib.import_module(f"{name}.api.default")
    models = importlib.import_module(f"{name}.models")
    spawn = importlib.import_module(f"{name}.api.default.spawn")
    send = importlib.import_module(f"{name}.api.default.send")
    read = importlib.import_module(f"{name}.api.default.read")
    screen = importlib.import_module(f"{name}.api.default.screen")
    kill = importlib.import_module(f"{name}.api.default.kill")
    show = importlib.import_module(f"{name}.api.default.show")
    assert api is not None
    client = client_module.AuthenticatedClient(base_url=url, token=token, timeout=60.0)

    spawned = spawn.sync(client=client, body=models.SpawnBody(name="generated"))
    assert isinstance(spawned, models.SpawnResponse201), spawned
    t = spawned.id

    # send: the answer parses (its wait_reason enum, its status union) and
    # carries the command's exit code and exact output.
    body = models.SendBody(text="printf 'gen %s\\n' $((6*7)); (exit 4)", submit=True)
    sent = send.sync(t, client=client, body=body)
    assert isinstance(sent, models.SendResponse200), sent
    assert sent.wait_reason == models.SendResponse200WaitReason.COMMAND, sent
    assert sent.exit_code == 4, sent
    assert sent.output == "gen 42\n", sent
    cursor = sent.cursor
    assert isinstance(cursor, str) and cursor, sent

    second = send.sync(t, client=client, body=models.SendBody(text="echo after", submit=True))
    assert second.exit_code == 0, second
    after = read.sync(t, client=client, since=cursor, format_=models.ReadFormatType0.TEXT)
    assert isinstance(after, models.ReadResponse200), after
    assert "after" in after.text and "gen 42" not in after.text, after

    shown = show.sync(t, client=client)
    assert isinstance(shown, models.ShowResponse200), shown
    assert shown.shell_integration == models.ShowResponse200ShellIntegrationType0.ACTIVE, shown

    seen = screen.sync(t, client=client)
    assert isinstance(seen, models.ScreenResponse200), seen
    assert any("gen 42" in line for line in seen.lines), seen.lines

    killed = kill.sync(t, client=client)
    assert isinstance(killed, models.KillResponse200), killed
    gone = screen.sync(t, client=client)
    assert isinstance(gone, models.ScreenResponseDefault), gone
    assert gone.error.code == "NO_TERMINAL", gone
