"""The page for people at `/` of the HTTP door: Chat, Documents and the host's live State, as static files shipped
in this package (`static/`: plain HTML, CSS and JavaScript modules, no build step, nothing fetched from elsewhere).

    ui = WebUi(models, docling=door)      # build_app makes one unless `ui=False` (serve --no-ui)
    routes = ui.route_list()              # / and /ui/static/* open; /ui/api/* behind the door's API key
    await ui.start(); ...; await ui.aclose()

The page talks to the same routes every client uses: chat is the OpenAI door's streamed /v1/chat/completions (the
page's Stop aborts the fetch, which cancels the request on the server like any client that hangs up), documents are
the docling door's /v1/convert/file/async tasks. What only the page needs is under /ui/api/: the host's state as
JSON and as server-sent events (`state`), a task's pages with their layout regions and images (`documents`), job
cancels. The page itself and its static files carry no secret and need no key; every /ui/api/ route does, as a
Bearer token, which the page asks for once and keeps in sessionStorage.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from modelhost.host.models import Models
from modelhost.http.ui.state import LiveState

if TYPE_CHECKING:  # the docling door and the job worker cost half a second to import: only a server with them pays
    from modelhost.http.docling import DoclingDoor
    from modelhost.http.ui.documents import DocumentPages
    from modelhost.jobs.board import JobBoard
    from modelhost.jobs.schema import ApiError

#: The folder of the page's files, inside the package (package data in pyproject.toml: a wheel carries it).
STATIC: Final = Path(__file__).parent / "static"
#: The paths of the page's own API: behind the door's API key (app.py's protected prefixes name it).
API_PREFIX: Final = "/ui/api/"
#: How often the event stream pushes the state: the page's bars and counts move at this pace, and a snapshot is a
#: few KB built in microseconds, so one a second per open page costs nothing the host would notice.
PUSH_SECONDS: Final = 1.0
#: Page numbers the routes take: a document's pages are numbered from 1, and the engine bounds a document's pages
#: far below this; a bigger number is a 404 before anything is read.
MAX_PAGE_NUMBER: Final = 1_000_000
#: Files of the page: no cache between versions of modelhost, which is all a local page needs (they are small).
_NO_CACHE: Final = {"cache-control": "no-cache"}


class WebUi:
    """The page and its API over a model set, and the docling door's tasks when it has one."""

    def __init__(self, models: Models, *, docling: DoclingDoor | None = None) -> None:
        self.state = LiveState(models)
        self.pages: DocumentPages | None = None
        if docling is not None:
            from modelhost.http.ui.documents import DocumentPages

            self.pages = DocumentPages(docling.tasks)
            self.state.add_jobs("docling", docling.tasks.board)
        self._closed = asyncio.Event()

    def add_jobs(self, source: str, board: JobBoard) -> None:
        """Show a job board's jobs too (serve's --worker): listed in the State view, cancellable from it."""
        self.state.add_jobs(source, board)

    async def start(self) -> None:
        """Start sampling throughput for the chart."""
        await self.state.start()

    async def aclose(self) -> None:
        """End the open event streams (so a stopping server does not wait on them) and stop sampling."""
        self._closed.set()
        await self.state.aclose()

    def route_list(self) -> list[BaseRoute]:
        """The Starlette routes: the page, its files, and its API."""
        api = API_PREFIX.rstrip("/")
        return [
            Route("/", self.index, methods=["GET"]),
            Mount("/ui/static", app=StaticFiles(directory=STATIC), name="ui-static"),
            Route(f"{api}/state", self.get_state, methods=["GET"]),
            Route(f"{api}/events", self.events, methods=["GET"]),
            Route(f"{api}/jobs/{{source}}/{{job_id}}", self.cancel_job, methods=["DELETE"]),
            Route(f"{api}/documents/{{task_id}}", self.document, methods=["GET"]),
            Route(f"{api}/documents/{{task_id}}/pages/{{number:int}}", self.page, methods=["GET"]),
            Route(f"{api}/documents/{{task_id}}/pages/{{number:int}}/image", self.image, methods=["GET"]),
            Route(f"{api}/documents/{{task_id}}/download/{{fmt}}", self.download, methods=["GET"]),
        ]

    # -- the page -------------------------------------------------------------------------------------------------
    async def index(self, request: Request) -> Response:
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8", headers=_NO_CACHE)

    # -- state ----------------------------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """The State view's data, and which views this server can fill."""
        return {**self.state.snapshot(), "documents": self.pages is not None}

    async def get_state(self, request: Request) -> Response:
        return JSONResponse(self.snapshot(), headers=_NO_CACHE)

    async def events(self, request: Request) -> Response:
        """Server-sent events: a `state` event at once and every PUSH_SECONDS, until the client goes or the server
        stops. (The page reads them with fetch, which can send the API key; EventSource cannot.)"""

        async def stream() -> AsyncIterator[bytes]:
            while True:
                yield b"event: state\ndata: " + json.dumps(self.snapshot()).encode() + b"\n\n"
                try:
                    await asyncio.wait_for(self._closed.wait(), PUSH_SECONDS)
                except TimeoutError:
                    continue
                return

        headers = {**_NO_CACHE, "x-accel-buffering": "no"}  # a proxy must pass each event on as it comes
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    async def cancel_job(self, request: Request) -> Response:
        async def work() -> Response:
            return JSONResponse(await self.state.cancel(request.path_params["source"], request.path_params["job_id"]))

        return await _answered(work)

    # -- documents ------------------------------------------------------------------------------------------------
    def _pages(self) -> DocumentPages:
        if self.pages is None:
            raise _not_found("documents need the docling door: serve with --http --docling")
        return self.pages

    async def document(self, request: Request) -> Response:
        async def work() -> Response:
            return JSONResponse(self._pages().status(request.path_params["task_id"]), headers=_NO_CACHE)

        return await _answered(work)

    async def page(self, request: Request) -> Response:
        task_id, number = request.path_params["task_id"], _page_number(request)

        async def work() -> Response:
            return JSONResponse(await asyncio.to_thread(self._pages().page, task_id, number))

        return await _answered(work)

    async def image(self, request: Request) -> Response:
        task_id, number = request.path_params["task_id"], _page_number(request)

        async def work() -> Response:
            png = await asyncio.to_thread(self._pages().image, task_id, number)
            # A finished task's pages never change: the browser may keep them for the task's life (a day).
            return Response(png, media_type="image/png", headers={"cache-control": "private, max-age=86400"})

        return await _answered(work)

    async def download(self, request: Request) -> Response:
        task_id, fmt = request.path_params["task_id"], request.path_params["fmt"]

        async def work() -> Response:
            content, media, name = await asyncio.to_thread(self._pages().download, task_id, fmt)
            safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in name)
            disposition = f'attachment; filename="{safe}"'
            return Response(content, media_type=media, headers={"content-disposition": disposition})

        return await _answered(work)


def _page_number(request: Request) -> int:
    """The route's page number; 0 (answered 404 by the page's lookup) outside 1..MAX_PAGE_NUMBER."""
    number: int = request.path_params["number"]
    return number if 1 <= number <= MAX_PAGE_NUMBER else 0


def _not_found(message: str) -> ApiError:
    from modelhost.jobs import schema

    return schema.ApiError(404, schema.WORKER_NOT_FOUND, message)


async def _answered(work: Callable[[], Awaitable[Response]]) -> Response:
    """`work`'s response, or the job store's refusal (404 for an unknown task, 409 for one not finished) as
    `{"error": {"message", "code"}}` with its status."""
    from modelhost.jobs.schema import ApiError

    try:
        return await work()
    except ApiError as exc:
        return JSONResponse({"error": {"message": exc.message, "code": exc.code}}, status_code=exc.status)


__all__ = ["API_PREFIX", "PUSH_SECONDS", "STATIC", "WebUi"]
