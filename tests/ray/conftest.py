"""Fixtures of the Ray tests: one local head per session on 127.0.0.2 (2 CPUs, no dashboard, its temp folder and
auth token under the session's tmp folder), this process joined to it as a driver, and both torn down surely.

Where Ray is not installed (`pip install 'modelhost[ray]'`), each test that needs it is skipped by its fixture
(`needs_ray`, which `ray_env` and so every cluster fixture comes through) and the others still run: the checks that
modelhost works without Ray are the point there. (A module-level skip here aborted the whole run whenever a file of
this folder was named on the command line.) Note that `import ray` alone does not tell whether Ray is installed:
this folder is itself named `ray`, and with pytest's rootdir on sys.path an uninstalled `ray` imports as this
folder, a namespace package with nothing in it. Nor may `ray` be imported before the session's token environment is
set (ray_env): Ray reads RAY_AUTH_MODE when it is first imported.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from modelhost.testing import raynodes


def _ray_installed() -> bool:
    # Found by spec, not imported: `import ray` reads RAY_AUTH_MODE once, and the session's token environment
    # (ray_env) must be set before that. A namespace package (this folder) has no origin.
    spec = importlib.util.find_spec("ray")
    return spec is not None and spec.origin is not None and Path(spec.origin).name == "__init__.py"


@pytest.fixture(scope="session")
def needs_ray() -> None:
    """Skips the test where Ray is not installed."""
    if not _ray_installed():
        pytest.skip("Ray is not installed (pip install 'modelhost[ray]'; make test-ray)")


@pytest.fixture(scope="session")
def ray_env(needs_ray: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Token auth on, with the token in the session's tmp folder: set in this process (the driver) and given to
    every node and every CLI process the tests start (they inherit it)."""
    env = raynodes.token_env(tmp_path_factory.mktemp("ray-auth"))
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        yield env


#: What Ray appends to a node's temp folder for its longest socket path: `/session_2026-12-02_02-14-49_115714_12179`
#: (42) and `/sockets/plasma_store` (21). A Unix socket path has at most 107 bytes.
RAY_SOCKET_TAIL = 63
UNIX_PATH_MAX = 107


@pytest.fixture(scope="session")
def short_tmp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A short folder for the nodes' temp folders (`h/t1`, `n2/t1`, ...): under the session's base tmp folder when Ray's
    socket paths fit under it, else under /tmp (pytest's own tmp paths plus Ray's session folder names overflow
    107 bytes); removed at the end."""
    base = tmp_path_factory.getbasetemp()
    fits = len(str(base)) + len("/rXXXXXXXX/n2/t1") + RAY_SOCKET_TAIL <= UNIX_PATH_MAX
    folder = Path(tempfile.mkdtemp(prefix="r", dir=base if fits else None))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def ray_head(ray_env: dict[str, str], short_tmp: Path) -> Iterator[raynodes.RayNode]:
    """The session's head node on 127.0.0.2 with 2 CPUs; every process of it ended at the end."""
    node = raynodes.RayNode.start(raynodes.HEAD_IP, short_tmp / "h", ray_env, num_cpus=2)
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="session")
def ray_driver(ray_head: raynodes.RayNode) -> Iterator[Any]:
    """This process joined to the head as a driver (for Serve's handles and in-process conversions): `ray`."""
    from modelhost.ray.cluster import connect

    ray = connect(ray_head.address)
    try:
        yield ray
    finally:
        ray.shutdown()
