"""The door's own logic over a stand-in model: readiness, API key, backpressure, cancellation, errors, metrics.

A scripted model makes these exact and fast (a gate holds a request in decode for as long as a test needs); the
same behaviours on the real embedded model are covered in test_openai_e2e.py.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from urllib.parse import urlsplit

import httpx
import openai
import pytest
from http_support import LoopThread, scripted_host, scripted_model, serving
from prometheus_client.parser import text_string_to_metric_families

from modelhost.host import Host
from modelhost.testing.standins import ScriptedModel
from modelhost.testing.waiting import STATE_WAIT_SECONDS, wait_until

CHAT = {"messages": [{"role": "user", "content": "hi"}]}


def sample(base_url: str, name: str, **labels: str) -> float:
    """One sample of /metrics, parsed with prometheus_client's own parser (0 when absent)."""
    text = httpx.get(f"{base_url}/metrics").text
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    return 0.0


def test_health_answers_and_ready_is_503_while_the_model_loads(loop_thread: LoopThread) -> None:
    release = threading.Event()

    def slow_loader() -> ScriptedModel:
        release.wait(STATE_WAIT_SECONDS)
        return scripted_model()

    host = scripted_host(loader=slow_loader)
    with serving(loop_thread, host, wait_ready=False) as server:
        try:
            health = httpx.get(f"{server.url}/health")
            assert health.status_code == 200 and health.json()["state"] == "loading"
            ready = httpx.get(f"{server.url}/ready")
            assert ready.status_code == 503 and ready.json()["status"] == "loading" and "retry-after" in ready.headers
            busy = httpx.post(f"{server.url}/v1/chat/completions", json=CHAT)
            assert busy.status_code == 503 and busy.json()["error"]["code"] == "model_loading"
            assert sample(server.url, "modelhost_model_state", state="loading") == 1
            # Refused at admission like a full queue: a rejection, and so a failure, by its code.
            for counted in ("modelhost_request_rejected_total", "modelhost_request_failure_total"):
                assert sample(server.url, counted, model_name="scripted", code="model_loading") == 1, counted
        finally:
            release.set()  # a failed check must not leave the load (and the test's teardown) waiting
        wait_until(lambda: httpx.get(f"{server.url}/ready").status_code == 200)
        ready_body = httpx.get(f"{server.url}/ready").json()
        assert ready_body == {"status": "ready", "model": "scripted", "models": {"scripted": "ready"}}


def test_a_model_whose_load_failed_refuses_requests_and_counts_them(loop_thread: LoopThread) -> None:
    def broken_loader() -> ScriptedModel:
        raise RuntimeError("the weights are not there")

    host = scripted_host(loader=broken_loader)
    with serving(loop_thread, host, wait_ready=False) as server:
        wait_until(lambda: host.state == "failed")
        refused = httpx.post(f"{server.url}/v1/chat/completions", json=CHAT)
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "host_closed", refused.text
        for counted in ("modelhost_request_rejected_total", "modelhost_request_failure_total"):
            assert sample(server.url, counted, model_name="scripted", code="host_closed") == 1, counted


def test_api_key_guards_v1_and_api_but_not_operations(loop_thread: LoopThread) -> None:
    with serving(loop_thread, scripted_host(), api_key="s3cret") as server:
        for path in ("/v1/models", "/api/tags"):
            assert httpx.get(server.url + path).status_code == 401
            wrong = httpx.get(server.url + path, headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401
            assert httpx.get(server.url + path, headers={"Authorization": "Bearer s3cret"}).status_code == 200
            # The scheme is case-insensitive; a different scheme, or the key alone, is not a bearer token.
            assert httpx.get(server.url + path, headers={"Authorization": "bearer s3cret"}).status_code == 200
            for bad in ("Basic s3cret", "s3cret", "Bearer s3cret2", "Bearers3cret"):
                assert httpx.get(server.url + path, headers={"Authorization": bad}).status_code == 401, bad
        assert httpx.get(f"{server.url}/v1/models").json()["error"]["code"] == "invalid_api_key"
        assert httpx.get(f"{server.url}/api/tags").json() == {
            "error": "missing or invalid API key (send Authorization: Bearer <key>)"
        }
        models = httpx.get(f"{server.url}/v1/models", headers={"Authorization": "Bearer s3cret"}).json()
        assert [m["id"] for m in models["data"]] == ["scripted"]
        for path in ("/health", "/ready", "/metrics"):
            assert httpx.get(server.url + path).status_code == 200
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="s3cret")
        answer = client.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
        assert answer.choices[0].message.content == "one two "
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=f"{server.url}/v1", api_key="wrong").models.list()


def test_full_queue_is_429_with_retry_after_and_a_freed_slot_admits_again(loop_thread: LoopThread) -> None:
    gate = threading.Semaphore(0)
    host = scripted_host(scripted_model(gate=gate), max_queue=1)
    with serving(loop_thread, host) as server, httpx.Client(base_url=server.url, timeout=STATE_WAIT_SECONDS) as client:
        body = {**CHAT, "stream": True, "max_tokens": 3}
        with client.stream("POST", "/v1/chat/completions", json=body) as running:
            wait_until(lambda: host.running == 1)
            with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body) as queued:
                wait_until(lambda: host.waiting == 1)
                refused = client.post("/v1/chat/completions", json=CHAT)
                assert refused.status_code == 429
                assert int(refused.headers["retry-after"]) >= 1
                assert refused.json()["error"]["code"] == "queue_full"
                assert refused.json()["error"]["type"] == "rate_limit_error"
                ollama = client.post("/api/chat", json={"model": "m", **CHAT})
                assert ollama.status_code == 429 and "queue full" in ollama.json()["error"]
                for _ in range(8):
                    gate.release()
                assert running.read().endswith(b"data: [DONE]\n\n")
                assert queued.read().endswith(b"data: [DONE]\n\n")
        for _ in range(4):
            gate.release()
        assert client.post("/v1/chat/completions", json={**CHAT, "max_tokens": 1}).status_code == 200
        assert sample(server.url, "modelhost_request_rejected_total", code="queue_full") == 2


def test_a_stopping_door_refuses_new_work_on_every_route_while_admitted_work_runs_to_its_end(
    loop_thread: LoopThread,
) -> None:
    gate = threading.Semaphore(0)
    host = scripted_host(scripted_model(gate=gate))
    with serving(loop_thread, host) as server, httpx.Client(base_url=server.url, timeout=STATE_WAIT_SECONDS) as client:
        body = {**CHAT, "stream": True, "max_tokens": 3}
        with client.stream("POST", "/v1/chat/completions", json=body) as running:
            wait_until(lambda: host.running == 1)
            server.stop_intake()
            for path, late in (
                ("/v1/chat/completions", CHAT),
                ("/v1/completions", {"prompt": "hi", "max_tokens": 2}),
                ("/v1/responses", {"input": "hi", "max_output_tokens": 2}),
                ("/api/chat", {"model": "m", **CHAT, "stream": False}),
                ("/api/generate", {"model": "m", "prompt": "hi", "stream": False}),
            ):
                refused = client.post(path, json=late)
                assert refused.status_code == 503, (path, refused.text)
                assert "stopping" in refused.text, (path, refused.text)
            # Each refusal counted as the host counts one: a rejection (and failure) with the code it answered.
            assert sample(server.url, "modelhost_request_rejected_total", code="host_closed") == 5
            ready = client.get("/ready")
            assert (ready.status_code, ready.json()["status"]) == (503, "stopping"), ready.text
            assert client.get("/health").status_code == 200  # alive: a stopping server is not a broken one
            for _ in range(8):
                gate.release()
            assert running.read().endswith(b"data: [DONE]\n\n")  # what was admitted ends as it would have
        assert host.running == 0 and host.waiting == 0


@pytest.mark.parametrize("stream", [True, False])
def test_a_client_that_hangs_up_cancels_its_request(loop_thread: LoopThread, stream: bool) -> None:
    gate = threading.Semaphore(0)
    host = scripted_host(scripted_model(gate=gate))
    with serving(loop_thread, host) as server:
        body = {**CHAT, "stream": stream, "max_tokens": 1000, "min_tokens": 1000}
        if stream:
            with httpx.stream(
                "POST", f"{server.url}/v1/chat/completions", json=body, timeout=STATE_WAIT_SECONDS
            ) as response:
                gate.release()
                next(response.iter_bytes())  # the role chunk or a token: the answer is under way
        else:
            # A non-streaming answer sends nothing until it is complete, so hang up on a raw socket mid-request.
            payload = json.dumps(body).encode()
            with socket.create_connection(urlsplit(server.url).netloc.split(":"), timeout=10) as raw:  # type: ignore[arg-type]
                raw.sendall(
                    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(payload)}\r\n\r\n".encode()
                    + payload
                )
                wait_until(lambda: host.running == 1)
                gate.release()

        # The client is gone. Keep the model ticking (one token per poll) until it reaches a cancellation check:
        # the server notices the hang-up asynchronously, so a fixed number of tokens could all be spent before it.
        def cancelled() -> bool:
            gate.release()
            return sample(server.url, "modelhost_request_success_total", finished_reason="cancelled") == 1

        wait_until(cancelled)
        wait_until(lambda: host.running == 0)
        route = "/v1/chat/completions"
        wait_until(lambda: sample(server.url, "modelhost_http_client_disconnects_total", route=route) == 1)
        # The model serves the next request at once.
        for _ in range(4):
            gate.release()
        answer = httpx.post(
            f"{server.url}/v1/chat/completions", json={**CHAT, "max_tokens": 2}, timeout=STATE_WAIT_SECONDS
        )
        assert answer.json()["choices"][0]["message"]["content"] == "one two "


def test_refusals_are_openai_shaped_and_cost_nothing(loop_thread: LoopThread) -> None:
    model = scripted_model()
    with serving(loop_thread, scripted_host(model)) as server:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="none")
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}], n=17)
        assert info.value.body["param"] == "n"  # type: ignore[index]
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}], max_tokens=-1)
        assert info.value.body["param"] == "max_tokens" and info.value.body["code"] == "invalid_option"  # type: ignore[index]
        bad_json = httpx.post(f"{server.url}/v1/chat/completions", content=b"{nope")
        assert bad_json.status_code == 400 and bad_json.json()["error"]["code"] == "invalid_json"
        assert model.prompts == []


def test_ollama_generate_without_prompt_reports_loaded_and_tags_list_the_model(loop_thread: LoopThread) -> None:
    host: Host = scripted_host()
    with serving(loop_thread, host, model_name="smol") as server:
        loaded = httpx.post(f"{server.url}/api/generate", json={"model": "smol"}).json()
        assert loaded["done"] and loaded["done_reason"] == "load"
        tags = httpx.get(f"{server.url}/api/tags").json()
        assert tags["models"][0]["name"] == "smol" and tags["models"][0]["details"]["family"] == "scripted"
        whole = httpx.post(
            f"{server.url}/api/generate", json={"prompt": "x", "stream": False, "options": {"num_predict": 3}}
        )
        assert whole.json()["response"] == "one two three " and whole.json()["done_reason"] == "length"


def test_a_client_that_hangs_up_mid_body_is_counted_499_not_a_server_error(loop_thread: LoopThread) -> None:
    with serving(loop_thread, scripted_host()) as server:
        address = urlsplit(server.url)
        with socket.create_connection((address.hostname, address.port)) as raw:
            raw.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 1000\r\n\r\n" + b'{"messages": ['
            )
        deadline = time.monotonic() + STATE_WAIT_SECONDS
        counts: dict[str, float] = {}
        while time.monotonic() < deadline:
            counts = {
                sample.labels["status"]: sample.value
                for family in text_string_to_metric_families(httpx.get(f"{server.url}/metrics").text)
                for sample in family.samples
                if sample.name == "modelhost_http_requests_total" and sample.labels["route"] == "/v1/chat/completions"
            }
            if counts:
                break
            time.sleep(0.05)
        assert counts == {"499": 1.0}, counts
