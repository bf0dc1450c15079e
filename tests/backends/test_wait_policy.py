"""How compute threads wait (the `poll` load option, inference/openmp.py): importing modelhost changes no
environment; the first load puts the measured default (llama-server's spin on cores of its own, none on shared
ones) or the asked poll in force before OpenMP is loaded; a later load asking another poll is refused, because
libgomp would silently keep the first; a wait the user set is kept.

Each case runs in a fresh interpreter: libgomp reads its settings once per process, so only a process that has not
loaded it yet shows what a first load does (this test process loaded it building the tiny models).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from modelhost.errors import InvalidOptionError
from modelhost.inference import openmp
from modelhost.inference.options import LoadOptions
from modelhost.serve import ServeConfig

#: A fresh interpreter's whole run, model loading included, on a busy 2-core machine: generous, never a measure.
CHILD_TIMEOUT = 300

#: What each child prints last: the wait variables, what modelhost put in force and whether libgomp is mapped.
REPORT = """
import json, os
from modelhost.inference import openmp
def report(**extra):
    print(json.dumps({"env": {k: os.environ.get(k) for k in openmp.WAIT_VARIABLES}, "in_force": openmp.in_force(),
                      "loaded": openmp.loaded(), **extra}))
"""


def child(code: str, *, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run `code` (after REPORT's helper) in a fresh interpreter whose environment has no wait variable but `env`."""
    clean = {k: v for k, v in os.environ.items() if k not in openmp.WAIT_VARIABLES}
    out = subprocess.run(
        [sys.executable, "-c", REPORT + code],
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_importing_modelhost_sets_no_wait_and_loads_no_openmp() -> None:
    seen = child("import modelhost\nreport()")
    assert seen == {"env": {"OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": None}, "in_force": None, "loaded": False}


def test_the_first_load_puts_the_default_wait_in_force_before_openmp_loads(tiny_llama_gguf: Path) -> None:
    seen = child(f"""
import modelhost
with modelhost.load_model({str(tiny_llama_gguf)!r}, parallel=1) as model:
    text = [t.id for t in model.generate("Hello", max_tokens=4, temperature=0)]
report(tokens=len(text))
""")
    assert seen["tokens"] == 4
    assert seen["loaded"] is True
    assert seen["in_force"] in (openmp.QUIET_POLL, openmp.BUSY_POLL)  # as the probe found the cores: either is right
    assert seen["env"]["GOMP_SPINCOUNT"] == str(openmp.spins(seen["in_force"]))
    assert seen["env"]["OMP_WAIT_POLICY"] is None


def test_a_model_whose_engine_has_no_openmp_loads_without_measuring_a_wait() -> None:
    # The `ocr` model runs on onnxruntime, which loads no OpenMP: its load (a one-page `convert` of a table page
    # starts it) must not pay the probe, which keeps every core busy for a tenth of a second.
    pytest.importorskip("rapidocr")
    pytest.importorskip("onnxruntime")
    seen = child("""
probes = []
measure = openmp.waiting_share
openmp.waiting_share = lambda *args, **kwargs: probes.append(1) or measure(*args, **kwargs)
from modelhost.inference import registry
registry.load_model("ocr").close()
report(probes=len(probes))
""")
    assert seen["probes"] == 0
    assert seen["in_force"] is None and seen["loaded"] is False
    assert seen["env"]["GOMP_SPINCOUNT"] is None


def test_the_default_is_measured_once_while_no_openmp_is_loaded() -> None:
    # A llama.cpp built without OpenMP never maps libgomp, so `loaded()` stays false: each availability check and
    # load calls configure(None) again, and each must not pay the probe's tenth of a second again.
    seen = child("""
probes = []
measure = openmp.waiting_share
openmp.waiting_share = lambda *args, **kwargs: probes.append(1) or measure(*args, **kwargs)
for _ in range(3):
    openmp.configure(None)
report(probes=len(probes))
""")
    assert seen["probes"] == 1
    assert seen["loaded"] is False
    assert seen["env"]["GOMP_SPINCOUNT"] == str(openmp.spins(seen["in_force"]))


def test_threads_that_share_their_core_with_a_busy_process_choose_to_sleep_at_once() -> None:
    # One core, and a process spinning on it: the probe's thread waits about half its time for the CPU.
    burner = subprocess.Popen([sys.executable, "-c", "import os\nos.sched_setaffinity(0, {0})\nwhile True: pass"])
    try:
        seen = child(
            "import os\nos.sched_setaffinity(0, {0})\nshare = openmp.waiting_share(1)\n"
            "report(share=share, poll=openmp.measured_poll())"
        )
    finally:
        burner.kill()
        burner.wait()
    assert seen["share"] >= openmp.BUSY_SHARE
    assert seen["poll"] == openmp.BUSY_POLL


def test_the_measured_share_decides_between_llama_servers_spin_and_none() -> None:
    assert openmp.poll_for(0.05, 9.0, 2) == openmp.QUIET_POLL  # the probe wins over a load average
    assert openmp.poll_for(0.8, 0.0, 2) == openmp.BUSY_POLL
    assert openmp.poll_for(None, 0.5, 2) == openmp.QUIET_POLL  # no scheduler statistics: the load average decides
    assert openmp.poll_for(None, 3.0, 2) == openmp.BUSY_POLL
    assert openmp.spins(openmp.QUIET_POLL) == openmp.LIBGOMP_DEFAULT_SPINS and openmp.spins(openmp.BUSY_POLL) == 0


def test_a_poll_is_fixed_for_the_process_and_another_one_is_refused(tiny_llama_gguf: Path) -> None:
    seen = child(f"""
import modelhost
from modelhost.errors import InvalidOptionError
path = {str(tiny_llama_gguf)!r}
modelhost.load_model(path, parallel=1, poll=0, threads=1).close()
modelhost.load_model(path, parallel=1, poll=0).close()   # the same poll again: fine
modelhost.load_model(path, parallel=1).close()           # no poll: whatever is in force
try:
    modelhost.load_model(path, parallel=1, poll=50)
    refused = None
except InvalidOptionError as exc:
    refused = [exc.option, str(exc)]
report(refused=refused)
""")
    assert seen["in_force"] == 0
    assert seen["env"]["GOMP_SPINCOUNT"] == "0"
    option, message = seen["refused"]
    assert option == "poll"
    assert "poll 0" in message and "GOMP_SPINCOUNT" in message


@pytest.mark.parametrize("variable, value", [("GOMP_SPINCOUNT", "1234"), ("OMP_WAIT_POLICY", "PASSIVE")])
def test_a_wait_the_user_set_is_kept(tiny_llama_gguf: Path, variable: str, value: str) -> None:
    seen = child(
        f"import modelhost\nmodelhost.load_model({str(tiny_llama_gguf)!r}, parallel=1).close()\nreport()",
        env={variable: value},
    )
    assert seen["in_force"] is None
    assert seen["env"] == {"OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": None, variable: value}


def test_a_poll_named_at_load_wins_over_the_environment(tiny_llama_gguf: Path) -> None:
    seen = child(
        f"import modelhost\nmodelhost.load_model({str(tiny_llama_gguf)!r}, parallel=1, poll=100).close()\nreport()",
        env={"OMP_WAIT_POLICY": "PASSIVE"},
    )
    assert seen["in_force"] == 100
    assert seen["env"]["GOMP_SPINCOUNT"] == str(openmp.LIBGOMP_DEFAULT_SPINS)


def test_serve_loads_its_models_with_its_threads_and_poll(tiny_llama_gguf: Path) -> None:
    seen = child(f"""
from modelhost import serve
specs, _ = serve.model_specs(serve.ServeConfig(models=({str(tiny_llama_gguf)!r},), parallel=1, threads=1, poll=7))
with specs[0].loader() as model:
    threads = model.threads
report(threads=threads)
""")
    assert seen["threads"] == [1, 1]
    assert seen["in_force"] == 7
    assert seen["env"]["GOMP_SPINCOUNT"] == str(openmp.spins(7))


@pytest.mark.parametrize("poll", [-1, 101, 2.5, "3"])
def test_a_poll_off_the_scale_is_refused(poll: object) -> None:
    with pytest.raises(InvalidOptionError) as caught:
        LoadOptions.parse(poll=poll)
    assert caught.value.option == "poll"


def test_the_scale_runs_from_sleeping_at_once_to_libgomps_default() -> None:
    assert openmp.spins(0) == 0
    assert openmp.spins(openmp.MAX_POLL) == openmp.LIBGOMP_DEFAULT_SPINS
    assert ServeConfig().poll is None  # serve leaves the choice to the measured default


def test_a_backend_loaded_directly_takes_its_poll_and_refuses_another(tiny_llama_gguf: Path) -> None:
    # Not through the registry (which states the poll first): the backend's own way in to its engine,
    # openmp.import_engine, puts the poll in force before llama_cpp loads OpenMP, availability check included.
    seen = child(f"""
from modelhost.backends.llama_cpp.backend import LlamaCppBackend
from modelhost.errors import InvalidOptionError
from modelhost.inference import openmp
backend = LlamaCppBackend()
backend.load_model({str(tiny_llama_gguf)!r}, parallel=1, poll=3, threads=1).close()
try:
    openmp.import_engine("llama_cpp", 4)
    refused = None
except InvalidOptionError as exc:
    refused = exc.option
report(refused=refused, available=backend.available())
""")
    assert seen["in_force"] == 3 and seen["env"]["GOMP_SPINCOUNT"] == str(openmp.spins(3))
    assert seen["refused"] == "poll" and seen["available"] is True


def test_every_backend_reaches_its_engine_through_import_engine() -> None:
    # One way in (issue 37): `openmp.configure` alone only states a poll before another step imports (serve, the
    # registry); each backend imports its engine library (llama_cpp, torch, vllm) through openmp.import_engine.
    import modelhost

    src = Path(modelhost.__file__).parent
    configuring = {
        path.relative_to(src).as_posix()
        for path in src.rglob("*.py")
        if "openmp.configure(" in path.read_text(encoding="utf-8")
    }
    assert configuring == {"serve.py", "inference/registry.py"}
    for backend in ("llama_cpp", "transformers", "vllm"):
        assert "openmp.import_engine(" in (src / "backends" / backend / "backend.py").read_text(encoding="utf-8")
