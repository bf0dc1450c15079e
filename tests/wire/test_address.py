"""default_address() resolves exactly as inferd's Go client and pdf-spec's DefaultAddr (spec §2.2)."""

from __future__ import annotations

import pytest

from modelhost.wire.address import default_address


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"XDG_RUNTIME_DIR": "/run/user/1000", "HOME": "/home/a"}, "/run/user/1000/inferd/inferd.sock"),
        ({"HOME": "/home/a"}, "/home/a/.inferd/run/inferd.sock"),
        ({}, "/tmp/inferd/inferd.sock"),
        # An empty variable is unset, as Go's `os.Getenv(x) != ""` reads it.
        ({"XDG_RUNTIME_DIR": "", "HOME": "/home/a"}, "/home/a/.inferd/run/inferd.sock"),
        ({"XDG_RUNTIME_DIR": "", "HOME": ""}, "/tmp/inferd/inferd.sock"),
        # String concatenation, not a path join: a trailing slash doubles, exactly as upstream's string does.
        ({"XDG_RUNTIME_DIR": "/run/user/1000/"}, "/run/user/1000//inferd/inferd.sock"),
        ({"HOME": "/home/a/"}, "/home/a//.inferd/run/inferd.sock"),
        ({"XDG_RUNTIME_DIR": "relative"}, "relative/inferd/inferd.sock"),
    ],
)
def test_linux_chain(env: dict[str, str], expected: str) -> None:
    assert default_address(env, "linux") == expected


def test_other_unix_uses_the_linux_chain() -> None:
    assert default_address({"HOME": "/home/b"}, "freebsd14") == "/home/b/.inferd/run/inferd.sock"


def test_macos_uses_tmpdir_with_go_concatenation() -> None:
    assert default_address({"TMPDIR": "/var/folders/x/T/"}, "darwin") == "/var/folders/x/T//inferd/inferd.sock"
    assert default_address({"TMPDIR": "", "XDG_RUNTIME_DIR": "/run"}, "darwin") == "/tmp/inferd/inferd.sock"


def test_windows_is_the_named_pipe() -> None:
    assert default_address({"HOME": "/x"}, "win32") == r"\\.\pipe\inferd"


def test_defaults_to_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/42")
    assert default_address() == "/run/user/42/inferd/inferd.sock"
    assert "inferd" in default_address()  # pdf-spec's TestDefaultAddrIsInferd
