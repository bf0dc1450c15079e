"""Who reads a page: the host in this process, or a running `modelhost serve` over the inferd socket.

Both send what pdf-spec sends (one page image and "Convert this page to docling.") and return the page's DocTags
with how generation ended. A page that hits its token bound or fails keeps the text generated so far (pdf-spec's
rule: a partial page is worth more than none); the pipeline marks it partial. The host's reader also asks a page's
layout regions alone (`regions`: docengine.regions.REGIONS_PROMPT, which the `ocr` model answers with its layout
model's regions) for a text-layer page whose tables the engine reads from the model's table regions and the layer's
words; a socket's model is unknown, so WireReader is never asked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from modelhost.docengine.regions import REGIONS_PROMPT
from modelhost.documents.settings import DEFAULT_PAGE_TOKENS
from modelhost.errors import ModelHostError, UnsupportedAttachmentError

if TYPE_CHECKING:
    # The host is imported where a page is read through it: a document whose pages all have a usable text layer
    # reads none, and `modelhost convert` of such a page need not import the host and the inference contract.
    from modelhost.host import Host
    from modelhost.host.models import Servable

#: What pdf-spec's CLI asks a model for each page.
PROMPT = "Convert this page to docling."


@dataclass(frozen=True, slots=True)
class PageAnswer:
    """A model's answer for one page: its text, why it ended ("stop", "length", "error"), the error if any, and
    what the model found doubtful about it (the `ocr` model: a page in a script its recogniser does not read)."""

    text: str
    finish_reason: str
    error: str = ""
    warning: str = ""

    @property
    def partial(self) -> bool:
        return self.finish_reason != "stop"


class PageReader(Protocol):
    """Whatever reads a page image (an HxWx3 uint8 array, or a PIL image for an image file's frame) into DocTags:
    the page loop (engine.py) reads a page, or a picture cut from one, through it. Cancelling the awaiting task stops
    the model's work on it. `name` is what a page read by it names as its reader."""

    name: str

    async def read(self, image: Any, *, max_tokens: int) -> PageAnswer: ...


@runtime_checkable
class RegionReader(Protocol):
    """A reader that also answers a page image's layout regions (docengine.regions' answer): the page loop asks it
    of a text-layer page that shows a table. A reader without `regions` is never asked."""

    name: str

    async def regions(self, image: Any) -> PageAnswer: ...


class HostReader:
    """Pages through a Host's scheduler, like every other door (the host queues, cancels and measures)."""

    def __init__(self, host: Servable, *, prompt: str = PROMPT) -> None:
        self.host = host
        self.name = host.name
        self.prompt = prompt

    async def read(self, image: Any, *, max_tokens: int = DEFAULT_PAGE_TOKENS) -> PageAnswer:
        return await self._ask(image, self.prompt, max_tokens)

    async def regions(self, image: Any) -> PageAnswer:
        """The page's layout regions (docengine.regions.read_regions reads the answer) when the host's model answers
        REGIONS_PROMPT (the `ocr` model says so: `answers_regions`); from any other model an empty answer, as a VLM
        would spend a page's generation on the question. (A socket's model is unknown: WireReader is never asked.)"""
        await self._ready()
        if not getattr(getattr(self.host, "model", None), "answers_regions", False):
            return PageAnswer("", "stop")
        return await self._ask(image, REGIONS_PROMPT, DEFAULT_PAGE_TOKENS)

    async def _ready(self) -> None:
        """The host started (it is, when given)."""

    async def _ask(self, image: Any, prompt: str, max_tokens: int) -> PageAnswer:
        from modelhost.host import Delta, Done, Failed, GenerationRequest
        from modelhost.inference.types import Message

        request = GenerationRequest(
            messages=[Message("user", prompt, (image,))], options={"max_tokens": max_tokens, "temperature": 0.0}
        )
        parts: list[str] = []
        async with self.host.submit(request) as stream:
            async for event in stream:
                if isinstance(event, Delta):
                    parts.append(event.text)
                elif isinstance(event, Done):
                    return PageAnswer("".join(parts), event.finish_reason, warning=event.metrics.warning)
                elif isinstance(event, Failed):
                    return PageAnswer("".join(parts), "error", f"{event.code}: {event.message}")
        return PageAnswer("".join(parts), "cancelled")


class StartingReader(HostReader):
    """A HostReader whose host is started at its first page: converting documents whose pages all have a usable
    text layer never loads the model (the `ocr` model's start costs seconds). Given `make` instead of a host, the
    host itself is made then too (`modelhost convert`: a text-layer document imports no host); `made` is the host
    once there is one, for its caller to close.

    A page's regions start the host only with `regions` (the door knows its model answers them: `convert`'s built-in
    `ocr`), and a host that will not start (the `documents` extra not installed) gives no regions, the text-layer
    page keeping the text path's tables: a VLM is never loaded for a question it cannot answer, and a born-digital
    document converts without the extra as it did. Once a pixel page has started the host, its regions are asked
    whatever `regions` says (its model says whether it answers them)."""

    def __init__(
        self,
        host: Host | None = None,
        *,
        make: Callable[[], Host] | None = None,
        prompt: str = PROMPT,
        regions: bool = False,
    ) -> None:
        if (host is None) == (make is None):
            raise TypeError("StartingReader takes a host or a function that makes one")
        self.made = host
        self._make = make
        self.name = host.name if host is not None else ""
        self.prompt = prompt
        self._started = False
        self._lock = asyncio.Lock()
        self._start_for_regions = regions

    async def regions(self, image: Any) -> PageAnswer:
        if not self._started:
            if not self._start_for_regions:
                return PageAnswer("", "stop")
            try:
                await self._ready()
            except Exception as exc:  # any failure to start: the page keeps its own tables
                self._start_for_regions = False
                if self._make is not None:
                    self.made = None  # a pixel page makes the host again and meets the same error as before
                return PageAnswer("", "error", f"the model did not start for the page's regions: {exc}")
        return await super().regions(image)

    async def _ready(self) -> None:
        async with self._lock:
            if not self._started:
                if self.made is None:
                    assert self._make is not None
                    self.made = self._make()
                    self.name = self.made.name
                self.host = self.made
                await self.made.start()
                self._started = True

    async def _ask(self, image: Any, prompt: str, max_tokens: int) -> PageAnswer:
        await self._ready()
        return await super()._ask(image, prompt, max_tokens)


class WireReader:
    """Pages over the inferd socket to a running `modelhost serve` (or any inferd-wire host), one connection."""

    def __init__(self, path: str, *, prompt: str = PROMPT) -> None:
        from modelhost.wire.client import Client

        self.name = f"unix:{path}"
        self.prompt = prompt
        self._client = Client(path)

    async def read(self, image: Any, *, max_tokens: int = DEFAULT_PAGE_TOKENS) -> PageAnswer:
        from modelhost.wire.errors import TruncatedError

        # The client is blocking: it runs on a worker thread. A cancelled task leaves that thread to finish its page;
        # closing the reader then hangs up, which is how the wire cancels (there is no cancel frame).
        text, error = await asyncio.to_thread(self._client.recognize, image, self.prompt, max_tokens)
        if error is None:
            done = self._client.last_done  # its `warning`: a page in a script the host's model cannot read
            return PageAnswer(text, "stop", warning=done.warning if done is not None else "")
        if isinstance(error, TruncatedError):
            return PageAnswer(text, "length", str(error))
        code = error.code if isinstance(error, ModelHostError) else "error"
        # A RemoteError's text already opens with its code, a ConnectError's with "modelhost:": said once each.
        said = str(error).removeprefix("modelhost: ")
        return PageAnswer(text, "error", said if said.startswith(code) else f"{code}: {said}")

    def check(self) -> None:
        """Before any page renders: ConnectError when no host answers on the socket (after the wire's connect
        retries), UnsupportedAttachmentError when its model reads no images (a chat model: every page would fail)."""
        if not self._client.reads_images():
            raise UnsupportedAttachmentError(
                f"{self.name} serves a model that reads no images: serve a page model there, e.g. `--socket-model ocr`"
            )

    def close(self) -> None:
        self._client.close()
