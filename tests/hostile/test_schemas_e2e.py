"""Issue 25, item 1: no JSON Schema kills or wedges the server, through any door that takes one.

Each case was one small request that killed `modelhost serve` (SIGABRT in llama.cpp's grammar, SIGSEGV in its
recursive parser, an OOM kill), held its model thread for minutes, or answered 500. Each is sent here through the
real door of a real `modelhost serve` subprocess (an in-process test would die with it), on the embedded default
model (SmolLM2 on llama.cpp) and on a tiny transformers model (llguidance), and must be a 400 that names the
parameter the client sent, with the process alive and /health and a normal request answering after it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from modelhost.testing.waiting import wait_until

from .serving import POLL_SECONDS, REQUEST_SECONDS, ServeProcess, serve

pytest.importorskip("llama_cpp")
pytest.importorskip("llguidance")

#: Every hostile schema of the issue, by what it did before.
HOSTILE: dict[str, dict[str, Any]] = {
    "empty range (SIGABRT)": {"type": "string", "pattern": "^[b-a]$"},
    "a control character (SIGABRT)": {"type": "string", "pattern": "^\\x00$"},
    "an empty class (SIGABRT)": {"type": "string", "pattern": "^[^\\x00-\\U0010FFFF]$"},
    "maxLength 20000 (SIGSEGV)": {"type": "string", "maxLength": 20000},
    "maxItems 1000000 (SIGSEGV)": {"type": "array", "items": {"type": "integer"}, "maxItems": 1000000},
    "a{0,100000} (SIGSEGV)": {"type": "string", "pattern": "^a{0,100000}$"},
    "minLength 10**9 (OOM)": {"type": "string", "minLength": 1000000000},
    "minLength 10**8 (34 s, every door stalled)": {"type": "string", "minLength": 100000000},
    "(x?){1000} (model thread wedged)": {"type": "string", "pattern": "^(x?){1000}$"},
    "a 400-digit maximum (500)": {"type": "integer", "maximum": int("9" * 400)},
    "minLength 5 with maxLength 2 (200)": {"type": "string", "minLength": 5, "maxLength": 2},
    "maxLength -1 (200)": {"type": "string", "maxLength": -1},
}

USER = [{"role": "user", "content": "Say something."}]


@pytest.fixture(scope="module", params=["llama_cpp", "transformers"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    # The embedded SmolLM2 GGUF (llama.cpp), or a tiny safetensors folder (transformers, llguidance).
    model = "default" if request.param == "llama_cpp" else str(request.getfixturevalue("tiny_llama_dir"))
    with serve(["--model", model], str(tmp_path_factory.mktemp("jobs"))) as served:
        served.model = served.http.get("/v1/models").json()["data"][0]["id"]
        yield served


def _still_serving(server: ServeProcess) -> None:
    """The process lives, /health answers, and a normal request to the same model is answered."""
    assert server.alive(), server.log()
    assert server.http.get("/health").status_code == 200
    r = server.http.post(
        "/v1/chat/completions", json={"model": server.model, "messages": USER, "max_tokens": 1, "temperature": 0}
    )
    assert r.status_code == 200, r.text


#: The cases that aborted the process in the sampler, which a stream reached too (greedy, sampled or streamed).
ABORTS = [case for case in HOSTILE if "SIGABRT" in case]


def _refused(r: Any, param: str) -> dict[str, Any]:
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param, error
    assert error["code"] == "invalid_option", error
    assert error["message"].startswith(f"{param}: "), error
    return error  # type: ignore[no-any-return]


@pytest.mark.parametrize(("case", "stream"), [*((case, False) for case in HOSTILE), *((case, True) for case in ABORTS)])
def test_response_format(server: ServeProcess, case: str, stream: bool) -> None:
    body = {
        "model": server.model,
        "messages": USER,
        "max_tokens": 8,
        "stream": stream,
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": HOSTILE[case]}},
    }
    _refused(server.http.post("/v1/chat/completions", json=body), "response_format")
    _still_serving(server)


@pytest.mark.parametrize(
    ("case", "choice"), [*((case, "required") for case in HOSTILE), *((case, "named") for case in ABORTS)]
)
def test_tool_parameters(server: ServeProcess, case: str, choice: str) -> None:
    # The hostile tool is the second: the refusal names it, not the first (whose parameters are fine).
    fine = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"]}
    hostile = {"type": "object", "properties": {"value": HOSTILE[case]}, "required": ["value"]}
    tools = [
        {"type": "function", "function": {"name": "weather", "parameters": fine}},
        {"type": "function", "function": {"name": "hostile", "parameters": hostile}},
    ]
    tool_choice: Any = "required" if choice == "required" else {"type": "function", "function": {"name": "hostile"}}
    body = {"model": server.model, "messages": USER, "max_tokens": 8, "tools": tools, "tool_choice": tool_choice}
    error = _refused(server.http.post("/v1/chat/completions", json=body), "tools[1].function.parameters")
    assert "(at /properties/value" in error["message"], error
    _still_serving(server)


@pytest.mark.parametrize("case", list(HOSTILE))
def test_ollama_format(server: ServeProcess, case: str) -> None:
    body = {"model": server.model, "messages": USER, "format": HOSTILE[case], "stream": False}
    r = server.http.post("/api/chat", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"].startswith("format: "), r.text
    _still_serving(server)


@pytest.mark.parametrize(
    ("case", "operation"), [*((case, "text.chat") for case in HOSTILE), *((case, "text.generate") for case in ABORTS)]
)
def test_worker_job_is_refused_at_submission(server: ServeProcess, case: str, operation: str) -> None:
    # Before issue 25 a text.chat job was accepted (202) and killed the server when it ran.
    work: dict[str, Any] = {"messages": USER} if operation == "text.chat" else {"prompt": "Say something."}
    job = {"operation": operation, "model": server.model, "input": {**work, "json_schema": HOSTILE[case]}}
    r = server.worker.post("/v1/jobs", json=job)
    assert r.status_code == 400, r.text
    assert "json_schema" in r.json()["message"], r.text
    _still_serving(server)


def test_a_hostile_schema_among_normal_ones_leaves_the_others_answered(server: ServeProcess) -> None:
    """Refusals interleaved with valid structured answers: every valid one is still valid JSON of its schema."""
    jsonschema = pytest.importorskip("jsonschema")
    fine = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["n"]}
    for case in HOSTILE.values():
        for schema in (case, fine):
            body = {
                "model": server.model,
                "messages": USER,
                "max_tokens": 16,
                "temperature": 0,
                "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
            }
            r = server.http.post("/v1/chat/completions", json=body)
            if schema is case:
                _refused(r, "response_format")
            else:
                assert r.status_code == 200, r.text
                jsonschema.validate(json.loads(r.json()["choices"][0]["message"]["content"]), fine)
    wait_until(server.alive, REQUEST_SECONDS, "the server alive", poll=POLL_SECONDS)


def test_the_cli_refuses_a_hostile_schema_naming_the_option(tmp_path: Path) -> None:
    """`modelhost generate --json-schema` on the default model: an error naming the option, not a crash."""
    import subprocess
    import sys

    schema = tmp_path / "s.json"
    schema.write_text(json.dumps(HOSTILE["(x?){1000} (model thread wedged)"]))
    out = subprocess.run(
        [sys.executable, "-m", "modelhost.cli", "generate", "--model", "default", "--json-schema", str(schema), "hi"],
        capture_output=True,
        text=True,
        timeout=REQUEST_SECONDS * 3,
    )
    assert out.returncode not in (0, -6, -11, 134, 139), (out.returncode, out.stderr[-2000:])
    assert "json_schema" in out.stderr or "json-schema" in out.stderr, out.stderr[-2000:]
