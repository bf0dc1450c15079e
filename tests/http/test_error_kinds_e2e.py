"""The HTTP doors answer a modelhost error as its class's kind declares (modelhost.errors, the one table): a case
each door answered 500 before the table.

The model is the stand-in whose engine raises the error a real backend would (its device gone mid-request), served
by a real host and the real HTTP server on loopback.
"""

from __future__ import annotations

import httpx
from http_support import LoopThread, scripted_host, serving

from modelhost.errors import BackendUnavailableError, NotTrainableError
from modelhost.testing.standins import ScriptedModel
from modelhost.testing.waiting import STATE_WAIT_SECONDS

CHAT = {"messages": [{"role": "user", "content": "hi"}]}


def _device_lost() -> BackendUnavailableError:
    return BackendUnavailableError("the CUDA device went away")


def test_a_backend_gone_mid_request_is_503_on_both_doors(loop_thread: LoopThread) -> None:
    """backend_unavailable was a 500 on HTTP while the socket said backend_unavailable (retry elsewhere): now both
    say so, OpenAI's body naming the code and type, Ollama's carrying the message."""
    model = ScriptedModel(["never"], fail_after=0, failure=_device_lost)
    with serving(loop_thread, scripted_host(model)) as server:
        openai = httpx.post(f"{server.url}/v1/chat/completions", json=CHAT, timeout=STATE_WAIT_SECONDS)
        assert openai.status_code == 503
        assert openai.json()["error"] == {
            "message": "the CUDA device went away",
            "type": "server_error",
            "param": None,
            "code": "backend_unavailable",
        }
        ollama = httpx.post(
            f"{server.url}/api/chat", json={"model": "scripted", **CHAT, "stream": False}, timeout=STATE_WAIT_SECONDS
        )
        assert ollama.status_code == 503
        assert ollama.json() == {"error": "the CUDA device went away"}


def test_a_request_the_model_cannot_serve_is_the_clients_400(loop_thread: LoopThread) -> None:
    """not_trainable (a request for a capability the model lacks) was a 500: it is the request's own 400."""
    model = ScriptedModel(["never"], fail_after=0, failure=lambda: NotTrainableError("the model takes no training"))
    with serving(loop_thread, scripted_host(model)) as server:
        answer = httpx.post(f"{server.url}/v1/chat/completions", json=CHAT, timeout=STATE_WAIT_SECONDS)
        assert answer.status_code == 400
        assert answer.json()["error"]["type"] == "invalid_request_error"
        assert answer.json()["error"]["code"] == "not_trainable"
