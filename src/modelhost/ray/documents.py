"""`modelhost convert --ray ADDRESS FILES...`: documents' pages spread over an actor pool of document engines on
Ray Data, each actor loading its engine and model once (modelhost.ray.pages).

Only paths and page numbers travel: this process opens each document only to count its pages, cuts them into
pieces, and the actors read and render their pages themselves (every node sees the files at the same path: shared
storage). Ray Data streams the pieces back in order (`preserve_order`), and each document is joined by the same
`pipeline.conclude` a plain `convert` ends with, so both write the same document.

Failures: a page that fails is tried again in its actor, then reported by number and reason while the rest of its
document is kept. An actor that dies (its process killed, its node lost) is restarted by Ray and its piece retried
(MAX_PIECE_RETRIES). Those retries can all fail before Ray has even declared a lost node dead (measured: three
retries spent in seconds against a node killed mid-piece, ~30 s before the GCS marks it dead), so the pieces a pass
lost go round again in a new pass on a new pool, on the nodes still alive (MAX_PASSES); a piece lost in every pass
is reported as its pages not read, and the run goes on.
"""

from __future__ import annotations

import asyncio
import logging
import math
import pickle
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelhost.docengine.engine import DocumentEngine
from modelhost.documents import PageResult, parse_pages
from modelhost.documents.batch import Outcome, deliver, targets
from modelhost.documents.pipeline import conclude
from modelhost.errors import ModelHostError
from modelhost.ray.cluster import connect
from modelhost.ray.pages import PageConverter, Piece, PieceResult, ReadSettings

#: Pieces per actor a document is cut into, at least: enough that actors finishing early take more work (pages
#: differ by 10x in cost), few enough that each piece's style pass (up to STYLE_PAGES text layers, ~10-40 ms each)
#: stays small beside its pages.
PIECES_PER_ACTOR = 4
#: Pages in one piece, at most: a lost actor costs at most this many pages' work again, and progress moves at least
#: every this many pages.
MAX_PIECE_PAGES = 32
#: Tries of a piece whose actor died before the piece is reported as its pages not read (each try on a restarted
#: actor, possibly on another node).
MAX_PIECE_RETRIES = 2
#: Passes over the pieces lost so far (each a new actor pool, placed on the nodes alive then; its start costs each
#: actor's model load again): a piece whose actor dies in every pass is reported, not tried for ever.
MAX_PASSES = 3
#: Why the pages of such a piece were not read.
LOST = f"not read (its actor died in each of {MAX_PASSES} passes over it)"


@dataclass(frozen=True, slots=True)
class _Document:
    """One input opened here: its page numbers, and where its result goes."""

    doc: int
    path: Path
    numbers: list[int]
    place: Path | None


def cut(doc: int, path: Path, numbers: Sequence[int], actors: int) -> list[Piece]:
    """A document's pages in consecutive pieces: PIECES_PER_ACTOR per actor, at most MAX_PIECE_PAGES pages each."""
    size = max(1, min(MAX_PIECE_PAGES, math.ceil(len(numbers) / (max(1, actors) * PIECES_PER_ACTOR))))
    style = list(numbers)
    return [
        Piece(doc, i, str(path.resolve()), list(numbers[start : start + size]), style)
        for i, start in enumerate(range(0, len(numbers), size))
    ]


def convert_files(
    address: str,
    files: Sequence[Path],
    settings: ReadSettings,
    *,
    actors: int = 2,
    output: Path | None = None,
    fmt: str = "md",
    pages: str | None = None,
    num_cpus: float = 1.0,
    write: Callable[[str], None] | None = None,
    on_start: Callable[[Path, int], None] | None = None,
    on_page: Callable[[Path, int, int, PageResult], None] | None = None,
    on_piece: Callable[[Path, str, int], None] | None = None,
) -> list[Outcome]:
    """Convert `files` over `actors` actors (each reserving `num_cpus`) of the cluster at `address`, writing each
    result as `documents.batch.convert_files` does; one Outcome per file, in order. Blocking. `on_piece(path,
    node, pages)` is told where each piece was read (the node's address) and how many of its pages were read."""
    places = targets(files, output, fmt)
    if output is not None and len(files) > 1:
        output.mkdir(parents=True, exist_ok=True)
    outcomes = [Outcome(path) for path in files]
    documents: list[_Document] = []
    for doc, (path, place) in enumerate(zip(files, places, strict=True)):
        try:
            numbers = _numbers(path, pages)
        except ModelHostError as exc:
            outcomes[doc].error = str(exc)
            continue
        documents.append(_Document(doc, path, numbers, place))
        if on_start is not None:
            on_start(path, len(numbers))
    if not documents:
        return outcomes
    connect(address)
    pieces = [piece for d in documents for piece in cut(d.doc, d.path, d.numbers, actors)]
    expected = {d.doc: {p.index: p for p in pieces if p.doc == d.doc} for d in documents}
    gathered = {d.doc: PieceResult() for d in documents}
    arrived: dict[int, set[int]] = {d.doc: set() for d in documents}
    by_doc = {d.doc: d for d in documents}
    started = time.perf_counter()

    def finish(document: _Document) -> None:
        got = gathered[document.doc]
        for index, piece in expected[document.doc].items():
            if index not in arrived[document.doc]:  # lost in every pass
                got.unread.update(dict.fromkeys(piece.pages, LOST))
        got.results.sort(key=lambda r: r.number)
        outcome = outcomes[document.doc]
        name, stem = document.path.name, document.path.stem
        try:
            conversion = asyncio.run(conclude(name, stem, got.results, got.parts, got.layouts, got.unread, started))
            deliver(conversion, document.place, fmt, write)
            outcome.conversion, outcome.written = conversion, document.place
        except ModelHostError as exc:
            outcome.error = str(exc)
        except OSError as exc:
            outcome.error = f"{name}: {exc}"

    def take(doc: int, index: int, result: PieceResult) -> None:
        if index in arrived[doc]:
            return  # read twice (a retry of a piece whose first answer did arrive): the first one stands
        got = gathered[doc]
        got.results.extend(result.results)
        got.parts.update(result.parts)
        got.layouts.update(result.layouts)
        got.unread.update(result.unread)
        if on_page is not None:
            done = len(got.results) - len(result.results)
            for page in result.results:
                done += 1
                on_page(by_doc[doc].path, done, len(by_doc[doc].numbers), page)
        if on_piece is not None:
            on_piece(by_doc[doc].path, result.node, len(result.results))
        arrived[doc].add(index)
        if len(arrived[doc]) == len(expected[doc]):
            finish(by_doc[doc])
            del gathered[doc]  # its parts (pictures' crops) go as soon as it is written

    remaining = pieces
    for _ in range(MAX_PASSES):
        for doc, index, result in _stream(remaining, settings, actors, num_cpus):
            take(doc, index, result)
        remaining = [p for p in remaining if p.index not in arrived[p.doc]]
        if not remaining:
            break
    for doc in list(gathered):
        finish(by_doc[doc])
    return outcomes


def _numbers(path: Path, pages: str | None) -> list[int]:
    """The pages of `path` to convert (DocumentError naming the file when it cannot be opened, or `pages` is bad)."""
    engine = _local_engine()
    source = engine.open(path, name=path.name)
    try:
        return list(parse_pages(pages, source.count))
    finally:
        source.close()


_engine: list[DocumentEngine] = []


def _local_engine() -> DocumentEngine:
    # This process's engine, for page counts only (its sandbox's children start once).
    if not _engine:
        _engine.append(DocumentEngine())
    return _engine[0]


def _stream(
    pieces: list[Piece], settings: ReadSettings, actors: int, num_cpus: float
) -> Iterator[tuple[int, int, Any]]:
    """One pass: (doc, piece index, its PieceResult) for every piece read, in order, as Ray Data yields them; a
    piece skipped after MAX_PIECE_RETRIES never comes (the caller's next pass tries it again)."""
    import ray.data

    context = ray.data.DataContext.get_current()
    # Row order is kept only when asked (Ray Data finishes blocks in any order otherwise).
    context.execution_options.preserve_order = True
    # The CLI draws its own progress bar on stderr; Ray Data's would draw a second one through it.
    context.enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)  # its "starting execution" lines, likewise
    # A piece whose actor died MAX_PIECE_RETRIES times is skipped, not fatal: its pages are reported unread and the
    # other documents are still converted.
    context.max_errored_blocks = len(pieces)
    dataset = ray.data.from_items([{"task": p.to_json()} for p in pieces], override_num_blocks=len(pieces))
    with warnings.catch_warnings():
        # max_restarts and max_task_retries still go as "ray_remote_args", which Ray 2.60 calls deprecated (until
        # 2.64) with no named parameter to take their place yet: the warning would be the CLI's every run.
        warnings.simplefilter("ignore", DeprecationWarning)
        results = dataset.map_batches(
            PageConverter,
            fn_constructor_kwargs={"settings": settings},
            batch_size=1,
            compute=ray.data.ActorPoolStrategy(size=max(1, actors)),
            num_cpus=num_cpus,
            # One actor per node before two on any: each node's CPUs and memory read pages, and losing a node
            # loses as few actors as can be.
            scheduling_strategy="SPREAD",
            # Actors come back after a death (a killed process, a lost node); their piece is retried, boundedly, so
            # a page that kills its actor every time ends as unread instead of looping for ever.
            max_restarts=-1,
            max_task_retries=MAX_PIECE_RETRIES,
        )
    for row in results.iter_rows():
        yield int(row["doc"]), int(row["index"]), pickle.loads(row["result"])


__all__ = ["LOST", "PageConverter", "ReadSettings", "convert_files", "cut"]
