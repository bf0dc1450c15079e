"""Joining a Ray cluster: the one place modelhost calls `ray.init`, and the one-line errors when it cannot.

Token auth (Ray 2.52+): a cluster started with RAY_AUTH_MODE=token refuses every client without its token. A
client finds the token in RAY_AUTH_TOKEN, in the file RAY_AUTH_TOKEN_PATH names, or in ~/.ray/auth_token (where a
local `ray.init()` writes a new one); RAY_AUTH_MODE=token must be set on the client as well. docs/cluster.md says
how a joining node gets it.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import socket
from types import ModuleType

from modelhost.errors import UNAVAILABLE, ModelHostError

#: How long the head's GCS port may take to accept a connection: a head on a loaded machine answers in
#: milliseconds; a wrong address or a firewall never does.
PROBE_SECONDS = 10.0

#: The Ray namespace modelhost's named actors and Serve apps live in, so they never collide with a user's own.
NAMESPACE = "modelhost"


class ClusterError(ModelHostError):
    """Ray is not installed, or the cluster cannot be joined (wrong address, missing token)."""

    code = "cluster_unavailable"
    kind = UNAVAILABLE


#: What to run when Ray is missing: the extra pins the Ray version every node of a cluster must share.
INSTALL_HINT = "pip install 'modelhost[ray]' (the same Ray version on every node)"


def check_installed(flag: str = "--ray") -> None:
    """ClusterError naming `flag` and how to install Ray when `ray` cannot be imported, without importing it
    (importing Ray takes seconds): `serve --ray` and `convert --ray` ask this before any model loads or page renders,
    instead of failing with a ModuleNotFoundError traceback from the module that needs it."""
    if importlib.util.find_spec("ray") is None:
        raise ClusterError(f"{flag} needs Ray, which is not installed: {INSTALL_HINT}")


def require_ray() -> ModuleType:
    """The `ray` module; ClusterError saying how to install it when it is missing."""
    try:
        return importlib.import_module("ray")
    except ImportError as exc:
        raise ClusterError(f"Ray is not installed ({exc}): {INSTALL_HINT}") from None


def connect(address: str) -> ModuleType:
    """Join the cluster at `address` (`HOST:PORT` of its GCS, `auto`, or `ray://HOST:10001`) as a driver; return
    `ray`. Idempotent: a process already joined stays on its cluster. ClusterError in one line when it fails."""
    ray = require_ray()
    if ray.is_initialized():
        return ray
    _probe(address)
    try:
        ray.init(
            address=address,
            namespace=NAMESPACE,
            # The workers' own log lines would interleave with the CLI's progress bar and answers; they stay in the
            # session's log folder on each node (ray logs), where an operator looks for them.
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
    except ConnectionError as exc:
        raise ClusterError(f"cannot join the Ray cluster at {address}: {_first_line(exc)}") from None
    except Exception as exc:  # ray.exceptions.AuthenticationError, RuntimeError("... token ..."), ValueError
        hint = ""
        if "token" in str(exc).lower() and os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
            hint = (
                " (the cluster uses token auth: set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN_PATH, see docs/cluster.md)"
            )
        raise ClusterError(f"cannot join the Ray cluster at {address}: {_first_line(exc)}{hint}") from None
    return ray


def _probe(address: str) -> None:
    """ClusterError at once when nothing listens at a `HOST:PORT` address: `ray.init` would retry a dead address
    for minutes (its GCS reconnect window) before saying anything."""
    host, sep, port = address.rpartition(":")
    if not sep or "://" in address or not port.isdigit():
        return  # `auto`, `ray://...`: Ray finds or dials them itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_SECONDS).close()
    except OSError as exc:
        raise ClusterError(
            f"cannot join the Ray cluster at {address}: nothing answers there ({exc.strerror or exc}); "
            "start its head with `ray start --head` (docs/cluster.md)"
        ) from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
