"""Fair eviction under a memory budget, with the real models of `serve --model default --model ocr --max-memory ...
--lazy --keep-alive 1`: steady OCR traffic once answered 0 of 147 `default` requests in 90 s (every one 503 "held by
models that are busy"). Now a waiting model's request claims the room: the busy model finishes what it holds, takes
no new request, unloads, and the waiting one loads; then the OCR model gets its turn back. Asserted by counts (both
models are served, in turn), never by how fast."""

from __future__ import annotations

import base64
import io
import threading
from typing import Any

import httpx
import pytest
from http_support import LoopThread
from test_models import door

from modelhost.host.models import Models
from modelhost.serve import ServeConfig, model_specs
from modelhost.testing.waiting import wait_until

pytest.importorskip("llama_cpp")
pytest.importorskip("rapidocr")

from modelhost.testing.pages import render_page


def _page_part() -> dict[str, Any]:
    png = io.BytesIO()
    render_page(1, 72, width_in=4, height_in=2).image.save(png, format="PNG")
    url = "data:image/png;base64," + base64.b64encode(png.getvalue()).decode()
    return {"type": "image_url", "image_url": {"url": url}}


def test_steady_ocr_traffic_does_not_starve_the_chat_model_under_a_memory_budget(loop_thread: LoopThread) -> None:
    specs, _ = model_specs(ServeConfig(models=("default", "ocr")))
    sizes = {s.name: s.size for s in specs}
    assert len(sizes) == 2 and all(sizes.values()), sizes  # served under their own names, "default"/"ocr" aliases
    # Room for either model, never both (as 560 MB was for these two).
    models = Models(specs, lazy=True, keep_alive=1.0, max_memory=max(sizes.values()) + min(sizes.values()) // 2)
    page = _page_part()
    events: list[tuple[str, int]] = []  # (model, status) in the order the answers came
    lock = threading.Lock()
    stop = threading.Event()

    def ask(http: httpx.Client, model: str, content: Any) -> httpx.Response:
        body = {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 4, "temperature": 0}
        answer = http.post("/v1/chat/completions", json=body)
        with lock:
            events.append((model, answer.status_code))
        if answer.status_code == 503:
            wait = int(answer.headers["retry-after"])  # every refusal says how long to wait
            assert 1 <= wait <= 60 and answer.json()["error"]["code"] == "model_loading", answer.text
            stop.wait(wait)
        else:
            assert answer.status_code == 200, answer.text
        return answer

    def ocr_traffic() -> None:
        with httpx.Client(base_url=url, timeout=600) as http:
            while not stop.is_set():
                ask(http, "ocr", [page])

    def served(model: str, after: int = 0) -> int:
        with lock:
            return sum(1 for m, status in events[after:] if m == model and status == 200)

    with door(loop_thread, models) as url:
        clients = [threading.Thread(target=ocr_traffic) for _ in range(2)]  # two: the OCR model is never idle
        for client in clients:
            client.start()
        try:
            wait_until(lambda: served("ocr") > 0)  # OCR loaded and busy before the chat model asks
            with httpx.Client(base_url=url, timeout=600) as http:
                while ask(http, "default", "Hello").status_code != 200:
                    pass
            with lock:
                turn = len(events)
            # The OCR model gets its turn back: its clients are answered again after the chat model's.
            wait_until(lambda: served("ocr", after=turn) > 0)
        finally:
            stop.set()
            for client in clients:
                client.join()
    assert served("default") == 1
    assert models.get("default").loads >= 1 and models.get("ocr").loads >= 2, "each gave way to the other"
    assert models.get("ocr").unloads >= 1
