"""The executor: runs jobs through a registry of operations (name -> coroutine), as many at once as the model
decodes at once (the host's batch slots), so worker jobs share the batch with each other and with the other doors.

An operation gets a JobContext (the seed's Work, plus `progress` and the host) and returns the names of the
output files it wrote in `ctx.dir`, or raises a protocol.Failure: `invalid(...)` for the job's own input (400),
`failed(code, ...)` for the worker's (500). Anything else it raises is WORKER_FAILED with the message, and the
worker carries on with the next job.

Model work goes through the host's scheduler only (`host.submit`): the worker is one door among several, and the
host is the one place that queues, cancels and measures model work. Closing a request's stream cancels it; that
is how DELETE stops a processing job within one token.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import json
import logging
import shutil
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from modelhost.errors import HostClosedError, InvalidOptionError, ModelLoadingError, QueueFullError
from modelhost.host import Delta, Done, Failed, GenerationRequest, Started
from modelhost.host.models import Servable, ServedModel
from modelhost.inference.capabilities import OptionChecker, as_capability
from modelhost.inference.options import DEFAULT_MAX_TOKENS, GenerateOptions
from modelhost.inference.types import Message
from modelhost.worker import protocol
from modelhost.worker.jobs import InputCheck, JobBoard
from modelhost.worker.pictures import uploaded_images
from modelhost.worker.protocol import Failure, Record, failed, invalid

log = logging.getLogger(__name__)
T = TypeVar("T")

#: While the host's queue is full (other doors share it), a job waits this long before asking again: short enough
#: to take a free slot promptly, long enough not to spin.
HOST_RETRY_SECONDS = 0.05
#: Minimum generated tokens before `remaining` is estimated: the first few inter-token gaps include warm-up and
#: would promise an end far too early or too late.
RATE_MIN_TOKENS = 4

#: Generation options a text job may set in its input, beside `messages` or `prompt`.
TEXT_OPTIONS = frozenset(
    {
        "max_tokens",
        "temperature",
        "top_k",
        "top_p",
        "min_p",
        "seed",
        "stop",
        "min_tokens",
        "repeat_penalty",
        "enable_thinking",
        "thinking_budget",
        # A JSON Schema the answer must match (constrained decoding): a batch of structured-extraction jobs.
        "json_schema",
    }
)

#: Input error codes of the host (modelhost.errors) that are the job's own fault, hence WORKER_INVALID_INPUT (400).
INPUT_CODES = frozenset({"invalid_option", "invalid_input", "attachment_unsupported", "embeddings_unsupported"})
#: Errors of writing an operation's outputs that are the disk's fault, not the job's: the job is run again once the
#: store takes writes, instead of ending failed for a result it did compute.
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS})


#: Operations that hold a heavy resource of their own for their whole run, so at most one of each runs at a time.
#: lora.train trains its own copy of the model with optimiser state (several times the model's memory): two at once
#: could exhaust memory that the host's batch slots do not account for. Other jobs keep starting past a waiting one;
#: it starts, in its queue order, as soon as the running one ends.
EXCLUSIVE_OPERATIONS = frozenset({"lora.train"})


@dataclass(frozen=True, slots=True)
class Work:
    """A job for an operation (the seed's Work): its input (files as `$inputFile`) and the folder for its outputs."""

    id: str
    operation: str
    model: str
    input: Any
    dir: Path


class JobContext:
    """What an operation gets: the work, the host, and progress/cancel plumbing to the board."""

    def __init__(self, board: JobBoard, record: Record, work: Work, host: Servable) -> None:
        self.board = board
        self.record = record
        self.work = work
        self.host = host
        self.cancel_code = ""  # WORKER_CANCELLED or WORKER_INTERRUPTED once cancelled
        self._hooks: list[Callable[[], None]] = []
        board.on_cancel(record.id, self._cancelled)
        if record.cancel:
            self.cancel_code = protocol.WORKER_CANCELLED

    @property
    def dir(self) -> Path:
        """The folder the outputs go into."""
        return self.work.dir

    @property
    def cancelled(self) -> bool:
        """True once the job was cancelled (DELETE) or interrupted (the worker stops)."""
        return bool(self.cancel_code)

    def progress(self, stage: str, step: int = 0, total: int = 0, remaining: float = 0.0) -> bool:
        """Tell giz where the job is; False once it was cancelled (stop, then raise `self.stopped()`)."""
        return self.board.progress(self.record, stage, step, total, remaining) and not self.cancelled

    def on_cancel(self, hook: Callable[[], None]) -> None:
        """Call `hook()` when the job is cancelled (at once if it already was)."""
        if self.cancelled:
            hook()
        else:
            self._hooks.append(hook)

    def stopped(self) -> Failure:
        """The failure a cancelled job ends with."""
        if self.cancel_code == protocol.WORKER_INTERRUPTED:
            return failed(protocol.WORKER_INTERRUPTED, "the worker stopped while this job was processing")
        return failed(protocol.WORKER_CANCELLED, "cancelled while processing")

    def _cancelled(self, code: str) -> None:
        if self.cancel_code:
            return
        self.cancel_code = code
        for hook in self._hooks:
            hook()


Operation = Callable[[JobContext], Awaitable[list[str]]]
"""An executor: runs one job, returns the names of its outputs in `ctx.dir`, or raises a Failure."""


class Runner:
    """Takes jobs from the board in run order and runs each through its operation, up to `concurrency` at once
    (None: the host's batch slots, read each time a job could start, since they are known only once it loaded),
    and at most one at a time of each `exclusive` operation."""

    def __init__(
        self,
        board: JobBoard,
        host: Servable,
        operations: Mapping[str, Operation],
        concurrency: int | None = None,
        exclusive: frozenset[str] = EXCLUSIVE_OPERATIONS,
    ) -> None:
        if concurrency is not None and concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.board = board
        self.host = host
        self.operations = dict(operations)
        self.concurrency = concurrency
        self.exclusive = exclusive
        self._exclusive_running: set[str] = set()

    def _startable(self, record: Record) -> bool:
        return record.operation not in self._exclusive_running

    def _limit(self) -> int:
        return self.concurrency if self.concurrency is not None else max(1, self.host.slots)

    async def run(self) -> None:
        """Run jobs until the board stops; then let the running ones end. Cancelled (the worker stops for good),
        it cancels them, and each ends WORKER_INTERRUPTED."""
        tasks: set[asyncio.Task[None]] = set()
        try:
            while True:
                # A job is taken from the queue only when it can start: one taken early would show processing
                # while it waits, and could not be cancelled as a queued one.
                while len(tasks) >= self._limit():
                    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                record = await self.board.next_job(self._startable)
                if record is None:
                    break
                task = asyncio.create_task(self.run_one(record), name=f"worker-job-{record.id}")
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                if record.operation in self.exclusive:
                    self._exclusive_running.add(record.operation)
                    task.add_done_callback(functools.partial(self._exclusive_done, record.operation))
            if tasks:
                await asyncio.wait(tasks)
        finally:
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks)

    def _exclusive_done(self, operation: str, _task: asyncio.Task[None]) -> None:
        self._exclusive_running.discard(operation)
        self.board.nudge()  # a job of the same operation may be waiting for this one

    async def run_one(self, record: Record) -> None:
        """Run one processing job to its end, whatever happens (the board always learns how it ended).

        A job whose outputs cannot be written for want of disk is not ended by it: its partial outputs are removed,
        and it runs again, still processing, once the store takes writes."""
        out = self.board.store.outputs_dir(record.id)
        try:
            while True:
                try:
                    names, files = await self._attempt(record, out)
                except OSError as exc:
                    if exc.errno not in STORAGE_ERRNOS:
                        raise
                    log.error(
                        "job %s: its outputs could not be written (%s); it runs again when they can", record.id, exc
                    )
                    await asyncio.to_thread(shutil.rmtree, out, True)
                    self.board.storage_failed(exc)
                    await self.board.writable()
                    continue
                break
        except Failure as failure:
            await self.board.finish(record, failure=failure)
        except asyncio.CancelledError:
            # One try only: the worker is stopping, and a job whose end is not written restores as interrupted.
            with contextlib.suppress(OSError):
                await asyncio.shield(
                    self.board.finish(
                        record, failure=failed(protocol.WORKER_INTERRUPTED, "the worker stopped"), retry=False
                    )
                )
            raise
        except Exception as exc:
            log.exception("job %s (%s) failed", record.id, record.operation)
            await self.board.finish(record, failure=failed(protocol.WORKER_FAILED, f"{type(exc).__name__}: {exc}"))
        else:
            await self.board.finish(record, outputs=names, files=files)

    def _host_for(self, record: Record) -> Servable:
        """The model a job names: of the served set (the board admitted only served names), loading it if it is
        unloaded; or the one host."""
        if not isinstance(self.host, ServedModel):
            return self.host
        served = self.host.models.get(record.model)
        served.load()
        return served

    async def _attempt(self, record: Record, out: Path) -> tuple[list[str], list[Path]]:
        try:
            value = json.loads(record.input)
        except ValueError as exc:
            raise invalid(f"the input is not JSON: {exc}") from exc
        ctx = JobContext(
            self.board, record, Work(record.id, record.operation, record.model, value, out), self._host_for(record)
        )
        if ctx.cancelled:
            raise ctx.stopped()
        operation = self.operations.get(record.operation)
        if operation is None:
            raise invalid(f"no operation {record.operation!r}; known: {', '.join(sorted(self.operations))}")
        await asyncio.to_thread(out.mkdir, exist_ok=True)
        names = await operation(ctx)
        return names, _check_outputs(out, names)


def _check_outputs(out: Path, names: list[str]) -> list[Path]:
    files = []
    for name in names:
        if not protocol.safe_file_name(name) or not (out / name).is_file():
            raise failed(protocol.WORKER_FAILED, f"the operation reported an output {name!r} it did not write")
        files.append(out / name)
    return files


# -- text operations --------------------------------------------------------------------------------------------


def _options(value: dict[str, Any], host: Servable | None = None) -> dict[str, Any]:
    """The generation options of a text job's input, checked (a value out of range is the job's fault: 400), and,
    when `host`'s model is loaded, checked by the model too (a JSON Schema its grammar engine cannot enforce)."""
    options = {k: v for k, v in value.items() if k in TEXT_OPTIONS}
    seed = options.get("seed")
    # The seed's `seed()`: a negative seed means "any": the engine then draws one.
    if isinstance(seed, int) and not isinstance(seed, bool) and seed < 0:
        del options["seed"]
    # The worker always pins max_tokens so `total` in the progress is the real bound, not a guess.
    options.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
    try:
        GenerateOptions.parse(options)
        checker = as_capability(getattr(host, "model", None), OptionChecker) if host and host.ready else None
        if checker is not None:
            checker.check_options(**options)
    except InvalidOptionError as exc:
        raise invalid(str(exc)) from exc
    return options


def _chat_items(value: Any) -> list[dict[str, Any]]:
    """The `messages` of a text.chat input, each checked for shape (no picture is read here)."""
    if not isinstance(value, dict):
        raise invalid("text.chat input must be a JSON object")
    raw = value.get("messages")
    if not isinstance(raw, list) or not raw:
        raise invalid("text.chat needs `messages`: a non-empty list of {role, content, images?}")
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("role"), str):
            raise invalid(f"messages[{i}] must be an object with a string `role`")
        if not isinstance(item.get("content", ""), str):
            raise invalid(f"messages[{i}].content must be a string")
    return raw


def _refuse_images(items: list[dict[str, Any]], host: Servable) -> None:
    # Before a byte of any picture is decoded (an 8192x8192 PNG is ~200 MB of RGB): a text-only model refuses it
    # anyway. A host still loading does not know yet; the executor asks again before decoding.
    if host.ready and not host.accepts_images and any(item.get("images") is not None for item in items):
        raise invalid(f"model {host.name!r} does not accept image input")


def _messages(items: list[dict[str, Any]]) -> list[Message]:
    return [
        Message(
            item["role"],
            item.get("content", ""),
            images=tuple(uploaded_images(item, "images")) if item.get("images") is not None else (),
        )
        for item in items
    ]


def check_text_chat(value: Any, host: Servable) -> None:
    """The submission-time check of a text.chat input: its shape, its options, and no picture for a text model."""
    _refuse_images(_chat_items(value), host)
    _options(value, host)


def _prompt(value: Any) -> str:
    if not isinstance(value, dict) or not isinstance(value.get("prompt"), str):
        raise invalid("text.generate needs `prompt`: a string")
    return str(value["prompt"])


def check_text_generate(value: Any, host: Servable) -> None:
    """The submission-time check of a text.generate input: a string prompt and valid options."""
    _prompt(value)
    _options(value, host)


async def text_chat(ctx: JobContext) -> list[str]:
    """`text.chat`: input `{"messages": [{"role", "content", "images"?}], max_tokens?, temperature?, seed?, ...}`;
    `images` is one uploaded picture or a list (decoded at PICTURE_SIDE). Outputs output.txt and result.json."""
    value = ctx.work.input
    items = _chat_items(value)
    options = _options(value)
    ctx.progress(protocol.STAGE_INITIALIZING)
    _refuse_images(items, ctx.host)
    # Decoding pictures is CPU work: off the event loop.
    messages = await asyncio.to_thread(_messages, items)
    return await _generate(ctx, GenerationRequest(messages=messages, options=options, request_id=ctx.work.id))


async def text_generate(ctx: JobContext) -> list[str]:
    """`text.generate`: input `{"prompt": str, max_tokens?, temperature?, seed?, ...}` (no chat template).
    Outputs output.txt and result.json."""
    value = ctx.work.input
    request = GenerationRequest(prompt=_prompt(value), options=_options(value), request_id=ctx.work.id)
    return await _generate(ctx, request)


async def submit_to_host(ctx: JobContext, submit: Callable[[], T]) -> T:
    """`submit()` (a request to the job's host), retried while the model loads or the host's queue is full, with
    the job's stage saying which; the host's refusal of the job's own input is the job's fault (invalid). A model
    of a set counts as in use meanwhile: a keep-alive of 0 unloaded it between its load and the next retry."""
    held = ctx.host.in_use() if isinstance(ctx.host, ServedModel) else contextlib.nullcontext()
    with held:
        return await _submit_retrying(ctx, submit)


async def _submit_retrying(ctx: JobContext, submit: Callable[[], T]) -> T:
    while True:
        if ctx.cancelled:
            raise ctx.stopped()
        state = ctx.host.state
        if state in ("new", "loading"):
            ctx.progress(protocol.STAGE_LOADING_MODEL)
            await asyncio.sleep(HOST_RETRY_SECONDS)
            continue
        try:
            return submit()
        except QueueFullError:
            ctx.progress(protocol.STAGE_INITIALIZING)
            await asyncio.sleep(HOST_RETRY_SECONDS)
        except ModelLoadingError:
            ctx.progress(protocol.STAGE_LOADING_MODEL)
            await asyncio.sleep(HOST_RETRY_SECONDS)
        except HostClosedError as exc:
            raise failed(protocol.WORKER_FAILED, str(exc)) from exc
        except Exception as exc:
            code = getattr(exc, "code", "")
            if code in INPUT_CODES:
                raise invalid(str(exc)) from exc
            raise


async def _generate(ctx: JobContext, request: GenerationRequest) -> list[str]:
    total = int(request.options["max_tokens"])
    ctx.progress(protocol.STAGE_INITIALIZING, 0, total)
    stream = await submit_to_host(ctx, lambda: ctx.host.submit(request))
    ctx.on_cancel(stream.cancel)
    pieces: list[str] = []
    queued = 0.0
    first_at = 0.0
    first_tokens = 0
    done: Done | None = None
    async with stream:
        async for event in stream:
            if isinstance(event, Started):
                queued = event.queued_seconds
                ctx.progress(protocol.STAGE_ENCODING_PROMPT, 0, total)
            elif isinstance(event, Delta):
                pieces.append(event.text)
                now = time.perf_counter()
                if not first_at:
                    first_at, first_tokens = now, event.tokens
                remaining = _remaining(event.tokens - first_tokens, now - first_at, total - event.tokens)
                ctx.progress(protocol.STAGE_GENERATING, event.tokens, total, remaining)
            elif isinstance(event, Done):
                done = event
            elif isinstance(event, Failed):
                if event.code in INPUT_CODES:
                    raise invalid(event.message)
                raise failed(protocol.WORKER_FAILED, f"{event.code}: {event.message}")
    if done is None or done.finish_reason == "cancelled":
        raise ctx.stopped() if ctx.cancelled else failed(protocol.WORKER_INTERRUPTED, "the host stopped the job")
    text = "".join(pieces)
    m = done.metrics
    result = {
        "model": ctx.work.model,
        "operation": ctx.work.operation,
        "finish_reason": done.finish_reason,
        **({"json": _parsed(text)} if "json_schema" in request.options else {}),
        "usage": {
            "prompt_tokens": done.prompt_tokens,
            "completion_tokens": done.completion_tokens,
            "total_tokens": done.prompt_tokens + done.completion_tokens,
        },
        "timings": {
            "queued_seconds": queued,
            "prefill_seconds": m.prefill_seconds,
            "decode_seconds": m.decode_seconds,
            "total_seconds": m.total_seconds,
            "prefill_tokens_per_second": m.prefill_tokens_per_second,
            "decode_tokens_per_second": m.decode_tokens_per_second,
        },
    }
    await asyncio.to_thread(_write_outputs, ctx.dir, text, result)
    return ["output.txt", "result.json"]


def _parsed(text: str) -> Any:
    """The answer of a json_schema job as JSON (None when it was cut by max_tokens before it was complete)."""
    try:
        return json.loads(text)
    except ValueError:
        return None


def _remaining(tokens: int, seconds: float, left: int) -> float:
    # Honest means measured: no estimate until a few tokens give a rate; then the rest at that rate (an upper
    # bound, since the model may stop before max_tokens).
    if tokens < RATE_MIN_TOKENS or seconds <= 0 or left <= 0:
        return 0.0
    return round(left * seconds / tokens, 3)


def _write_outputs(out: Path, text: str, result: dict[str, Any]) -> None:
    (out / "output.txt").write_text(text, encoding="utf-8")
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


def default_operations() -> dict[str, Operation]:
    """The operations every worker serves: text.chat, text.generate, text.embed (modelhost.worker.embeddings),
    lora.train (modelhost.worker.training) and document.convert (modelhost.worker.documents)."""
    from modelhost.worker.documents import document_convert  # these modules import this one
    from modelhost.worker.embeddings import text_embed
    from modelhost.worker.training import lora_train

    return {
        "text.chat": text_chat,
        "text.generate": text_generate,
        "text.embed": text_embed,
        "lora.train": lora_train,
        "document.convert": document_convert,
    }


def default_input_checks(host: Servable) -> dict[str, InputCheck]:
    """The submission-time checks of the default operations' inputs, on `host`'s model."""
    return {
        "text.chat": lambda value: check_text_chat(value, host),
        "text.generate": lambda value: check_text_generate(value, host),
        "text.embed": lambda value: _check_text_embed(value, host),
        "lora.train": _check_lora_train,
        "document.convert": lambda value: _check_document_convert(value, host),
    }


def _check_text_embed(value: Any, host: Servable) -> None:
    from modelhost.worker.embeddings import check_submission

    check_submission(value, host)


def _check_document_convert(value: Any, host: Servable) -> None:
    from modelhost.worker.documents import check_submission

    check_submission(value, host)


def _check_lora_train(value: Any) -> None:
    from modelhost.worker.training import check_lora_train

    check_lora_train(value)
