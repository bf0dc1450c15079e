"""Issue 25, item 5: over-long inputs are refused (or cut, for truncation) by their byte length before the tokenizer
runs, through the real doors of a real `modelhost serve` (the tiny GGUF model on llama.cpp).

Before, a 10 MB `/api/embed` with `truncate` held the model thread for 54-80 s (RSS 550 MB -> 2.4 GB, never given
back) while a 4-token chat waited as long; a 10 MB `/v1/embeddings`, a 25 MiB chat prompt and a 60 MB wire text were
refused only after 10-30 s of tokenising. A token stands for at most the vocabulary's longest piece in bytes, so a
text longer than context x that many bytes is over the context whatever its tokens: that bound is exact.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from modelhost.inference.types import Message
from modelhost.wire import codec
from modelhost.wire.client import Client
from modelhost.wire.errors import RemoteError

from .serving import ServeProcess, serve

pytest.importorskip("llama_cpp")

TEN_MB = 10 * 1000 * 1000


@pytest.fixture(scope="module")
def served(tiny_llama_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, Path]]:
    sock = tmp_path_factory.mktemp("run") / "m.sock"
    with serve(["--model", str(tiny_llama_gguf), "--socket", str(sock)], str(tmp_path_factory.mktemp("jobs"))) as s:
        s.model = s.http.get("/v1/models").json()["data"][0]["id"]
        yield s, sock


def _chat(server: ServeProcess, content: str, max_tokens: int = 4) -> Any:
    body = {"model": server.model, "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens}
    return server.http.post("/v1/chat/completions", json={**body, "temperature": 0})


def _vector(server: ServeProcess, text: str) -> np.ndarray:
    r = server.http.post("/api/embed", json={"model": server.model, "input": text, "truncate": True})
    assert r.status_code == 200, r.text[:300]
    return np.asarray(r.json()["embeddings"][0], dtype=np.float32)


def test_a_ten_megabyte_embed_with_truncate_is_cut_before_tokenising(served: tuple[ServeProcess, Path]) -> None:
    server, _ = served
    assert _chat(server, "warm up").status_code == 200
    baseline = server.rss_bytes()
    answers: dict[str, Any] = {}
    text = "the quick brown fox jumps over the lazy dog " * (TEN_MB // 44)

    def embed() -> None:
        answers["embed"] = server.http.post("/api/embed", json={"model": server.model, "input": text})

    worker = threading.Thread(target=embed)
    worker.start()
    chat = _chat(server, "Hello")  # a short chat beside it is answered (it used to wait the whole 54-80 s)
    worker.join()
    assert chat.status_code == 200 and chat.json()["usage"]["completion_tokens"] == 4, chat.text
    r = answers["embed"]
    assert r.status_code == 200, r.text[:300]
    assert len(r.json()["embeddings"]) == 1 and r.json()["prompt_eval_count"] > 0
    # The cut keeps only what the context can use, so the request costs its body, not gigabytes of token ids.
    assert server.rss_bytes() - baseline < 400 << 20, (baseline, server.rss_bytes())
    assert server.alive()


def test_the_cut_keeps_exactly_the_tokens_a_whole_tokenisation_keeps(served: tuple[ServeProcess, Path]) -> None:
    server, _ = served
    # Long enough to be truncated by tokens but not cut by bytes (the whole text is tokenised), then the same text
    # with megabytes more after it (cut by bytes first): the context keeps the same first tokens of both.
    words = " ".join(f"w{i % 97} and some text" for i in range(4000))
    whole = _vector(server, words)
    cut = _vector(server, words + " more" * 400_000)
    assert np.allclose(whole, cut, atol=1e-5), float(np.abs(whole - cut).max())


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/embeddings", {"input": "x" * TEN_MB}),
        ("/api/embed", {"input": "x" * TEN_MB, "truncate": False}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "y" * (25 << 20)}], "max_tokens": 2}),
        ("/v1/completions", {"prompt": "z" * (25 << 20), "max_tokens": 2}),
    ],
)
def test_over_long_inputs_are_refused_by_their_bytes(
    served: tuple[ServeProcess, Path], path: str, body: dict[str, Any]
) -> None:
    server, _ = served
    r = server.http.post(path, json={"model": server.model, **body})
    assert r.status_code == 400, r.text[:300]
    assert "bytes" in r.text and "context" in r.text, r.text[:300]
    assert server.alive() and _chat(server, "still there?").status_code == 200


def test_a_sixty_megabyte_wire_text_is_refused_by_its_bytes(served: tuple[ServeProcess, Path]) -> None:
    server, sock = served
    with Client(str(sock), timeout=300) as client:
        with pytest.raises(RemoteError) as info:
            list(client.chat([Message("user", "q" * (60 * 1000 * 1000))], max_tokens=2))
        assert info.value.code == codec.ErrorCode.INVALID_REQUEST and "bytes" in str(info.value), info.value
        assert "".join(client.chat([Message("user", "Hello")], max_tokens=2, temperature=0)) is not None
    assert server.alive() and _chat(server, "and the others?").status_code == 200
