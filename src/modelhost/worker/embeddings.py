"""`text.embed`: pooled embedding vectors of many texts, durably, through the host's model (a RAG index's batch job).

Input: `{"texts": [str, ...]}` or `{"file": {"$file": field}}` (an uploaded UTF-8 text file, one text per non-empty
line), with `"normalize"?: bool` (default true: unit-length vectors, as /v1/embeddings returns them) and
`"truncate"?: bool` (default false: a text too long for the model's context fails the job, naming it).
Outputs: `embeddings.npy` (a float32 array of shape (texts, dimensions), row i the vector of text i: NumPy's own
file format, a small text header and then the raw little-endian rows, so any language reads it) and `result.json`
(model, count, dimensions, which texts were truncated, usage, timings).
Progress: stage `encoding_prompt`, step = texts embedded of `total`, `remaining` from the pace so far. The texts go to
the model in calls of EMBED_CHUNK, each an embedding ticket the host runs between generation steps, so a big job
shares the model with chat traffic instead of stopping it; cancel stops between two calls.
`"ray": true` (a worker started with `--ray ADDRESS`: jobs.cluster) embeds the texts on that Ray cluster's actors
instead, each loading the job's model once and embedding its pieces in the same calls of EMBED_CHUNK, so the
vectors are the ones this worker's model gives (docs/cluster.md says within what tolerance); a cancel stops the
cluster's work and frees its actors.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from modelhost.errors import ModelHostError, kind_of
from modelhost.host.models import ModelSpec, Servable
from modelhost.inference.capabilities import EmbeddingModel, as_capability
from modelhost.inference.types import EmbeddingResult
from modelhost.jobs.cluster import served_spec, wants_cluster
from modelhost.jobs.operation import JobContext, Operation, failure_of, submit_to_host
from modelhost.worker import protocol
from modelhost.worker.protocol import Failure, input_path, invalid

OPERATION = "text.embed"

#: Texts per model call: enough for batching to pay (transformers embeds ~2.5x faster per text in a batch), few
#: enough that one call stays a short gap in the chat traffic it is interleaved with, and a cancel lands soon.
EMBED_CHUNK = 64
#: Most texts one job embeds. The vectors are written to disk as they come, but the job is one unit of work that
#: fails or is retried whole: 100,000 texts of a 4096-wide model are 1.6 GB of output, a day's RAG index, not more.
MAX_TEXTS = 100_000
#: Longest line read from an uploaded file (characters): far past any model's context, so a file with no newlines
#: (a binary uploaded by mistake) is refused instead of being read into memory as one "text".
MAX_LINE_CHARS = 1_000_000


def _flag(value: dict[str, Any], key: str, default: bool) -> bool:
    got = value.get(key, default)
    if not isinstance(got, bool):
        raise invalid(f"{OPERATION}: `{key}` must be true or false, got {got!r}")
    return got


def _texts_field(value: dict[str, Any]) -> list[str] | None:
    texts = value.get("texts")
    if texts is None:
        return None
    if not isinstance(texts, list) or not texts:
        raise invalid(f"{OPERATION}: `texts` must be a non-empty list of strings")
    if len(texts) > MAX_TEXTS:
        raise invalid(f"{OPERATION}: at most {MAX_TEXTS} texts per job, got {len(texts)}")
    for i, text in enumerate(texts):
        if not isinstance(text, str) or not text:
            raise invalid(f"{OPERATION}: texts[{i}] must be a non-empty string")
    return texts


def _shape(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid(f"{OPERATION} input must be a JSON object")
    if ("texts" in value) == ("file" in value):
        raise invalid(f"{OPERATION} needs `texts` (a list of strings) or `file` (an uploaded text file), not both")
    _flag(value, "normalize", True)
    _flag(value, "truncate", False)
    return value


class ClusterEmbeddings(Protocol):
    """What a `"ray": true` embedding job needs of a cluster (jobs.cluster): (offset of its first text, its
    result) for every call of `chunk` texts, in order, each call as the host's `submit_embedding` answers it, made
    by the cluster's actors, each loading `spec`'s model once. A model's refusal is a ModelHostError with the host's
    code, its message naming `input[i]` within the call. Closing the generator (or cancelling the task iterating
    it) stops the cluster's work and frees its actors."""

    def embed_texts(
        self, texts: list[str], spec: ModelSpec, *, normalize: bool, truncate: bool, chunk: int
    ) -> AsyncGenerator[tuple[int, EmbeddingResult], None]: ...


def check_submission(value: Any, host: Servable, cluster: ClusterEmbeddings | None = None) -> None:
    """The submission-time check (an upload is still `{"$file": field}`): the input's shape and bounds, `ray` only
    on a worker with a cluster, and a model that can embed (when it is loaded: a model still loading is asked again
    when the job runs)."""
    value = _shape(value)
    wants_cluster(OPERATION, value, cluster)
    if "texts" in value:
        _texts_field(value)
    else:
        upload = value.get("file")
        if not (isinstance(upload, dict) and isinstance(upload.get(protocol.FILE_REF), str)):
            raise invalid(f"{OPERATION}: `file` must be an uploaded text file ({{'$file': field}})")
    _refuse_unless_embeds(host)


def _refuse_unless_embeds(host: Servable) -> None:
    if host.ready and as_capability(getattr(host, "model", None), EmbeddingModel) is None:
        raise invalid(f"model {host.name!r} cannot embed text; serve a llama.cpp or transformers model")


def _lines(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8", errors="strict", newline="") as f:
        while line := f.readline(MAX_LINE_CHARS + 1):
            if len(line) > MAX_LINE_CHARS:
                raise invalid(f"{OPERATION}: a line of the file is longer than {MAX_LINE_CHARS} characters")
            if text := line.rstrip("\r\n"):
                yield text


def _read_file(path: Path) -> list[str]:
    """The non-empty lines of the uploaded file, bounded; an invalid UTF-8 file is the job's fault."""
    texts: list[str] = []
    try:
        for text in _lines(path):
            texts.append(text)
            if len(texts) > MAX_TEXTS:
                raise invalid(f"{OPERATION}: at most {MAX_TEXTS} texts per job (non-empty lines of the file)")
    except UnicodeDecodeError as exc:
        raise invalid(f"{OPERATION}: the file is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    if not texts:
        raise invalid(f"{OPERATION}: the file has no non-empty line to embed")
    return texts


async def text_embed(ctx: JobContext, cluster: ClusterEmbeddings | None = None) -> list[str]:
    """Embed every text through the host (or the cluster), writing the vectors as they come."""
    value = _shape(ctx.work.input)
    normalize, truncate = _flag(value, "normalize", True), _flag(value, "truncate", False)
    on_cluster = wants_cluster(OPERATION, value, cluster)
    texts = _texts_field(value)
    if texts is None:
        path = input_path(value.get("file"))
        if path is None:
            raise invalid(f"{OPERATION}: `file` must be an uploaded text file ({{'$file': field}})")
        texts = await asyncio.to_thread(_read_file, Path(path))
    ctx.progress(protocol.STAGE_INITIALIZING, 0, len(texts))
    if cluster is not None and on_cluster:
        chunks = _on_cluster(ctx, cluster, texts, normalize=normalize, truncate=truncate)
    else:
        chunks = _on_host(ctx, texts, normalize=normalize, truncate=truncate)
    task = asyncio.ensure_future(_write(ctx, chunks, len(texts), normalize=normalize))

    def stop() -> None:
        task.cancel()

    if on_cluster:  # the host's calls are cancelled by their tickets (_embed); the cluster's run by its task
        ctx.on_cancel(stop)
    try:
        return await task
    except asyncio.CancelledError:
        if ctx.cancelled:
            raise ctx.stopped() from None
        raise


async def _write(
    ctx: JobContext, chunks: AsyncGenerator[tuple[int, Any], None], total: int, *, normalize: bool
) -> list[str]:
    """Write each chunk's vectors to `embeddings.npy` as they come (in order), then `result.json`."""
    began = time.perf_counter()
    tokens = width = 0
    truncated: list[int] = []
    # The chunks are closed however this ends (a cluster's run is stopped at once, not when they are collected).
    # Plain appends, not a memory map: a write to a mapped file on a full disk is SIGBUS (the whole process dies);
    # a write() says ENOSPC, which the executor turns into "run again once the disk has room".
    async with contextlib.aclosing(chunks):
        with (ctx.dir / "embeddings.npy").open("wb") as out:
            async for start, result in chunks:
                rows = np.ascontiguousarray(result.vectors, dtype="<f4")
                if not width:  # the width is the model's: known from its first answer
                    width = int(rows.shape[1])
                    header = {"descr": "<f4", "fortran_order": False, "shape": (total, width)}
                    await asyncio.to_thread(np.lib.format.write_array_header_1_0, out, header)
                await asyncio.to_thread(out.write, rows.tobytes())
                tokens += result.prompt_tokens
                truncated.extend(start + i for i in result.truncated)
                done = start + int(rows.shape[0])
                seconds = time.perf_counter() - began
                ctx.progress(protocol.STAGE_ENCODING_PROMPT, done, total, round(seconds / done * (total - done), 3))
    result = {
        "model": ctx.work.model,
        "operation": OPERATION,
        "count": total,
        "dimensions": width,
        "dtype": "float32",
        "normalized": normalize,
        "truncated": truncated,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        "timings": {"total_seconds": round(time.perf_counter() - began, 3)},
    }
    await asyncio.to_thread((ctx.dir / "result.json").write_text, json.dumps(result, indent=2) + "\n", "utf-8")
    return ["embeddings.npy", "result.json"]


async def _on_host(
    ctx: JobContext, texts: list[str], *, normalize: bool, truncate: bool
) -> AsyncGenerator[tuple[int, Any], None]:
    """(offset, result) of each call of EMBED_CHUNK texts to the job's host, in order."""
    for start in range(0, len(texts), EMBED_CHUNK):
        chunk = texts[start : start + EMBED_CHUNK]
        yield start, await _embed(ctx, chunk, start, normalize=normalize, truncate=truncate)


async def _on_cluster(
    ctx: JobContext, cluster: ClusterEmbeddings, texts: list[str], *, normalize: bool, truncate: bool
) -> AsyncGenerator[tuple[int, Any], None]:
    """(offset, result) of each call of EMBED_CHUNK texts on the cluster's actors, in order."""
    spec = served_spec(ctx.host, OPERATION)
    start = 0
    calls = cluster.embed_texts(texts, spec, normalize=normalize, truncate=truncate, chunk=EMBED_CHUNK)
    try:
        async with contextlib.aclosing(calls):
            async for start, result in calls:
                yield start, result
                start += len(result.vectors)
    except ModelHostError as exc:
        raise _refused(exc, start) from exc


async def _embed(ctx: JobContext, chunk: list[str], offset: int, *, normalize: bool, truncate: bool) -> Any:
    """One call's vectors, waiting out a loading model or a full queue as the text operations do."""
    try:
        ticket = await submit_to_host(
            ctx, lambda: ctx.host.submit_embedding(chunk, normalize=normalize, truncate=truncate)
        )
    except Failure as failure:
        # Refused at submission (a text of more bytes than the context holds): named by its place in the whole job.
        if failure.code != protocol.WORKER_INVALID_INPUT:
            raise
        raise invalid(_shifted(failure.message, offset)) from None
    ctx.on_cancel(ticket.cancel)
    try:
        return await ticket.result()
    except ModelHostError as exc:
        if ctx.cancelled and not _refusal(exc):
            raise ctx.stopped() from exc
        raise _refused(exc, offset) from exc


def _refusal(exc: ModelHostError) -> bool:
    """Whether the model refused a call for the job's own input (a text too long, a bad option): the worker class
    its kind declares (modelhost.errors), its code's for an error that came back from a cluster's actor."""
    return kind_of(exc).worker_class == protocol.WORKER_INVALID_INPUT


def _refused(exc: ModelHostError, offset: int) -> Failure:
    """The job's failure for a model error in the call of texts from `offset`: its input's (400, naming the text by
    its place in the whole job) or the worker's."""
    if _refusal(exc):
        return invalid(_shifted(str(exc), offset))
    return failure_of(exc)


def _shifted(message: str, offset: int) -> str:
    """A call's message naming `input[i]` renamed to the text's place in the whole job (`texts[offset + i]`)."""
    return re.sub(r"input\[(\d+)\]", lambda m: f"texts[{offset + int(m.group(1))}]", message)


EMBED = Operation(OPERATION, text_embed, check_submission)
