"""The one error table (modelhost.errors): every error class declares how each door answers it, completely and
consistently, and docs/errors.md says what the classes declare.

The classes are found from the source (every class whose base is a member of the family, read with `ast`), so a
new error class in any module is walked without this file naming it: it must declare its own kind beside its own
code, or the test fails.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import get_args

import pytest

import modelhost
from modelhost import errors
from modelhost.errors import ErrorKind, HttpErrorType, ModelHostError
from modelhost.wire.codec import ErrorCode
from modelhost.worker import protocol

SRC = Path(modelhost.__file__).parent
DOC = Path(__file__).parents[1] / "docs" / "errors.md"

#: The failure classes giz's worker protocol v1 gives a job (its seed: the executor's codes); the worker's other
#: codes (WORKER_NOT_FOUND, ...) answer requests about jobs, never a job's failure.
WORKER_CLASSES = {
    protocol.WORKER_BUSY,
    protocol.WORKER_INVALID_INPUT,
    protocol.WORKER_FAILED,
    protocol.WORKER_CANCELLED,
    protocol.WORKER_INTERRUPTED,
    protocol.WORKER_STORAGE,
}
#: The wire codes that say "the request is wrong" (inferd's ErrorCodeV2): a 4xx's.
REQUEST_WIRE_CODES = {ErrorCode.INVALID_REQUEST, ErrorCode.ATTACHMENT_UNSUPPORTED, ErrorCode.FRAME_TOO_LARGE}

#: What each code answered before the table, on the HTTP doors, where it was not a 500 (http/errors.py's dict,
#: Ollama pull's statuses): those stay exactly; only wrong 500s were to change.
FORMER_HTTP = {
    "invalid_option": 400,
    "invalid_input": 400,
    "attachment_unsupported": 400,
    "embeddings_unsupported": 400,
    "model_not_found": 404,
    "queue_full": 429,
    "host_closed": 503,
    "model_closed": 503,
    "model_loading": 503,
    "cancelled": 503,
    "generation_failed": 500,
    "internal": 500,
    "invalid_name": 400,
    "ambiguous_model": 400,
    "not_a_model": 400,
    "too_large": 400,
    "gated": 403,
    "hub_unreachable": 502,
    "hub_error": 502,
    "checksum_mismatch": 502,
    "download_failed": 502,
}
#: The former socket table (wire/handler.py's dict): every code it named keeps its wire code.
FORMER_WIRE = {
    "queue_full": "queue_full",
    "host_closed": "backend_unavailable",
    "model_loading": "backend_unavailable",
    "backend_unavailable": "backend_unavailable",
    "model_closed": "backend_unavailable",
    "invalid_option": "invalid_request",
    "invalid_input": "invalid_request",
    "attachment_unsupported": "attachment_unsupported",
}


def _error_modules() -> set[str]:
    """The modules that define a member of the family, found in the source: a class whose base's name is a member's
    name, to a fixed point (so a subclass of a subclass in another module counts)."""
    classes: list[tuple[str, str, list[str]]] = []
    for path in SRC.rglob("*.py"):
        module = ".".join(("modelhost", *path.relative_to(SRC).with_suffix("").parts)).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases]
                classes.append((module, node.name, bases))
    members, modules = {"ModelHostError"}, {"modelhost.errors"}
    grown = True
    while grown:
        grown = False
        for module, name, bases in classes:
            if name not in members and members.intersection(bases):
                members.add(name)
                modules.add(module)
                grown = True
    return modules


def _family() -> list[type[ModelHostError]]:
    for module in sorted(_error_modules()):
        importlib.import_module(module)
    return [cls for cls in errors.family() if cls.__module__.startswith("modelhost.")]


def _declarations() -> Iterator[tuple[str, str, ErrorKind]]:
    """(class name, code, kind) of every code the family declares: each class's own code and its extra `codes`."""
    for cls in _family():
        if "code" in cls.__dict__:
            yield cls.__qualname__, cls.code, cls.kind
        for code, kind in cls.__dict__.get("codes", {}).items():
            yield cls.__qualname__, code, kind


def test_the_walk_finds_the_classes_of_every_module() -> None:
    """The source walk reaches beyond errors.py (else the checks below would pass on a fraction of the family)."""
    names = {cls.__name__ for cls in _family()}
    assert {"DocumentError", "PullError", "ClusterError", "RemoteError", "MemoryBudgetError"} <= names


@pytest.mark.parametrize("cls", _family(), ids=lambda cls: cls.__qualname__)
def test_each_class_declares_its_own_kind_beside_its_own_code(cls: type[ModelHostError]) -> None:
    """A class that names a code of its own says how the doors answer it, rather than inheriting `internal`'s 500
    by omission; a class that keeps its parent's code (SchemaError, MemoryBudgetError) keeps its parent's kind."""
    assert isinstance(cls.kind, ErrorKind)
    if "code" in cls.__dict__ or "codes" in cls.__dict__:
        assert "kind" in cls.__dict__, f"{cls.__qualname__} declares a code but no kind"
    else:
        parent = next(base for base in cls.__mro__[1:] if issubclass(base, ModelHostError) and "code" in base.__dict__)
        assert cls.kind == parent.kind


def test_each_kind_is_complete_and_consistent() -> None:
    """Every declared kind names values its doors have, and its four answers agree on whose fault it is: a 4xx is
    the request's (wire invalid_request and kin, WORKER_INVALID_INPUT), 429 and the retry-later 503 are "wait"
    (queue_full / backend_unavailable), any other 5xx is the server's (WORKER_FAILED)."""
    kinds = {(name, code): kind for name, code, kind in _declarations()}
    kinds.update({(cls.__qualname__, "(class)"): cls.kind for cls in _family()})
    for (name, code), kind in kinds.items():
        where = f"{name} {code}: {kind}"
        assert kind.http_type in get_args(HttpErrorType), where
        assert kind.wire_code in set(ErrorCode), where
        assert kind.worker_class in WORKER_CLASSES, where
        status = kind.http_status
        if status == 429:
            assert (kind.http_type, kind.wire_code, kind.worker_class) == (
                "rate_limit_error",
                "queue_full",
                "WORKER_BUSY",
            )
        elif 400 <= status < 500:
            assert kind.http_type == ("not_found_error" if status == 404 else "invalid_request_error"), where
            assert kind.wire_code in REQUEST_WIRE_CODES, where
            assert kind.worker_class == protocol.WORKER_INVALID_INPUT, where
        else:
            assert status in (500, 502, 503), where
            assert kind.http_type == "server_error", where
            assert kind.wire_code in (ErrorCode.INTERNAL, ErrorCode.BACKEND_UNAVAILABLE), where
            assert (kind.wire_code == ErrorCode.BACKEND_UNAVAILABLE) <= (status == 503), where
            assert kind.worker_class in (protocol.WORKER_FAILED, protocol.WORKER_BUSY), where
            assert (kind.worker_class == protocol.WORKER_BUSY) <= (kind.wire_code == ErrorCode.BACKEND_UNAVAILABLE)


def test_one_code_one_kind() -> None:
    """A code means one thing wherever it is declared (a pull's model_not_found is the catalogue's), and what a
    door looks up by code (a Failed event) is what the class declares."""
    seen: dict[str, tuple[str, ErrorKind]] = {}
    for name, code, kind in _declarations():
        first = seen.setdefault(code, (name, kind))
        assert first[1] == kind, f"{code}: {first[0]} says {first[1]}, {name} says {kind}"
        assert errors.kind_of_code(code) == kind


def test_the_statuses_that_were_right_stay() -> None:
    """Only the wrong 500s changed: every code that answered another status, on HTTP or the socket, still does."""
    for code, status in FORMER_HTTP.items():
        assert errors.kind_of_code(code).http_status == status, code
    for code, wire in FORMER_WIRE.items():
        assert errors.kind_of_code(code).wire_code == wire, code


def test_an_instance_code_takes_its_codes_kind() -> None:
    """A code given at construction answers as that code: a load error carrying its backend's code, a pull's
    reason, a relayed wire error; a code nobody declares keeps the class's kind."""
    from modelhost.hub.fetch import PullError
    from modelhost.wire.errors import RemoteError

    assert errors.kind_of(errors.ModelLoadError("x", code="backend_unavailable")) == errors.UNAVAILABLE
    assert errors.kind_of(errors.ModelLoadError("x", code="no_such_code")) == errors.INTERNAL
    assert errors.kind_of(PullError("x", code="gated")).http_status == 403
    assert errors.kind_of(PullError("x")).http_status == 502
    assert errors.kind_of(RemoteError("queue_full", "busy")) == errors.BUSY
    assert errors.kind_of(RemoteError("invalid_request", "bad")) == errors.REFUSED
    assert errors.kind_of(RemoteError("internal", "boom")).http_status == 502
    assert errors.kind_of(ModelHostError("x", code="cancelled")) == errors.CANCELLED
    assert errors.kind_of_code("no_such_code") == errors.INTERNAL


def _doc_table() -> str:
    """docs/errors.md's table as the classes declare it, one row per code."""
    rows = ["| code | class | HTTP | OpenAI type | wire code | worker class |", "|---|---|---|---|---|---|"]
    for name, code, kind in sorted(set(_declarations()), key=lambda row: (row[1], row[0])):
        rows.append(
            f"| `{code}` | `{name}` | {kind.http_status} | `{kind.http_type}` | `{kind.wire_code}` | "
            f"`{kind.worker_class}` |"
        )
    return "\n".join(rows)


def test_the_doc_lists_the_table() -> None:
    """docs/errors.md holds the table exactly as the classes declare it (rewrite it from this test's message)."""
    text = DOC.read_text("utf-8")
    found = re.search(r"<!-- table -->\n(.*?)\n<!-- /table -->", text, re.S)
    assert found is not None, "docs/errors.md lost its <!-- table --> markers"
    assert found.group(1) == _doc_table(), "docs/errors.md is stale; its table is:\n" + _doc_table()
