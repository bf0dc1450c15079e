"""A created model's TEMPLATE, SYSTEM and PARAMETERs on every door, what /api/show gives back of it, and `ollama
create` from another machine: the GGUF uploaded as a blob by its digest, then named in `files`. The official `ollama`
client and plain HTTP against a real server on loopback over the tiny Llama GGUF."""

from __future__ import annotations

import hashlib
import shutil
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_support import LoopThread, disk_order
from test_ollama_create import names, serving

from modelhost.http.ollama import create as create_module
from modelhost.testing import rawhttp
from modelhost.testing.waiting import STATE_WAIT_SECONDS, wait_until

pytest.importorskip("llama_cpp")
ollama = pytest.importorskip("ollama")

#: An older Ollama template (one turn from .System and .Prompt), unlike the tiny model's own ChatML, so that a prompt
#: rendered through it is told apart by its tokens and its greedy answer.
TEMPLATE = "{{ if .System }}S: {{ .System }}\n{{ end }}Q: {{ .Prompt }}\nA:"


def test_template_system_and_parameters_apply_on_every_door_and_show_gives_them_back(
    loop_thread: LoopThread, tiny_llama_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    hi = [{"role": "user", "content": "hi"}]
    with (
        serving(loop_thread, tiny_llama_gguf) as server,
        httpx.Client(base_url=server.url, timeout=STATE_WAIT_SECONDS) as http,
    ):
        client = ollama.Client(host=server.url, timeout=STATE_WAIT_SECONDS)
        client.create(model="qa", from_=str(tiny_llama_gguf), template=TEMPLATE, system="Be brief.",
                      parameters={"num_predict": 4, "temperature": 0, "stop": ["###"]})  # fmt: skip

        def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
            """The answer once the model has loaded (a created model loads at its first request: 503 until then)."""
            answers: list[httpx.Response] = []

            def answered() -> bool:
                answers.append(http.post(path, json=body))
                return answers[-1].status_code != 503

            wait_until(answered)
            assert answers[-1].status_code == 200, answers[-1].text
            return dict(answers[-1].json())

        def raw(prompt: str) -> dict[str, Any]:
            """The base model completing `prompt` as it is: what the template should have rendered."""
            return post("/v1/completions", {"model": "tiny", "prompt": prompt, "max_tokens": 4, "temperature": 0})

        expected = raw("S: Be brief.\nQ: hi\nA:")
        # The OpenAI door: the TEMPLATE rendered the chat (same prompt tokens, same greedy answer as the raw prompt),
        # SYSTEM went into it, PARAMETER num_predict bounded the answer.
        chat = post("/v1/chat/completions", {"model": "qa", "messages": hi})
        assert chat["usage"]["prompt_tokens"] == expected["usage"]["prompt_tokens"], chat
        assert chat["usage"]["completion_tokens"] == 4
        assert chat["choices"][0]["message"]["content"] == expected["choices"][0]["text"]
        # A request's own system message and options win over SYSTEM and PARAMETER.
        own = [{"role": "system", "content": "Other."}, *hi]
        mine = post("/v1/chat/completions", {"model": "qa", "messages": own, "max_tokens": 2})
        assert mine["usage"]["prompt_tokens"] == raw("S: Other.\nQ: hi\nA:")["usage"]["prompt_tokens"]
        assert mine["usage"]["completion_tokens"] == 2
        # The Ollama door renders through the same template.
        answer = client.chat(model="qa", messages=hi)
        assert answer.message.content == expected["choices"][0]["text"] and answer.eval_count == 4
        assert answer.prompt_eval_count == expected["usage"]["prompt_tokens"]

        shown = http.post("/api/show", json={"model": "qa"}).json()
        assert shown["template"] == TEMPLATE and shown["system"] == "Be brief."
        assert shown["details"]["parent_model"] == str(tiny_llama_gguf)
        assert shown["modelfile"].splitlines()[1] == f"FROM {tiny_llama_gguf}"
        assert f'TEMPLATE """{TEMPLATE}"""' in shown["modelfile"] and 'SYSTEM """Be brief."""' in shown["modelfile"]
        assert [line.split()[0] for line in shown["parameters"].splitlines()] == ["num_predict", "stop", "temperature"]
        assert '"###"' in shown["parameters"] and client.show("qa").template == TEMPLATE
        assert http.post("/api/show", json={"model": "tiny"}).json()["template"] == "", "not created: nothing to say"

        # A template this host cannot run is refused at create, not at each request.
        with pytest.raises(ollama.ResponseError) as refused:
            client.create(model="piped", from_=str(tiny_llama_gguf), template="{{ .Prompt | upper }}")
        assert refused.value.status_code == 400 and "pipes" in str(refused.value)
        assert "piped" not in names(client)


def test_a_gguf_uploaded_by_digest_is_kept_verified_and_created_from(
    loop_thread: LoopThread, tiny_llama_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    digest = "sha256:" + hashlib.sha256(tiny_llama_gguf.read_bytes()).hexdigest()
    with (
        serving(loop_thread, tiny_llama_gguf) as server,
        httpx.Client(base_url=server.url, timeout=STATE_WAIT_SECONDS) as http,
    ):
        client = ollama.Client(host=server.url, timeout=STATE_WAIT_SECONDS)
        assert http.head(f"/api/blobs/{digest}").status_code == 404
        assert client.create_blob(tiny_llama_gguf) == digest  # the client's own upload: HEAD, then POST the bytes
        assert http.head(f"/api/blobs/{digest}").status_code == 200
        kept = tmp_path / "modelhost-created" / "blobs" / f"sha256-{digest[7:]}"
        assert kept.read_bytes() == tiny_llama_gguf.read_bytes(), "kept whole beside the created models"
        client.create(model="uploaded", files={"tiny.gguf": digest}, parameters={"num_predict": 2})
        assert client.chat(model="uploaded", messages=[{"role": "user", "content": "hi"}]).eval_count == 2

        # Bytes that are not the digest's are refused and not kept; a digest must be one.
        wrong = "sha256:" + "0" * 64
        posted = http.post(f"/api/blobs/{wrong}", content=b"not these bytes")
        assert posted.status_code == 400 and "digest mismatch" in posted.json()["error"]
        assert http.head(f"/api/blobs/{wrong}").status_code == 404
        assert not [p for p in kept.parent.iterdir() if p.name.startswith(".upload.")], "no partial file left"
        assert http.post("/api/blobs/sha256:xyz", content=b"x").status_code == 400
        # A create naming a blob never uploaded, or a file name that is a path, is refused before anything is kept.
        for files in ({"x.gguf": wrong}, {"../x.gguf": digest}):
            with pytest.raises(ollama.ResponseError) as refused:
                client.create(model="ghost", files=files)
            assert refused.value.status_code == 400
        assert "ghost" not in names(client)


def test_deleting_created_models_frees_the_uploads_no_kept_model_uses_and_nothing_outside(
    loop_thread: LoopThread, tiny_llama_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    store = tmp_path / "modelhost-created"
    digest = "sha256:" + hashlib.sha256(tiny_llama_gguf.read_bytes()).hexdigest()
    blob = store / "blobs" / f"sha256-{digest[7:]}"
    spare = b"uploaded, never created from"
    spare_digest = "sha256:" + hashlib.sha256(spare).hexdigest()
    outside = tmp_path / "outside" / ("sha256-" + "0" * 64)  # a file a planted link points to, out of the store
    outside.parent.mkdir()
    outside.write_bytes(b"not the store's")
    with serving(loop_thread, tiny_llama_gguf) as server:
        client = ollama.Client(host=server.url, timeout=STATE_WAIT_SECONDS)
        client.create_blob(tiny_llama_gguf)
        assert httpx.post(f"{server.url}/api/blobs/{spare_digest}", content=spare).status_code == 201
        for name in ("first", "second"):
            client.create(model=name, files={"tiny.gguf": digest})
        (staged,) = (store / "files").iterdir()
        (staged / "planted").symlink_to(outside)
        client.copy("second", "copied")

        client.delete("first")  # the others still use the upload: it stays
        assert blob.is_file() and staged.is_dir()
        client.delete("second")  # the copy is made from the same files
        assert blob.is_file() and staged.is_dir()
        client.delete("copied")  # the last user gone: its folder of links and its blob go, nothing else
        assert not staged.exists() and not blob.exists()
        assert outside.read_bytes() == b"not the store's", "a link is removed as a link, never followed"
        assert (store / "blobs" / f"sha256-{spare_digest[7:]}").read_bytes() == spare, "an unused upload stays"

        # Created again over another source, a name gives back what only its first making used.
        client.create_blob(tiny_llama_gguf)
        client.create(model="remade", files={"tiny.gguf": digest})
        assert blob.is_file()
        client.create(model="remade", from_=str(tiny_llama_gguf))
        assert not blob.exists() and list((store / "files").iterdir()) == []
        assert client.chat(model="remade", messages=[{"role": "user", "content": "hi"}], options={"num_predict": 1})


def test_a_blob_the_disk_cannot_hold_is_refused_507_declared_or_chunked(
    loop_thread: LoopThread, tiny_llama_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    # A headroom as large as the disk: no byte fits beyond it, whatever else is written meanwhile.
    monkeypatch.setattr(create_module, "DISK_HEADROOM_BYTES", shutil.disk_usage(tmp_path).total)
    body = b"a blob the disk has no room for" * 1000
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    with (
        serving(loop_thread, tiny_llama_gguf) as server,
        httpx.Client(base_url=server.url, timeout=STATE_WAIT_SECONDS) as http,
    ):
        declared = http.post(f"/api/blobs/{digest}", content=body)
        # The ollama client streams a file without a Content-Length (Go's chunked encoding): the same answer.
        chunked = http.post(f"/api/blobs/{digest}", content=iter([body[:1000], body[1000:]]))
        for answer in (declared, chunked):
            assert answer.status_code == 507, answer.text
            assert "does not fit" in answer.json()["error"]
        blobs = tmp_path / "modelhost-created" / "blobs"
        assert list(blobs.iterdir()) == [], "nothing kept, no partial file left"


def test_a_blob_is_on_the_disk_before_its_digest_names_it_and_the_name_is_synced_after(
    loop_thread: LoopThread, tiny_llama_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    body = b"a blob that must survive a power loss" * 1000
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    blobs = tmp_path / "modelhost-created" / "blobs"
    kept = blobs / f"sha256-{digest[7:]}"
    with (
        serving(loop_thread, tiny_llama_gguf) as server,
        httpx.Client(base_url=server.url, timeout=STATE_WAIT_SECONDS) as http,
        disk_order() as events,
    ):
        assert http.post(f"/api/blobs/{digest}", content=body).status_code == 201
    ours = [(kind, where) for kind, where in events if where.startswith(str(blobs))]
    assert len(ours) == 3 and ours[0][0] == "fsync" and Path(ours[0][1]).name.startswith(".upload."), ours
    assert ours[1:] == [("rename", str(kept)), ("fsync", str(blobs))], "named only once on the disk, then synced"
    assert kept.read_bytes() == body


def test_a_disk_that_fills_up_mid_upload_is_507_and_keeps_nothing(
    loop_thread: LoopThread, tiny_llama_gguf: Path, small_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(small_disk / "hub"))  # the blobs land on the 4 MB tmpfs
    # A negative headroom: the free-space check sees 1 GiB more than the disk has, as when another writer takes the
    # room between the check and the write; the write itself then meets the full disk (ENOSPC).
    monkeypatch.setattr(create_module, "DISK_HEADROOM_BYTES", -(1 << 30))
    body = b"more than the whole disk" * 250_000  # 6 MB on a 4 MB disk
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    blobs = small_disk / "modelhost-created" / "blobs"
    with (
        serving(loop_thread, tiny_llama_gguf) as server,
        httpx.Client(base_url=server.url, timeout=STATE_WAIT_SECONDS) as http,
    ):
        answer = http.post(f"/api/blobs/{digest}", content=body)
        assert answer.status_code == 507, answer.text
        assert "could not be stored" in answer.json()["error"]
        assert list(blobs.iterdir()) == [], "nothing kept, no partial file left"
        assert http.head(f"/api/blobs/{digest}").status_code == 404
        # The disk is usable again once the failed upload is gone: a blob that fits is kept.
        small = b"a blob that fits"
        assert http.post(f"/api/blobs/sha256:{hashlib.sha256(small).hexdigest()}", content=small).status_code == 201


def test_an_upload_cut_short_leaves_nothing_and_the_blob_can_be_sent_again(
    loop_thread: LoopThread, tiny_llama_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    body = b"half of a GGUF" * 10_000
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    blobs = tmp_path / "modelhost-created" / "blobs"
    with (
        serving(loop_thread, tiny_llama_gguf) as server,
        httpx.Client(base_url=server.url, timeout=STATE_WAIT_SECONDS) as http,
    ):
        # The client declares the whole body, sends half of it, and hangs up.
        with socket.create_connection(rawhttp.address(server.url), timeout=STATE_WAIT_SECONDS) as raw:
            head = rawhttp.request("POST", f"/api/blobs/{digest}", headers={"content-length": str(len(body))})
            raw.sendall(head + body[: len(body) // 2])
            wait_until(lambda: blobs.is_dir() and any(blobs.iterdir()), what="the upload's partial file")
        wait_until(lambda: not any(blobs.iterdir()), what="the partial file removed once the client hung up")
        assert http.head(f"/api/blobs/{digest}").status_code == 404, "half a blob is never kept"
        assert http.post(f"/api/blobs/{digest}", content=body).status_code == 201
        assert (blobs / f"sha256-{digest[7:]}").read_bytes() == body
