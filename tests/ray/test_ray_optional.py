"""Ray stays optional: `import modelhost` and the CLI's own import load nothing of Ray (its import alone costs
seconds and hundreds of MB), and `serve --ray`'s flags compose before anything is joined or loaded: the doors
replicas cannot carry are refused, and with `--worker` the cluster is joined first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

#: An address nothing listens on: what each command must say before it would ever join a cluster there.
NOWHERE = "127.0.0.2:1"


def modelhost(*args: str) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).with_name("modelhost")), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def test_importing_modelhost_and_its_cli_loads_no_ray() -> None:
    code = "import sys, modelhost, modelhost.cli, modelhost.serve; print(sorted(m for m in sys.modules if m == 'ray'))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_serve_on_ray_refuses_the_socket_door(tiny_llama_gguf: Path, tmp_path: Path) -> None:
    done = modelhost("serve", "--ray", NOWHERE, "--model", str(tiny_llama_gguf), "--socket", str(tmp_path / "s.sock"))
    assert done.returncode == 2
    assert "--socket cannot go with --ray" in done.stderr, done.stderr


def test_replicas_do_not_go_with_a_worker(tiny_llama_gguf: Path) -> None:
    done = modelhost(
        "serve", "--ray", NOWHERE, "--worker", "127.0.0.1:0", "--replicas", "3", "--model", str(tiny_llama_gguf)
    )
    assert done.returncode == 2
    assert "--replicas goes with serve --ray's replicas" in done.stderr, done.stderr


def test_a_worker_on_ray_joins_its_cluster_before_loading_a_model(needs_ray: None, tiny_llama_gguf: Path) -> None:
    done = modelhost(
        "serve", "--ray", NOWHERE, "--worker", "127.0.0.1:0", "--no-socket", "--model", str(tiny_llama_gguf)
    )
    assert done.returncode == 2
    assert f"cannot join the Ray cluster at {NOWHERE}" in done.stderr, done.stderr
    assert "loading" not in done.stderr, done.stderr
