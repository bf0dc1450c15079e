"""docling-serve's v1 document API on the HTTP door (`serve --http --docling`), for docling's own client
(`docling.service_client.DoclingServiceClient`, PyPI `docling-client`) and everything else that speaks it.

    door = DoclingDoor(models, model="ocr", state_dir=Path("state/docling"), capacity=8)
    server = HttpServer(models, docling=door)   # the routes join the OpenAI and Ollama ones
    await server.start()                        # restores the door's tasks, then serves

Modules: `schemas` (docling-serve's JSON shapes), `options` (what its options mean here), `upload` (bounded
request bodies), `fetch` (URL sources, off unless allowed), `tasks` (the durable tasks: giz `document.convert`
jobs underneath), `results` (a task as docling reports it), `routes` (the routes).
"""

from __future__ import annotations

from pathlib import Path

from starlette.routing import Route, WebSocketRoute

from modelhost.host.models import Models
from modelhost.http.docling.fetch import Policy
from modelhost.http.docling.routes import PREFIXES, DoclingRoutes
from modelhost.http.docling.tasks import DocumentTasks
from modelhost.http.docling.upload import DEFAULT_MAX_UPLOAD_BYTES
from modelhost.jobs.board import Journal


class DoclingDoor:
    """The docling routes and their task store over one served model (the one that reads page pixels)."""

    #: The paths it answers, whose key it checks itself (docling's X-Api-Key rather than a Bearer token).
    prefixes = PREFIXES

    def __init__(
        self,
        models: Models,
        *,
        model: str,
        state_dir: Path,
        capacity: int = 8,
        api_key: str | None = None,
        policy: Policy | None = None,
        max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES,
        journal: Journal | None = None,
    ) -> None:
        """`model` must be served by `models` (KeyError else); `policy` says which URL sources are fetched (none
        by default); `api_key` guards the routes (X-Api-Key, as docling-serve)."""
        self.tasks = DocumentTasks(models, model=model, state_dir=state_dir, capacity=capacity, journal=journal)
        self.routes = DoclingRoutes(
            self.tasks,
            api_key=api_key,
            policy=policy or Policy(max_bytes=max_upload_bytes),
            max_upload_bytes=max_upload_bytes,
        )

    def route_list(self) -> list[Route | WebSocketRoute]:
        """The Starlette routes."""
        return self.routes.routes()

    async def start(self) -> None:
        """Restore the tasks and start running them."""
        await self.tasks.start()

    async def aclose(self, grace: float | None = None) -> None:
        """Stop: running conversions get `grace` seconds, queued tasks stay for the next start. Idempotent."""
        await self.tasks.aclose(grace)


__all__ = ["PREFIXES", "DoclingDoor", "Policy"]
