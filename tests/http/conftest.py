"""Fixtures of the HTTP door tests (helpers in http_support)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from http_support import LoopThread


@pytest.fixture(scope="module")
def loop_thread() -> Iterator[LoopThread]:
    """One background event loop per test module (module-scoped servers live on it)."""
    lt = LoopThread()
    yield lt
    lt.close()
