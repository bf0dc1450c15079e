"""`document.convert`: a PDF or image uploaded as a `$file`, converted page by page through the host's model.

Input: `{"document": {"$file": field}, "dpi"?: int, "pages"?: "1-3,5", "max_tokens"?: int, "text_layer"?: bool,
"pixels"?: bool, "pictures"?: bool}`: tokens per page; `text_layer: false` reads every page from its pixels
(`convert --no-text-layer`), `pixels: false` reads only the pages with a usable text layer and names the others
unread (docling's `do_ocr`), `pictures: true` also reads the text a text-layer page holds only in its pictures
(`convert --pictures`; off by default, engine.PICTURES says why).
Outputs: `document.md`, `document.json` (a DoclingDocument) and `page-N.doctags` for each page converted; and
`unread-pages.txt` when some pages could not be read (each named with why); a document none of whose pages can be
read fails the job, its message naming the upload by the name it was uploaded under; and `page-warnings.txt` when
some pages were read with a warning (a page in a script the model cannot read), in the same lines.
Progress: stage `generating`, step = pages done of `total` pages, `remaining` from the pages' own pace.
Cancel stops between pages and within one: the page's host request is closed, which stops the model.
A page that hits its token bound or fails keeps what was generated; `document.json` still loads.
`"ray": true` (a worker started with `--ray ADDRESS`: jobs.cluster) reads the pages on that Ray cluster's actors
instead, each loading the job's model once, with the same outputs and progress; a cancel stops the cluster's work.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from modelhost.docengine.sandbox import page_ranges
from modelhost.docengine.source import check_dpi, check_pages
from modelhost.documents import Conversion, ConvertSettings, HostReader, PageResult, convert
from modelhost.documents.settings import DEFAULT_DPI, DEFAULT_PAGE_TOKENS, PICTURES
from modelhost.errors import InvalidInputError, ModelHostError
from modelhost.host.models import ModelSpec, Servable, ServedModel
from modelhost.jobs import schema
from modelhost.jobs.cluster import served_spec, wants_cluster
from modelhost.jobs.operation import HOST_RETRY_SECONDS, JobContext, Operation, failure_of
from modelhost.jobs.schema import input_path, invalid

OPERATION = "document.convert"


def _int(value: dict[str, Any], key: str, default: int) -> int:
    got = value.get(key, default)
    if isinstance(got, bool) or not isinstance(got, int) or got < 1:
        raise invalid(f"{OPERATION}: `{key}` must be a positive integer, got {got!r}")
    return got


def check_document_convert(value: Any) -> tuple[Path, str, ConvertSettings]:
    """The job's input checked: (document path, its upload's name, its settings); the seed's invalid-input Failure
    else."""
    if not isinstance(value, dict):
        raise invalid(f"{OPERATION} input must be a JSON object")
    path = input_path(value.get("document"))
    if path is None:
        raise invalid(f"{OPERATION} needs `document`: an uploaded PDF or image ({{'$file': field}})")
    return Path(path), upload_name(value["document"], Path(path)), _settings(value)


#: Longest upload name shown in messages: a name is the client's own text, and a megabyte of it in every message
#: helps no one.
MAX_NAME_CHARS = 120


def upload_name(document: dict[str, Any], path: Path) -> str:
    """How messages name the document: the name it was uploaded under (its last path part, control characters
    dropped, bounded), never the stored `1.pdf` nor the state folder's absolute path."""
    given = document[schema.INPUT_FILE].get("name")
    text = given if isinstance(given, str) else ""
    text = "".join(ch for ch in text.replace("\\", "/").rsplit("/", 1)[-1] if ch.isprintable()).strip()
    if len(text) > MAX_NAME_CHARS:
        text = text[: MAX_NAME_CHARS - 1] + "…"
    return text or f"the uploaded document{path.suffix}"


def _bool(value: dict[str, Any], key: str, default: bool = True) -> bool:
    got = value.get(key, default)
    if not isinstance(got, bool):
        raise invalid(f"{OPERATION}: `{key}` must be true or false, got {got!r}")
    return got


def _settings(value: dict[str, Any]) -> ConvertSettings:
    """The job's input translated into the pipeline's settings, each field checked here (the module doc says what
    each means)."""
    pages = value.get("pages")
    if pages is not None:
        if not isinstance(pages, str):
            raise invalid(f"{OPERATION}: `pages` must be a string such as '1-3,5'")
        try:
            check_pages(pages)
        except InvalidInputError as exc:
            raise invalid(f"{OPERATION}: {exc}") from exc
    dpi = _int(value, "dpi", DEFAULT_DPI)
    try:
        check_dpi(dpi)
    except InvalidInputError as exc:
        raise invalid(f"{OPERATION}: {exc}") from exc
    max_tokens = _int(value, "max_tokens", DEFAULT_PAGE_TOKENS)
    text_layer, pixels, pictures = (
        _bool(value, "text_layer"),
        _bool(value, "pixels"),
        _bool(value, "pictures", PICTURES),
    )
    return ConvertSettings(dpi, pages, max_tokens, text_layer, pixels, pictures)


def job_input(settings: ConvertSettings) -> dict[str, Any]:
    """The fields of a job's input that `_settings` reads back as `settings` (a door that submits document.convert
    jobs of its own, the docling door, writes its settings so): how pages are read, and which, when not every one.
    DPI and tokens per page are left at their defaults, which a door that takes no such option never changes."""
    job: dict[str, Any] = {"text_layer": settings.text_layer, "pixels": settings.pixels, "pictures": settings.pictures}
    if settings.pages is not None:
        job["pages"] = settings.pages
    return job


class ClusterDocuments(Protocol):
    """What a `"ray": true` document job needs of a cluster (jobs.cluster): the document converted as `convert`
    converts it, its pages read by the cluster's actors, each loading `spec`'s model once; `on_start(total)` and
    `on_page(done, total, result)` as `convert` calls them. A cancelled call (asyncio) stops the cluster's work and
    frees its actors before it ends."""

    async def convert_document(
        self, path: Path, spec: ModelSpec, name: str, settings: ConvertSettings, on_start: Started, on_page: PageDone
    ) -> Conversion: ...


Started = Callable[[int], None]
PageDone = Callable[[int, int, PageResult], None]


def check_submission(value: Any, host: Servable, cluster: ClusterDocuments | None = None) -> None:
    """The submission-time check (the upload is still `{"$file": field}`): settings in range, `ray` only on a worker
    with a cluster, and a model that reads page images, so a bad job is a 400 before its document is even stored."""
    if not isinstance(value, dict):
        raise invalid(f"{OPERATION} input must be a JSON object")
    document = value.get("document")
    if not (isinstance(document, dict) and isinstance(document.get(schema.FILE_REF), str)):
        raise invalid(f"{OPERATION} needs `document`: an uploaded PDF or image ({{'$file': field}})")
    _settings(value)
    wants_cluster(OPERATION, value, cluster)
    if host.ready and not host.accepts_images:
        raise invalid(f"model {host.name!r} does not read page images; serve `--model ocr` or a DocTags VLM")


async def document_convert(ctx: JobContext, cluster: ClusterDocuments | None = None) -> list[str]:
    """Run the documents pipeline on the uploaded file through the host (or the cluster); write the outputs."""
    path, name, settings = check_document_convert(ctx.work.input)
    on_cluster = wants_cluster(OPERATION, ctx.work.input, cluster)
    ctx.progress(schema.STAGE_INITIALIZING)
    # A cluster job's actors load the model themselves: this worker's copy is neither loaded nor waited for.
    while not on_cluster and ctx.host.state in ("new", "loading", "unloaded"):
        if isinstance(ctx.host, ServedModel):
            ctx.host.load()  # unloaded meanwhile (to make room): load again, or wait for room
        if ctx.cancelled:
            raise ctx.stopped()
        ctx.progress(schema.STAGE_LOADING_MODEL)
        await asyncio.sleep(HOST_RETRY_SECONDS)
    if ctx.host.ready and not ctx.host.accepts_images:
        raise invalid(f"model {ctx.host.name!r} does not read page images; serve `--model ocr` or a DocTags VLM")
    pace: list[float] = []

    def on_start(total: int) -> None:
        ctx.progress(schema.STAGE_GENERATING, 0, total)

    def on_page(done: int, total: int, result: PageResult) -> None:
        pace.append(result.seconds)
        remaining = round(sum(pace) / len(pace) * (total - done), 3)
        ctx.progress(schema.STAGE_GENERATING, done, total, remaining)

    if cluster is not None and on_cluster:
        work = cluster.convert_document(path, served_spec(ctx.host, OPERATION), name, settings, on_start, on_page)
    else:
        reader = HostReader(ctx.host) if settings.pixels else None
        work = convert(path, reader, settings, on_start=on_start, on_page=on_page, name=name)
    task = asyncio.ensure_future(work)

    def stop() -> None:
        task.cancel()

    ctx.on_cancel(stop)
    try:
        conversion = await task
    except asyncio.CancelledError:
        if ctx.cancelled:
            raise ctx.stopped() from None
        raise
    except ModelHostError as exc:
        raise failure_of(exc) from exc  # the worker class its kind declares (modelhost.errors)
    # The document is named after the upload, as `modelhost convert` names it after its file (the stored `1.pdf`
    # would name every document "1").
    conversion.document.name = Path(name).stem or conversion.document.name
    return await asyncio.to_thread(_write, ctx.dir, conversion)


def _write(out: Path, conversion: Conversion) -> list[str]:
    names = ["document.md", "document.json"]
    (out / "document.md").write_text(conversion.render("md"), encoding="utf-8")
    (out / "document.json").write_text(conversion.render("json"), encoding="utf-8")
    for page in conversion.pages:
        name = f"page-{page.number}.doctags"
        (out / name).write_text(page.doctags, encoding="utf-8")
        names.append(name)
    if conversion.unread:
        # The job completed with what could be read; which pages could not, and why, is an output of its own (the
        # protocol has no warnings field), one line per reason with its pages as ranges (10,000 unread pages are
        # a few lines, not 10,000).
        (out / UNREAD).write_text(unread_lines(conversion.unread), encoding="utf-8")
        names.append(UNREAD)
    if conversion.warnings:
        # Pages that were read but whose text is doubtful (the `ocr` model: a script its recogniser cannot read),
        # in the same lines: the job completed, and this says which of its pages not to trust (issue 34 item 5).
        (out / WARNINGS).write_text(unread_lines(conversion.warnings), encoding="utf-8")
        names.append(WARNINGS)
    return names


def unread_lines(unread: dict[int, str]) -> str:
    """`pages 2-51: why` lines, one per reason, in page order (for the unread pages, and the warned ones)."""
    by_reason: dict[str, list[int]] = {}
    for number in sorted(unread):
        by_reason.setdefault(unread[number], []).append(number)
    return "".join(f"pages {page_ranges(numbers)}: {why}\n" for why, numbers in by_reason.items())


#: The output that lists the pages a completed job could not read (a page that does not load, or that exhausted
#: its sandbox), present only when there are some.
UNREAD = "unread-pages.txt"
#: The output that lists the pages a completed job read with a warning (Conversion.warnings), present only when
#: there are some.
WARNINGS = "page-warnings.txt"


CONVERT = Operation(OPERATION, document_convert, check_submission)
