"""The rewriting of argv before click reads it: options that may stand alone, without their value."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["OPTIONAL_VALUES", "default_socket", "expand_optional_values"]


#: Options that may be given without a value, and the value they then take (click cannot express this itself).
OPTIONAL_VALUES: dict[str, Callable[[], str]] = {
    "--http": lambda: "127.0.0.1:8000",
    "--worker": lambda: "127.0.0.1:8001",
    "--docling": lambda: "ocr",
    "--socket": lambda: default_socket(),
}


def default_socket() -> str:
    """The inferd socket's default address (`modelhost.wire.address`), imported only when a flag stands alone."""
    from modelhost.wire.address import default_address

    return default_address()


def expand_optional_values(argv: list[str]) -> list[str]:
    """Give `--http`, `--worker` and `--socket` their default when they stand alone (last, or before an option)."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        out.append(arg)
        if arg in OPTIONAL_VALUES and (i + 1 == len(argv) or argv[i + 1].startswith("-")):
            out.append(OPTIONAL_VALUES[arg]())
    return out
