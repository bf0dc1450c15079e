"""The README's "pull a real model" example, run as typed against a loopback hub (HF_ENDPOINT): the same `modelhost
pull`, `modelhost serve` and `curl` commands, read from the README itself, with the repository's file played by the
tiny GGUF under the real one's name. Only the port changes (8080 may be taken here). What this cannot check is the
real hub: that the repository and its Q4_K_M file still exist there."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pull_support import run_cli

from modelhost.testing import hubserver
from modelhost.testing.waiting import STATE_WAIT_SECONDS

pytest.importorskip("llama_cpp")

README = Path(__file__).resolve().parents[2] / "README.md"
#: The file of the README's repository a `:Q4_K_M` pull picks (bartowski's naming).
REAL_FILE = "Qwen2.5-1.5B-Instruct-Q4_K_M.gguf"


def readme_commands() -> list[list[str]]:
    """The shell block after "For answers that need knowledge": each command's words (a backslash continuation or a
    quote left open carries a command onto the next line)."""
    text = README.read_text(encoding="utf-8")
    block = text.split("For answers that need knowledge", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    commands: list[list[str]] = []
    pending = ""
    for line in block.replace("\\\n", " ").splitlines():
        pending += line + "\n"
        try:
            words = shlex.split(pending)
        except ValueError:  # a quote open across lines (curl's JSON): the command goes on
            continue
        if words:
            commands.append(words)
        pending = ""
    return commands


@pytest.fixture
def hub_env(tiny_llama_gguf: Path, tmp_path: Path) -> Iterator[dict[str, str]]:
    pull = readme_commands()[0]
    repo = pull[2].split(":", 1)[0]
    with hubserver.HubServer({repo: {REAL_FILE: tiny_llama_gguf.read_bytes(), "README.md": b"# q\n"}}) as hub:
        yield {"HF_ENDPOINT": hub.url, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_DISABLE_TELEMETRY": "1"}


def test_the_readme_pull_example_runs_as_typed(hub_env: dict[str, str]) -> None:
    pull, serve, curl = readme_commands()
    assert pull[:2] == ["modelhost", "pull"]
    pulled = run_cli(*pull[1:], env=hub_env)
    assert pulled.returncode == 0, pulled.stderr

    assert serve[:2] == ["modelhost", "serve"] and serve[-1] == "&"
    args = [re.sub(r":8080$", ":0", arg) for arg in serve[1:-1]]  # any free port: 8080 may be taken here
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"} | hub_env
    proc = subprocess.Popen([sys.executable, "-m", "modelhost.cli", *args], env=env, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    try:
        url, seen = "", []
        while "ready: serving" not in (line := proc.stderr.readline()):  # bounded: serve says ready or exits
            seen.append(line)
            assert line, "serve exited before it was ready:\n" + "".join(seen)
            if "http on " in line:
                url = line.split("http on ", 1)[1].split()[0]
        assert curl[0] == "curl" and curl[-2] == "-d"
        where = curl[2].replace("http://127.0.0.1:8080", url)
        answer = httpx.post(where, json=json.loads(curl[-1]), timeout=STATE_WAIT_SECONDS)
        assert answer.status_code == 200, answer.text
        assert answer.json()["model"] == json.loads(curl[-1])["model"] and answer.json()["choices"][0]["message"]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=STATE_WAIT_SECONDS)
