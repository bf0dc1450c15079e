"""LoRA adapters served by name: each is a served id over a model of the set (its parent), answered by the
parent's one engine with the adapter applied to that request alone.

Why an adapter is not a model of its own: a second copy of the base weights per adapter would cost the base's
memory again, and its requests could not share the base's batch. So an adapter is only a name and its files; the
parent's engine holds the adapter's small weights beside the base's (AdapterEngine, inference/engine.py), every
request names the adapter it wants (GenerationRequest.adapter), and requests of the base and of several adapters
share the parent's slots and steps (how each backend shares a step: docs/adapters.md).

Lifecycle: an adapter is registered with its files checked (inference/lora_files.py) and its parent found; when
the parent is loaded it is loaded into the running engine at once (on the model thread, between two steps), and
whenever the parent loads again (after keep-alive unloaded it) it is loaded with it. Removing an adapter stops new
requests for it at once, lets the ones in flight finish for a grace, cancels what is left, then frees it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from modelhost.errors import EmbeddingUnsupportedError, InvalidOptionError, ModelHostError, ModelNotFoundError
from modelhost.host.events import Admission, GenerationRequest
from modelhost.host.models import Models, ModelSpec, ServedModel
from modelhost.host.scheduler import Host
from modelhost.host.streams import EmbeddingTicket, RequestStream
from modelhost.inference.lora_files import AdapterFiles, inspect_adapter

log = logging.getLogger(__name__)

#: The most adapters one model serves at once. Each costs its own weights in memory (a rank-8 adapter of a 7B model
#: is ~20 MB, of SmolLM2 ~1 MB), and a step costs one more pass over the adapter weights per distinct adapter among
#: its requests (peft's mixed batch; llama.cpp: one more llama_decode per adapter, docs/adapters.md). A client that
#: loads adapters in a loop must meet a bound before the memory does; vLLM's own default `max_cpu_loras` is of
#: this order.
MAX_ADAPTERS_PER_MODEL = 8

#: How long removing an adapter lets its requests in flight finish before cancelling them: a chat answer of a few
#: hundred tokens on a CPU is seconds; a stream meant to run for minutes must not hold an unload for that long.
UNLOAD_GRACE_SECONDS = 10.0

#: How often a removal looks whether the adapter's requests have ended (their count is read under the host's lock).
_DRAIN_POLL_SECONDS = 0.05


class ServedAdapter(ServedModel):
    """An adapter as the doors see it: a served model whose host is its parent's, whose requests carry its name."""

    def __init__(self, name: str, files: AdapterFiles, parent: ServedModel) -> None:
        super().__init__(ModelSpec(name, parent.spec.loader, path=str(files.path)), parent.models)
        self.files = files
        self._parent = parent

    @property
    def parent(self) -> ServedModel:
        return self._parent

    @property
    def host(self) -> Host | None:
        return self._parent.host

    @host.setter
    def host(self, host: Host | None) -> None:
        # ServedModel's own __init__ sets it (to None); an adapter never holds a host of its own.
        if host is not None:
            raise TypeError("an adapter runs on its parent's host")

    @property
    def busy(self) -> bool:
        return self._parent.busy

    def in_use(self) -> Any:
        return self._parent.in_use()

    async def wait_loaded(self) -> None:
        await self._parent.wait_loaded()

    async def precheck(self, request: GenerationRequest, n: int = 1) -> Admission:
        """The parent's precheck of the request with this adapter's name: the Admission carries the name down."""
        return await self._parent.precheck(replace(request, adapter=self.name), n)

    def submit(self, request: GenerationRequest | Admission, choice: int = 0) -> RequestStream:
        """Choice `choice` of the request on the parent's host, with this adapter (an Admission from `precheck`
        carries it already; a plain request is named here)."""
        if isinstance(request, GenerationRequest):
            request = replace(request, adapter=self.name)
        elif request.adapter != self.name:
            raise ValueError(f"an admission for {request.adapter or 'the base model'!r}, not the adapter {self.name!r}")
        return self._parent.submit(request, choice)

    def submit_embedding(self, texts: Any, **opts: Any) -> EmbeddingTicket:
        raise EmbeddingUnsupportedError(
            f"{self.name!r} is a LoRA adapter, served for generation only; embed with its base {self._parent.name!r}"
        )

    def keep_for(self, seconds: float | None) -> None:
        self._parent.keep_for(seconds)

    def load(self) -> None:
        self._parent.load()

    def cancel_all(self) -> None:
        host = self.host
        if host is not None:
            for stream in host.adapter_requests(self.name):
                stream.cancel()


def register_adapter(
    models: Models, name: str, files: AdapterFiles, base: str | None = None, *, name_field: str, path_field: str
) -> ServedAdapter:
    """Serve the adapter `files` (checked by inference.lora_files.inspect_adapter) as `name` over the model `base`
    (None: the model its files name, or the only model served) from now on; loaded with its parent, not into a
    running engine (`add_adapter` does that).

    InvalidOptionError naming `name_field` (a name taken, too many adapters) or `path_field` (no base model to put
    it on)."""
    if not name or not name.strip():
        raise InvalidOptionError(name_field, "an adapter needs a name")
    if name in models.names or name in models.adapters or _is_alias(models, name):
        raise InvalidOptionError(name_field, f"the name {name!r} is already served")
    parent = _parent(models, files, base, path_field)
    if len(parent.adapters) >= MAX_ADAPTERS_PER_MODEL:
        raise InvalidOptionError(
            name_field,
            f"model {parent.name!r} already serves {len(parent.adapters)} adapters, the most one model serves "
            f"({MAX_ADAPTERS_PER_MODEL}); unload one first",
        )
    adapter = ServedAdapter(name, files, parent)
    parent.adapters[name] = adapter
    models.adapters[name] = adapter
    models.by_name_only = True
    return adapter


async def add_adapter(
    models: Models, name: str, path: str, base: str | None = None, *, name_field: str, path_field: str
) -> ServedAdapter:
    """Check the files at `path` (on a worker thread), `register_adapter`, then load it into the parent's running
    engine when the parent is loaded (off the event loop, between two steps). When the engine refuses the files,
    nothing stays registered and the engine's error is raised as InvalidOptionError naming `path_field`."""
    files = await asyncio.to_thread(inspect_adapter, path, field=path_field)
    adapter = register_adapter(models, name, files, base, name_field=name_field, path_field=path_field)
    host = adapter.parent.host
    if host is None or not host.ready:
        return adapter  # loaded with its parent (Host's on_load), whenever that loads
    if not host.serves_adapters:
        _forget(models, adapter)
        raise InvalidOptionError(path_field, f"model {adapter.parent.name!r} cannot serve LoRA adapters by name")
    try:
        await host.load_adapter(name, str(adapter.files.path))
    except BaseException as exc:
        _forget(models, adapter)
        if not isinstance(exc, ModelHostError):
            raise
        # The engine's words, under the caller's field (the engine names its own: "adapter").
        raise InvalidOptionError(path_field, getattr(exc, "detail", str(exc))) from None
    log.info("serving adapter %r over model %r from %s", name, adapter.parent.name, adapter.files.path)
    return adapter


async def remove_adapter(models: Models, name: str, *, grace: float = UNLOAD_GRACE_SECONDS) -> None:
    """Stop serving the adapter `name`: refused to new requests at once, its requests in flight finish within
    `grace` seconds (the rest are cancelled: each ends as "cancelled"), then it is freed from the engine.
    ModelNotFoundError when no adapter has that name."""
    adapter = models.adapters.get(name)
    if not isinstance(adapter, ServedAdapter):
        raise ModelNotFoundError(f"no adapter named {name!r} is served")
    _forget(models, adapter)
    host = adapter.parent.host
    if host is None or name not in host.adapters:
        return
    deadline = time.monotonic() + grace
    while host.adapter_requests(name) and time.monotonic() < deadline:
        await asyncio.sleep(_DRAIN_POLL_SECONDS)
    for stream in host.adapter_requests(name):
        stream.cancel()
    # The cancelled ones leave at the model thread's next turn; the unload runs after that turn (chores run before
    # a step, cancellations are applied right after them), so no request of the adapter is live when it is freed.
    while host.adapter_requests(name) and host.ready:
        await asyncio.sleep(_DRAIN_POLL_SECONDS)
    if host.ready:
        await host.unload_adapter(name)
    log.info("stopped serving adapter %r", name)


def _forget(models: Models, adapter: ServedAdapter) -> None:
    models.adapters.pop(adapter.name, None)
    adapter.parent.adapters.pop(adapter.name, None)


def _is_alias(models: Models, name: str) -> bool:
    try:
        return models.get(name).name != name
    except ModelNotFoundError:
        return False


def _parent(models: Models, files: AdapterFiles, base: str | None, field: str) -> ServedModel:
    """The model the adapter goes on: `base` when given; else the model the adapter's files name; else the only
    model served (an adapter trained on a GGUF's dequantised twin names a cache folder, not the GGUF)."""
    if base is not None:
        try:
            found = models.get(base)
        except ModelNotFoundError:
            raise InvalidOptionError(field, f"no model {base!r} is served to put the adapter on") from None
        if found.parent is not None:
            raise InvalidOptionError(field, f"{base!r} is an adapter itself; name its base model {found.parent.name!r}")
        return found
    if files.base is not None:
        named = _named(models, files.base)
        if named is not None:
            return named
    served = list(models)
    if len(served) == 1:
        return served[0]
    said = f"names {files.base!r}, which is none of them" if files.base else "names no base model"
    raise InvalidOptionError(
        field,
        f"the adapter {said}; say which of the served models ({', '.join(models.names)}) it goes on with "
        "NAME=MODEL:PATH",
    )


def _named(models: Models, base: str) -> ServedModel | None:
    """The served model `base` (an adapter config's base_model_name_or_path) stands for: by name or alias, by the
    path it was loaded from, or by that path's last part (a hub name `org/repo` against a folder named `repo`)."""
    try:
        return models.get(base) if base not in models.adapters else None
    except ModelNotFoundError:
        pass
    wanted = _real(base)
    tail = base.rstrip("/").rsplit("/", 1)[-1]
    for model in models:
        if model.path is not None and _real(model.path) == wanted:
            return model
    for model in models:
        if model.path is not None and Path(model.path).name == tail:
            return model
    return None


def _real(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))
