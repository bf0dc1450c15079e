"""The actor of `convert --ray`: one document engine and one page model per actor, loaded once, converting the
pieces of documents it is given (a path and page numbers; it reads and renders the pages itself).

A piece comes back as the parts of a document `pipeline.conclude` joins: each model-read page's part (built here,
where its pixels are, so no page image ever travels) and each page's result, a text-layer page's with its layout
(plain data, kilobytes: the document-level furniture pass needs every page's). A page that fails (its model errs,
or it cannot be loaded) is tried once more here, then reported by number and reason; the rest of the piece is kept.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from modelhost.documents import assemble
from modelhost.documents.engine import DocumentEngine, PageResult, Unread
from modelhost.documents.readers import StartingReader
from modelhost.documents.settings import DEFAULTS, ConvertSettings
from modelhost.host import Host
from modelhost.inference import TextModel, catalogue, registry
from modelhost.ray.actor import HostActor

#: Times a failed page is tried again in its actor before it is reported: a model error or a sandbox child lost to
#: a passing memory squeeze is worth one more try; a page that fails twice would fail a third time.
PAGE_RETRIES = 1


@dataclass(frozen=True, slots=True)
class Piece:
    """Pages of one document for one actor: `style_pages` are the whole document's (engine.pages says why)."""

    doc: int
    index: int
    path: str
    pages: list[int]
    style_pages: list[int]

    def to_json(self) -> str:
        return json.dumps([self.doc, self.index, self.path, self.pages, self.style_pages])

    @classmethod
    def from_json(cls, text: str) -> Piece:
        doc, index, path, pages, style_pages = json.loads(text)
        return cls(int(doc), int(index), str(path), [int(n) for n in pages], [int(n) for n in style_pages])


@dataclass(slots=True)
class PieceResult:
    """What a piece's pages gave: each page's result (in page order; a text-layer page's with its layout), the
    model-read pages' parts, and the pages not read with why (each `pipeline.conclude` takes)."""

    results: list[PageResult] = field(default_factory=list)
    parts: dict[int, Any] = field(default_factory=dict)
    unread: dict[int, str] = field(default_factory=dict)
    #: The address of the node whose actor read the piece (the CLI says how many pages each node read).
    node: str = ""


@dataclass(frozen=True, slots=True)
class ReadSettings:
    """How every actor reads pages: the model (a catalogue name or path, resolved on the actor's node), the name
    its pages are credited to, and the conversion's settings (`convert.pixels=False` reads only the pages with a
    usable text layer and names the others unread: a worker job's `pixels: false`). `loader`, when given, loads the
    model instead of `model` and `backend`: a worker's served model, with the load options it was served with (it
    travels pickled; its files must be at the same path on every node). `regions`: the model answers a text-layer
    page's layout regions (the caller knows: `modelhost convert --ray` says so of its built-in `ocr`, as without
    --ray), so an actor starts its host for them (readers.StartingReader) and a piece reads its tables as `modelhost
    convert` of the same pages does; otherwise a piece asks them only once a pixel page has started the model."""

    model: str
    label: str
    backend: str | None = None
    convert: ConvertSettings = DEFAULTS
    loader: Callable[[], TextModel] | None = None
    regions: bool = False


class PageConverter(HostActor):
    """A Ray Data actor (`map_batches` with an actor pool): one engine and one model host for its life."""

    def __init__(self, settings: ReadSettings) -> None:
        super().__init__("modelhost-pages")
        self.settings = settings
        self.engine = DocumentEngine()
        loader = settings.loader
        if loader is None:
            path = catalogue.resolve(settings.model)
            loader = functools.partial(registry.load_model, path, settings.backend)
        # Loaded at the first page that needs pixels read: a piece all from the text layer never loads the model.
        self.host = Host(loader, name=settings.label)
        self.reader = StartingReader(self.host, regions=settings.regions) if settings.convert.pixels else None
        import ray

        self.node = str(ray.util.get_node_ip_address())

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Each row's piece (`task`: Piece JSON) converted; rows come back with the piece's ids and its pickled
        PieceResult."""
        pieces = [Piece.from_json(str(task)) for task in batch["task"]]
        done = [pickle.dumps(self.run(self.convert(piece))) for piece in pieces]
        return {
            "doc": np.array([p.doc for p in pieces]),
            "index": np.array([p.index for p in pieces]),
            "result": np.array(done, dtype=object),
        }

    async def convert(self, piece: Piece) -> PieceResult:
        """One piece's pages, each failed one tried PAGE_RETRIES more times before it is reported."""
        path = Path(piece.path)
        out = PieceResult(node=self.node)
        failed = await self._pages(path, piece.pages, piece.style_pages, out)
        for _ in range(PAGE_RETRIES):
            if not failed:
                break
            again = PieceResult()
            failed = await self._pages(path, failed, piece.style_pages, again)
            _merge(out, again)
        out.results.sort(key=lambda r: r.number)
        return out

    async def _pages(self, path: Path, numbers: list[int], style_pages: list[int], out: PieceResult) -> list[int]:
        """Convert `numbers` into `out`; return the numbers that failed (an error answer, or unread)."""
        source = await asyncio.to_thread(self.engine.open, path)
        failed: list[int] = []
        try:
            stream = self.engine.pages(
                source, numbers, reader=self.reader, settings=self.settings.convert, style_pages=style_pages
            )
            async for page in stream:
                if isinstance(page, Unread):
                    out.unread[page.number] = page.reason
                    failed.append(page.number)
                    continue
                if page.finish_reason == "error":
                    failed.append(page.number)
                if page.layout is None:
                    out.parts[page.number] = await asyncio.to_thread(
                        assemble.build, path.stem, [page.doctags], [page.image]
                    )
                out.results.append(dataclasses.replace(page, image=None))
                del page  # its pixels, if any, go with it
        finally:
            await asyncio.to_thread(source.close)
        return failed


def _merge(out: PieceResult, again: PieceResult) -> None:
    """A retry's pages over the first try's: a page read now replaces its failure."""
    retried = {r.number for r in again.results} | set(again.unread)
    out.results = [r for r in out.results if r.number not in retried] + again.results
    for number in retried:
        out.unread.pop(number, None)
        out.parts.pop(number, None)
    out.unread.update(again.unread)
    out.parts.update(again.parts)
