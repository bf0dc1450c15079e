"""One access-log record per request on both HTTP doors (method, path, status, model, tokens, duration), over a
scripted model on a real server on loopback: whole and streamed answers, refusals answered by a middleware (the API
key) or by the router (404), and a client that hangs up mid-stream (499). The worker's: tests/worker/test_access.py.
"""

from __future__ import annotations

import json
import threading

import httpx
from http_support import LoopThread, scripted_host, scripted_model, serving

from modelhost._access import AccessRecord
from modelhost.testing.waiting import STATE_WAIT_SECONDS, wait_until

CHAT = {"model": "scripted", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}


def test_each_request_is_one_record_with_its_model_and_tokens(loop_thread: LoopThread) -> None:
    records: list[AccessRecord] = []
    with serving(loop_thread, scripted_host(), api_key="k", access_log=records.append) as server:
        key = {"Authorization": "Bearer k"}
        whole = httpx.post(f"{server.url}/v1/chat/completions", json=CHAT, headers=key, timeout=STATE_WAIT_SECONDS)
        usage = whole.json()["usage"]
        with httpx.stream(
            "POST", f"{server.url}/v1/completions", headers=key, timeout=STATE_WAIT_SECONDS,
            json={"prompt": "p", "max_tokens": 4, "stream": True},
        ) as streamed:  # fmt: skip
            body = streamed.read()
        httpx.post(f"{server.url}/v1/chat/completions", json=CHAT)  # no key: 401 from the middleware
        httpx.get(f"{server.url}/nowhere", headers=key)
        httpx.get(f"{server.url}/health")
        wait_until(lambda: len(records) == 5)
    assert b"[DONE]" in body
    chat, completion, unauthorised, missing, health = records
    assert (chat.door, chat.method, chat.path, chat.status, chat.model) == (
        "http", "POST", "/v1/chat/completions", 200, "scripted",
    )  # fmt: skip
    assert (chat.prompt_tokens, chat.completion_tokens) == (usage["prompt_tokens"], usage["completion_tokens"])
    assert chat.completion_tokens == 3 and chat.seconds > 0
    assert (completion.status, completion.model, completion.completion_tokens) == (200, "scripted", 4)
    assert (unauthorised.status, unauthorised.model) == (401, "")
    assert (missing.path, missing.status) == ("/nowhere", 404)
    assert (health.path, health.status) == ("/health", 200)
    line = chat.text()
    assert line.startswith("http POST /v1/chat/completions 200 model=scripted tokens=") and line.endswith("s")
    assert json.loads(chat.json())["completion_tokens"] == 3


def test_each_record_has_its_time_request_id_and_error_code(loop_thread: LoopThread) -> None:
    from datetime import UTC, datetime, timedelta

    records: list[AccessRecord] = []
    with serving(loop_thread, scripted_host(), access_log=records.append) as server:
        before = datetime.now(UTC)
        given = httpx.post(f"{server.url}/v1/chat/completions", json=CHAT, headers={"X-Request-Id": "trace-42"})
        made = httpx.post(f"{server.url}/v1/chat/completions", json=CHAT, headers={"X-Request-Id": "a\tb"})
        refused = httpx.post(f"{server.url}/v1/chat/completions", json={**CHAT, "max_tokens": -1})
        ollama = httpx.post(f"{server.url}/api/chat", json={"model": "scripted", "messages": "not a list"})
        wait_until(lambda: len(records) == 4)
    # The client's id is kept and echoed; one a log line cannot carry safely (a tab) is replaced by a fresh one.
    assert given.headers["x-request-id"] == "trace-42" and records[0].request_id == "trace-42"
    assert made.headers["x-request-id"] == records[1].request_id != "a\tb" and len(records[1].request_id) == 32
    stamp = datetime.fromisoformat(records[0].time.replace("Z", "+00:00"))
    assert timedelta(0) <= stamp - before.replace(microsecond=before.microsecond // 1000 * 1000) < timedelta(60)
    assert (records[0].error, records[1].error) == ("", "")
    # A refusal's code: read from OpenAI's body, noted by the door for Ollama's (whose body carries none).
    code = refused.json()["error"]["code"] or refused.json()["error"]["type"]
    assert (records[2].status, records[2].error) == (400, code) and code, refused.text
    assert ollama.status_code == 400 and "code" not in ollama.json(), ollama.text
    assert records[3].status == 400 and records[3].error, records[3]
    assert f"400 error={code}" in records[2].text()
    assert json.loads(records[2].json())["error"] == code


def test_a_client_that_hangs_up_mid_stream_is_logged_499(loop_thread: LoopThread) -> None:
    gate = threading.Semaphore(0)
    records: list[AccessRecord] = []
    with serving(loop_thread, scripted_host(scripted_model(gate)), access_log=records.append) as server:
        with httpx.stream(
            "POST", f"{server.url}/v1/chat/completions", timeout=STATE_WAIT_SECONDS,
            json={**CHAT, "max_tokens": 1000, "min_tokens": 1000, "stream": True},
        ) as streamed:  # fmt: skip
            gate.release()
            next(streamed.iter_bytes())  # the stream began; then the client goes away

        # Keep the model ticking, one token per poll, until the door notices the hang-up: it does so asynchronously,
        # so a fixed number of tokens could all be spent first (on a loaded machine the request then ended as a
        # 200). A request that cannot end by itself (min_tokens) can only end as the hang-up it is.
        def logged() -> bool:
            gate.release()
            return len(records) == 1

        wait_until(logged)
    assert (records[0].path, records[0].status, records[0].model) == ("/v1/chat/completions", 499, "scripted")
