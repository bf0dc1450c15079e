"""A worker's `"ray": true` jobs (`modelhost serve --worker ... --ray ADDRESS`): `document.convert` and `text.embed`
run on the cluster's actors with the outputs the same job gives without `ray`, progress as it goes, and a cancel
that ends the job and frees the actors.

One `serve --worker --ray` process for the module, serving `ocr` and the tiny GGUF, whose jobs' pools are 2 actors
of half a CPU each on the session's head (2 CPUs): what a user starts, joined to the cluster as they would.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from ray_support import Cli

from modelhost.testing import raynodes
from modelhost.testing.waiting import STATE_WAIT_SECONDS, wait_until

#: Per test, setup included: this module's first test also waits for the worker's start (joining the cluster,
#: loading two models), and each Ray job for its pool's actors to start, on 2 loaded cores.
pytestmark = pytest.mark.timeout(900)

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "documents"
REDBOOK = CORPUS / "pdf" / "redp5110_sampled.pdf"
#: CPUs each actor of a job reserves: the two of a pool take one of the head's two, and leave room for the rest.
ACTOR_CPUS = 0.5
#: Between two looks at a job: each look is a request the worker answers between its other work.
POLL_SECONDS = 0.2
#: Lines the embedding jobs embed: several calls of the worker's EMBED_CHUNK (64), so several pieces on the pool.
LINES = 300


@pytest.fixture(scope="module")
def worker(
    ray_head: raynodes.RayNode, tiny_llama_gguf: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The base URL of `modelhost serve --worker --ray` serving `ocr` and `tiny`; stopped at the module's end."""
    port = raynodes.free_port(raynodes.HEAD_IP)
    state = tmp_path_factory.mktemp("ray-worker")
    cli = Cli(
        "serve", "--ray", ray_head.address, "--worker", f"{raynodes.HEAD_IP}:{port}", "--no-socket",
        "--model", "ocr", "--model", f"tiny={tiny_llama_gguf}", "--state", str(state),
        "--actors", "2", "--num-cpus", str(ACTOR_CPUS), "--log-format", "none",
    )  # fmt: skip
    try:
        cli.wait_for("modelhost: ready:")
        assert any('"ray": true run on the Ray cluster' in line for line in cli.lines), cli.output
        yield f"http://{raynodes.HEAD_IP}:{port}"
    finally:
        status = cli.stop()
    assert status == 0, cli.output


def submit(base: str, operation: str, model: str, value: dict[str, Any], files: dict[str, Path] | None = None) -> str:
    """A job's id; its uploads are the `files` (field -> path)."""
    request = {"operation": operation, "model": model, "input": value}
    parts: list[tuple[str, Any]] = [("request", (None, json.dumps(request), "application/json"))]
    for field, path in (files or {}).items():
        parts.append((field, (path.name, path.read_bytes(), "application/octet-stream")))
    answer = httpx.post(f"{base}/v1/jobs", files=parts, timeout=STATE_WAIT_SECONDS)
    assert answer.status_code == 202, answer.text
    return str(answer.json()["id"])


def watch(base: str, job: str, until: Any = None) -> tuple[dict[str, Any], list[tuple[int, int]]]:
    """The job's record once it has ended (or once `until(record)` holds), and the progress steps seen meanwhile."""
    steps: list[tuple[int, int]] = []
    seen: dict[str, Any] = {}

    def ended() -> bool:
        record = httpx.get(f"{base}/v1/jobs/{job}", timeout=STATE_WAIT_SECONDS).json()
        seen.update(record)
        if record["status"] == "processing" and record.get("total"):
            steps.append((record["step"], record["total"]))
        if record["status"] in ("completed", "failed", "cancelled") or (until is not None and until(record)):
            return True
        time.sleep(POLL_SECONDS)
        return False

    wait_until(ended, timeout=600, what=f"job {job} to end")
    return seen, steps


def outputs(base: str, record: dict[str, Any]) -> dict[str, bytes]:
    files = f"{base}/files/{record['id']}"
    return {name: httpx.get(f"{files}/{name}", timeout=STATE_WAIT_SECONDS).content for name in record["output"]}


def local_pages(base: str) -> float:
    """Requests the worker's own `ocr` host has answered (its /metrics): a Ray job's pages must not be among them."""
    text = httpx.get(f"{base}/metrics", timeout=STATE_WAIT_SECONDS).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("modelhost_request_success_total{") and 'model_name="ocr"' in line
    )


@pytest.fixture(scope="module")
def mixed_pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Redbook pages 1-3 (a text layer: headings and furniture found across pages, so across pieces) and the OCR
    corpus page (pixels only: read by the model, on an actor)."""
    import pypdfium2 as pdfium

    path = tmp_path_factory.mktemp("mixed") / "mixed.pdf"
    mixed = pdfium.PdfDocument.new()
    born_digital = pdfium.PdfDocument(str(REDBOOK))
    scan = pdfium.PdfDocument(str(CORPUS / "ocr" / "ocr_test.pdf"))
    mixed.import_pages(born_digital, [0, 1, 2])
    mixed.import_pages(scan)
    mixed.save(path)
    for document in (mixed, born_digital, scan):
        document.close()
    return path


def test_a_document_job_on_ray_writes_what_the_plain_job_writes(worker: str, mixed_pdf: Path) -> None:
    plain, _ = watch(worker, submit(worker, "document.convert", "ocr", {"document": {"$file": "d"}}, {"d": mixed_pdf}))
    assert plain["status"] == "completed", plain
    before = local_pages(worker)
    job = submit(worker, "document.convert", "ocr", {"document": {"$file": "d"}, "ray": True}, {"d": mixed_pdf})
    spread, steps = watch(worker, job)
    assert spread["status"] == "completed", spread
    # Every output, byte for byte: the Markdown, the DoclingDocument, each page's DocTags.
    assert spread["output"] == plain["output"] == [
        "document.md", "document.json", "page-1.doctags", "page-2.doctags", "page-3.doctags", "page-4.doctags"
    ]  # fmt: skip
    assert outputs(worker, spread) == outputs(worker, plain)
    # Progress counted pages of the four, as the plain job counts them; the scanned page was read on the cluster,
    # not by the worker's own model.
    assert (spread["step"], spread["total"]) == (4, 4) and all(total == 4 and 0 <= step <= 4 for step, total in steps)
    assert local_pages(worker) == before


def test_a_cancelled_document_job_on_ray_ends_and_frees_its_actors(worker: str, ray_driver: Any) -> None:
    total = ray_driver.cluster_resources()["CPU"]

    def all_free() -> bool:
        return bool(ray_driver.available_resources().get("CPU", 0.0) == total)

    wait_until(all_free, what="the earlier jobs' actors gone")  # released, not killed: they end in their own time
    value = {"document": {"$file": "d"}, "ray": True, "text_layer": False, "pages": "1-8"}
    job = submit(worker, "document.convert", "ocr", value, {"d": REDBOOK})

    # The job's pool holds CPUs (nothing else holds any between tests): its actors are there, starting or reading.
    # Cancelling then, rather than after a first page, spares the test a model load and a page read: the stop
    # kills the pool's actors whichever they are doing.
    wait_until(lambda: not all_free(), what="the job's actors placed")
    cancelled = httpx.delete(f"{worker}/v1/jobs/{job}", timeout=STATE_WAIT_SECONDS)
    assert cancelled.status_code in (200, 202), cancelled.text
    record, _ = watch(worker, job)
    assert record["status"] == "cancelled" and record["code"] == "WORKER_CANCELLED", record
    # It reports cancelled only once the actors are killed: their CPUs are free again by then (give Ray's own
    # bookkeeping a moment, not the pages' time).
    wait_until(all_free, what="the cancelled job's actors gone")


def test_an_embedding_job_on_ray_gives_the_plain_jobs_vectors(worker: str, tmp_path: Path) -> None:
    texts = tmp_path / "texts.txt"
    texts.write_text("".join(f"line {i}: a sentence of the corpus, number {i * 7}\n" for i in range(LINES)))
    plain, _ = watch(worker, submit(worker, "text.embed", "tiny", {"file": {"$file": "t"}}, {"t": texts}))
    assert plain["status"] == "completed", plain
    spread, _ = watch(worker, submit(worker, "text.embed", "tiny", {"file": {"$file": "t"}, "ray": True}, {"t": texts}))
    assert spread["status"] == "completed", spread
    assert (spread["step"], spread["total"]) == (LINES, LINES)
    ours, theirs = outputs(worker, spread), outputs(worker, plain)
    vectors = np.load(io.BytesIO(ours["embeddings.npy"]))
    expected = np.load(io.BytesIO(theirs["embeddings.npy"]))
    # The same calls of the same model on the same machine: the same bits (docs/cluster.md states the tolerance
    # across machines, whose CPUs may round differently).
    assert vectors.shape == expected.shape == (LINES, expected.shape[1])
    assert np.array_equal(vectors, expected)
    mine, reference = json.loads(ours["result.json"]), json.loads(theirs["result.json"])
    for key in ("count", "dimensions", "usage", "truncated", "normalized"):
        assert mine[key] == reference[key], key

    # A text the model refuses (too long for its context) fails the job as the plain job fails it: the job's own
    # fault, the text named by its place in the whole job.
    too_long = [f"t{i}" for i in range(70)]
    too_long[66] = "word " * 5000
    refused, _ = watch(worker, submit(worker, "text.embed", "tiny", {"texts": too_long, "ray": True}))
    assert refused["status"] == "failed" and refused["code"] == "WORKER_INVALID_INPUT", refused
    assert "texts[66]" in refused["error"], refused
