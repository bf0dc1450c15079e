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

`convert_document` is one document's run for a worker's `"ray": true` job (modelhost.ray.jobs): the same pieces
and passes, the Conversion returned rather than written, and a `Stop` that ends the run and kills its actors.
"""

from __future__ import annotations

import asyncio
import math
import pickle
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelhost.documents import Conversion, PageResult, parse_pages
from modelhost.documents.batch import Outcome, deliver, targets
from modelhost.documents.pipeline import conclude, default_engine
from modelhost.errors import ModelHostError
from modelhost.ray.cluster import connect
from modelhost.ray.pages import PageConverter, Piece, PieceResult, ReadSettings
from modelhost.ray.pool import Pool, Stop, StopRequested, stream

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
    """One input opened here: its page numbers, how messages name it, and where its result goes."""

    doc: int
    path: Path
    numbers: list[int]
    place: Path | None = None
    name: str = ""


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
    num_cpus: float = 1.0,
    write: Callable[[str], None] | None = None,
    on_start: Callable[[Path, int], None] | None = None,
    on_page: Callable[[Path, int, int, PageResult], None] | None = None,
    on_piece: Callable[[Path, str, int], None] | None = None,
) -> list[Outcome]:
    """Convert `files` over `actors` actors (each reserving `num_cpus`) of the cluster at `address`, writing each
    result as `documents.batch.convert_files` does (the pages `settings.convert.pages` names); one Outcome per file,
    in order. Blocking. `on_piece(path, node, pages)` is told where each piece was read (the node's address) and how
    many of its pages were read."""
    places = targets(files, output, fmt)
    if output is not None and len(files) > 1:
        output.mkdir(parents=True, exist_ok=True)
    outcomes = [Outcome(path) for path in files]
    documents: list[_Document] = []
    for doc, (path, place) in enumerate(zip(files, places, strict=True)):
        try:
            numbers = _numbers(path, settings.convert.pages, path.name)
        except ModelHostError as exc:
            outcomes[doc].error = str(exc)
            continue
        documents.append(_Document(doc, path, numbers, place, path.name))
        if on_start is not None:
            on_start(path, len(numbers))
    if not documents:
        return outcomes
    connect(address)
    started = time.perf_counter()

    def finish(document: _Document, got: PieceResult) -> None:
        outcome = outcomes[document.doc]
        try:
            conversion = _conclude(document, got, started)
            deliver(conversion, document.place, fmt, write)
            outcome.conversion, outcome.written = conversion, document.place
        except ModelHostError as exc:
            outcome.error = str(exc)
        except OSError as exc:
            outcome.error = f"{document.name}: {exc}"

    def pages_read(document: _Document, done: int, page: PageResult) -> None:
        if on_page is not None:
            on_page(document.path, done, len(document.numbers), page)

    def piece_read(document: _Document, node: str, count: int) -> None:
        if on_piece is not None:
            on_piece(document.path, node, count)

    _read(documents, settings, Pool(actors, num_cpus), finish, pages_read, piece_read)
    return outcomes


def convert_document(
    address: str,
    path: Path,
    settings: ReadSettings,
    *,
    name: str,
    pool: Pool | None = None,
    on_start: Callable[[int], None] | None = None,
    on_page: Callable[[int, int, PageResult], None] | None = None,
    stop: Stop | None = None,
) -> Conversion:
    """One document over the pool, its Conversion what `documents.convert` makes of it (a worker's `"ray": true`
    job). Blocking. `name` is how messages name it; `on_start(total)` and `on_page(done, total, result)` as
    `documents.convert` calls them, each page as its piece arrives. DocumentError for a document none of whose pages
    can be read; StopRequested once `stop` is set (its actors killed)."""
    numbers = _numbers(path, settings.convert.pages, name)
    if on_start is not None:
        on_start(len(numbers))
    connect(address)
    started = time.perf_counter()
    done: list[PieceResult] = []

    def pages_read(document: _Document, count: int, page: PageResult) -> None:
        if on_page is not None:
            on_page(count, len(numbers), page)

    document = _Document(0, path, numbers, None, name)
    _read([document], settings, pool or Pool(), lambda _, got: done.append(got), pages_read, stop=stop)
    if (stop is not None and stop.is_set) or not done:
        raise StopRequested
    return _conclude(document, done[0], started)


def _conclude(document: _Document, got: PieceResult, started: float) -> Conversion:
    """The document joined from its pieces, by the same `conclude` a plain conversion ends with."""
    got.results.sort(key=lambda r: r.number)
    return asyncio.run(conclude(document.name, document.path.stem, got.results, got.parts, got.unread, started))


def _read(
    documents: list[_Document],
    settings: ReadSettings,
    pool: Pool,
    finish: Callable[[_Document, PieceResult], None],
    on_page: Callable[[_Document, int, PageResult], None],
    on_piece: Callable[[_Document, str, int], None] | None = None,
    *,
    stop: Stop | None = None,
) -> None:
    """Read every page of `documents` over the pool, in passes (the module doc says why); `finish(document, got)`
    for each document once all its pieces are in (its pieces lost in every pass reported as unread pages), in the
    order they complete; `on_page(document, done, page)` for each page read. Nothing is finished once `stop` is
    set."""
    pieces = [piece for d in documents for piece in cut(d.doc, d.path, d.numbers, pool.actors)]
    expected = {d.doc: {p.index: p for p in pieces if p.doc == d.doc} for d in documents}
    gathered = {d.doc: PieceResult() for d in documents}
    arrived: dict[int, set[int]] = {d.doc: set() for d in documents}
    by_doc = {d.doc: d for d in documents}

    def complete(doc: int) -> None:
        got = gathered.pop(doc)  # its parts (pictures' crops) go as soon as it is finished
        for index, piece in expected[doc].items():
            if index not in arrived[doc]:  # lost in every pass
                got.unread.update(dict.fromkeys(piece.pages, LOST))
        finish(by_doc[doc], got)

    def take(doc: int, index: int, result: PieceResult) -> None:
        if index in arrived[doc]:
            return  # read twice (a retry of a piece whose first answer did arrive): the first one stands
        got = gathered[doc]
        got.results.extend(result.results)
        got.parts.update(result.parts)
        got.unread.update(result.unread)
        done = len(got.results) - len(result.results)
        for page in result.results:
            done += 1
            on_page(by_doc[doc], done, page)
        if on_piece is not None:
            on_piece(by_doc[doc], result.node, len(result.results))
        arrived[doc].add(index)
        if len(arrived[doc]) == len(expected[doc]):
            complete(doc)

    remaining = pieces
    for _ in range(MAX_PASSES):
        for doc, index, result in _stream(remaining, settings, pool, stop):
            take(doc, index, result)
        if stop is not None and stop.is_set:
            return
        remaining = [p for p in remaining if p.index not in arrived[p.doc]]
        if not remaining:
            break
    for doc in list(gathered):
        complete(doc)


def _numbers(path: Path, pages: str | None, name: str) -> list[int]:
    """The pages of `path` to convert (DocumentError naming the file when it cannot be opened, or `pages` is bad)."""
    source = default_engine().open(path, name=name)
    try:
        return list(parse_pages(pages, source.count))
    finally:
        source.close()


def _stream(
    pieces: list[Piece], settings: ReadSettings, pool: Pool, stop: Stop | None
) -> Iterator[tuple[int, int, Any]]:
    """One pass: (doc, piece index, its PieceResult) for every piece read, in order, as Ray Data yields them; a
    piece skipped after MAX_PIECE_RETRIES never comes (the caller's next pass tries it again)."""
    rows = stream(
        [{"task": p.to_json()} for p in pieces],
        PageConverter,
        {"settings": settings},
        pool,
        retries=MAX_PIECE_RETRIES,
        # A piece whose actor died MAX_PIECE_RETRIES times is skipped, not fatal: its pages are reported unread
        # and the other documents are still converted.
        errored_rows=len(pieces),
        stop=stop,
    )
    for row in rows:
        yield int(row["doc"]), int(row["index"]), pickle.loads(row["result"])


__all__ = ["LOST", "PageConverter", "Pool", "ReadSettings", "convert_document", "convert_files", "cut"]
