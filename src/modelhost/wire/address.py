"""The default socket address, resolved exactly as inferd's Go client and pdf-spec's ``DefaultAddr`` resolve it.

Same chain and same string concatenation as upstream (spec §2.2), so a CLI with no configuration finds a running
inferd daemon, and an inferd client finds us:

- Windows: the named pipe ``\\\\.\\pipe\\inferd`` (modelhost serves no pipe, but a caller may still print it).
- macOS: ``$TMPDIR`` (``/tmp`` when unset) + ``/inferd/inferd.sock``.
- Linux and every other Unix: ``$XDG_RUNTIME_DIR/inferd/inferd.sock``, else ``$HOME/.inferd/run/inferd.sock``,
  else ``/tmp/inferd/inferd.sock``. A per-user runtime directory comes first because a socket in a world-writable
  ``/tmp`` is a pre-creation target for another user, while ``XDG_RUNTIME_DIR`` is 0700 and owned by the session.

Concatenation rather than ``os.path.join``: an env value ending in ``/`` yields ``//`` just as Go's does (macOS's
``$TMPDIR`` always ends in ``/``), so the address strings compare equal to upstream's. An empty variable counts as
unset, as Go's ``os.Getenv(...) != ""`` test does.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

__all__ = ["SOCKET_NAME", "WINDOWS_PIPE", "default_address"]

#: The generation socket's file name since inferd v0.4 (ADR 0021); the older ``infer.v2.sock`` is gone.
SOCKET_NAME = "inferd.sock"
#: The generation surface's named pipe on Windows.
WINDOWS_PIPE = r"\\.\pipe\inferd"


def default_address(environ: Mapping[str, str] | None = None, platform: str | None = None) -> str:
    """The platform default address of the inferd generation socket.

    ``environ`` and ``platform`` (a ``sys.platform`` value) default to the running process's; tests pass their own.
    """
    env = os.environ if environ is None else environ
    plat = sys.platform if platform is None else platform
    if plat.startswith("win"):
        return WINDOWS_PIPE
    if plat == "darwin":
        # Go's os.TempDir(): $TMPDIR, or /tmp when it is empty.
        return (env.get("TMPDIR") or "/tmp") + "/inferd/" + SOCKET_NAME
    if xdg := env.get("XDG_RUNTIME_DIR"):
        return xdg + "/inferd/" + SOCKET_NAME
    if home := env.get("HOME"):
        return home + "/.inferd/run/" + SOCKET_NAME
    return "/tmp/inferd/" + SOCKET_NAME
