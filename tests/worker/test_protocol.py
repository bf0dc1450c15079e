"""The wire constants and serialisers against fixed byte vectors: a change here is a change a giz caller sees."""

from __future__ import annotations

import pytest

from modelhost.worker import protocol


def test_job_id_vectors() -> None:
    # sha256(b"default\ntext.chat\nabc")[:32] and sha256(b"m\nop\nk\xc3\xa9")[:32], computed once and pinned.
    assert protocol.job_id("default", "text.chat", "abc") == "2550561b6d2e40a06e20867c0983449d"
    assert protocol.job_id("m", "op", "ké") == "c0f5cea1f35982789d90b2a1489d36ed"
    random_ids = {protocol.job_id("m", "op", "") for _ in range(50)}
    assert len(random_ids) == 50 and all(protocol.is_job_id(i) for i in random_ids)


def test_record_bytes() -> None:
    r = protocol.new_record("0" * 32, "text.chat", "default", '{"a":1}', created=1700000000000)
    assert protocol.encode_record(r) == (
        b'{"id":"00000000000000000000000000000000","operation":"text.chat","model":"default",'
        b'"input":"{\\"a\\":1}","status":"queued","stage":"","step":0,"total":0,"remaining":0.0,"output":[],'
        b'"error":"","code":"","errorStatus":0,"created":1700000000000,"started":0,"completed":0,'
        b'"acknowledged":false,"cancel":false}'
    )
    assert protocol.decode_record(protocol.encode_record(r)) == r


def test_error_body_and_constants() -> None:
    assert protocol.error_body("WORKER_BUSY", "full", 429) == b'{"code":"WORKER_BUSY","message":"full","status":429}'
    assert protocol.invalid("x") == protocol.Failure("WORKER_INVALID_INPUT", "x", 400)
    assert protocol.failed("WORKER_STORAGE", "y") == protocol.Failure("WORKER_STORAGE", "y", 500)
    assert protocol.PICTURE_SIDE == 2048 and protocol.PROTOCOL_VERSION == 1
    assert protocol.STAGES == ("initializing", "loading_model", "encoding_prompt", "generating", "encoding_video")


def test_submission_decoding() -> None:
    s = protocol.decode_submission(b'{"operation":"o","model":"m","input":{"k":[1]},"idempotencyKey":"x","extra":1}')
    assert (s.operation, s.model, bytes(s.input), s.idempotency_key) == ("o", "m", b'{"k":[1]}', "x")
    with pytest.raises(Exception, match="operation"):
        protocol.decode_submission(b'{"model":"m","input":{}}')


@pytest.mark.parametrize(
    ("name", "ok"),
    [("output.txt", True), ("a.b.json", True), ("../x", False), ("a/b", False), ("a\\b", False), ("a\x00", False),
     ("..", False), (".hidden", False), ("", False), ("x..y", False)],
)  # fmt: skip
def test_safe_file_names(name: str, ok: bool) -> None:
    assert protocol.safe_file_name(name) is ok


def test_input_path() -> None:
    assert protocol.input_path(protocol.input_file("a.png", "image/png", "/s/i/1.png")) == "/s/i/1.png"
    assert protocol.input_path({"$file": "x"}) is None and protocol.input_path("p") is None
