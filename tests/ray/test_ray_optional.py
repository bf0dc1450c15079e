"""Ray stays optional: `import modelhost` and the CLI's own import load nothing of Ray (its import alone costs
seconds and hundreds of MB), and `serve --ray` refuses the doors replicas cannot carry before joining anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_importing_modelhost_and_its_cli_loads_no_ray() -> None:
    code = "import sys, modelhost, modelhost.cli, modelhost.serve; print(sorted(m for m in sys.modules if m == 'ray'))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_serve_on_ray_refuses_the_worker_door(tiny_llama_gguf: Path) -> None:
    modelhost = str(Path(sys.executable).with_name("modelhost"))
    # An address nothing listens on: the refusal must come first, naming the flag.
    args = ["serve", "--ray", "127.0.0.2:1", "--model", str(tiny_llama_gguf), "--worker", "127.0.0.1:0"]
    done = subprocess.run([modelhost, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "--worker cannot go with --ray" in done.stderr, done.stderr
