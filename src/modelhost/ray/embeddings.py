"""Texts embedded over an actor pool on Ray Data (a worker's `text.embed` job with `"ray": true`): each actor loads
the job's model once and embeds the pieces of the texts it is given, and the vectors come back in the texts' order.

The texts travel (a piece of at most MAX_PIECE_CHUNKS calls' worth, as JSON): a job's texts are already in the
worker's memory, bounded by its MAX_TEXTS, and sending them spares every node a copy of the uploaded file. Inside a
piece, the actor makes the same calls of `chunk` texts the worker's own host would make (`Host.submit_embedding`,
pieces cut at multiples of `chunk`), so each vector comes from the same call layout as the plain job's.

A model's refusal of a call (a text too long for its context, with truncation off) comes back as data, not as an
actor error (which Ray would retry): the run stops there with a ModelHostError carrying the host's code and message.
An actor that dies is restarted and its piece retried (MAX_PIECE_RETRIES); a piece lost every time fails the run,
since an index with a hole in it is no index.
"""

from __future__ import annotations

import json
import math
import pickle
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from modelhost.errors import ModelHostError
from modelhost.host import Host
from modelhost.inference import TextModel
from modelhost.inference.types import EmbeddingResult
from modelhost.ray.actor import HostActor
from modelhost.ray.cluster import connect
from modelhost.ray.pool import Pool, Stop, stream

#: Pieces per actor the texts are cut into, at least: enough that an actor finishing early takes more, and that
#: progress moves several times per actor.
PIECES_PER_ACTOR = 4
#: Calls in one piece, at most (16 calls of 64 texts: 1,024 texts): a lost actor costs at most this many calls
#: again, and progress moves at least every this many calls.
MAX_PIECE_CHUNKS = 16
#: Tries of a piece whose actor died before the run fails.
MAX_PIECE_RETRIES = 2


@dataclass(frozen=True, slots=True)
class EmbedSettings:
    """How every actor embeds: its model's loader (the worker's served model, with its load options: it travels
    pickled, and the model's files must be at the same path on every node), the name its host goes by, and the
    job's options; `chunk` texts per call."""

    loader: Callable[[], TextModel]
    label: str
    normalize: bool = True
    truncate: bool = False
    chunk: int = 64


@dataclass(slots=True)
class PieceAnswer:
    """A piece's calls, in order: (offset of the call's first text in the job, its result); and the refusal that
    stopped the piece, if one did: (code, message) of the call starting at the next offset."""

    calls: list[tuple[int, EmbeddingResult]] = field(default_factory=list)
    refusal: tuple[str, str] | None = None


class Embedder(HostActor):
    """A Ray Data actor (`map_batches` with an actor pool): one model host for its life, loaded when it starts."""

    def __init__(self, settings: EmbedSettings) -> None:
        super().__init__("modelhost-embed")
        self.settings = settings
        self.host = Host(settings.loader, name=settings.label)
        self.run(self.host.start())  # the model, once per actor: a load that fails fails the actor's start

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Each row's texts (`start`, `texts`: JSON) embedded; rows come back with their pickled PieceAnswer."""
        starts = [int(start) for start in batch["start"]]
        answers = [
            pickle.dumps(self.run(self.embed(start, json.loads(str(texts)))))
            for start, texts in zip(starts, batch["texts"], strict=True)
        ]
        return {"start": np.array(starts), "result": np.array(answers, dtype=object)}

    async def embed(self, start: int, texts: list[str]) -> PieceAnswer:
        """The piece's calls of `chunk` texts, in order, until one is refused."""
        s = self.settings
        answer = PieceAnswer()
        for offset in range(0, len(texts), s.chunk):
            call = texts[offset : offset + s.chunk]
            try:
                result = await self.host.submit_embedding(call, normalize=s.normalize, truncate=s.truncate).result()
            except ModelHostError as exc:
                answer.refusal = (exc.code, str(exc))
                break
            answer.calls.append((start + offset, result))
        return answer


def piece_size(total: int, actors: int, chunk: int) -> int:
    """Texts per piece: PIECES_PER_ACTOR pieces per actor, at most MAX_PIECE_CHUNKS calls, a whole number of calls
    (so each call is the one the worker's own host would make)."""
    calls = math.ceil(total / chunk)
    per_piece = max(1, min(MAX_PIECE_CHUNKS, math.ceil(calls / (max(1, actors) * PIECES_PER_ACTOR))))
    return per_piece * chunk


def embed_texts(
    address: str, texts: list[str], settings: EmbedSettings, *, pool: Pool, stop: Stop | None = None
) -> Iterator[tuple[int, EmbeddingResult]]:
    """(offset, result) of every call of `settings.chunk` texts, in order, made on the pool's actors (blocking).
    ModelHostError with the model's code and message at the first refused call; ends early once `stop` is set."""
    connect(address)
    size = piece_size(len(texts), pool.actors, settings.chunk)
    rows = [{"start": start, "texts": json.dumps(texts[start : start + size])} for start in range(0, len(texts), size)]
    for row in stream(
        rows, Embedder, {"settings": settings}, pool, retries=MAX_PIECE_RETRIES, errored_rows=0, stop=stop
    ):
        answer: PieceAnswer = pickle.loads(row["result"])
        yield from answer.calls
        if answer.refusal is not None:
            code, message = answer.refusal
            raise ModelHostError(message, code=code)


__all__ = ["EmbedSettings", "Embedder", "PieceAnswer", "embed_texts", "piece_size"]
