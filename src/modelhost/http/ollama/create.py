"""Ollama's POST /api/create and POST /api/copy: a new model name over one this host can load, kept across restarts
(modelhost.hub.created), served from then on (loaded at its first request), listed by /api/tags, removed by
DELETE /api/delete.

A create takes Ollama's JSON fields (`from`, `adapters`, `system`, `template`, `parameters`, what the `ollama`
client sends) or a Modelfile's text (`modelfile`, what older clients and curl send). `from` is a served or pulled
model's name, a catalogue name, or a local GGUF file or model folder; `adapters` maps a name to a LoRA adapter's
local path (Ollama's clients send blob digests of uploaded files; this host has no blob store, so a path on this
machine is what it takes). SYSTEM and PARAMETER become the defaults of the created model's requests on this door
(a request's own system message and options win); TEMPLATE is kept and shown but not run (it is Go's template
language: the model's own chat template renders its prompts). A copy is a create of the same model under a new
name, with whatever the source was created with.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from modelhost.errors import ModelHostError, ModelNotFoundError
from modelhost.host.models import Models
from modelhost.http.errors import ApiError
from modelhost.http.parsing import read_json
from modelhost.hub import created as store
from modelhost.inference.lora_files import inspect_adapter

log = logging.getLogger(__name__)


def _line(obj: dict[str, Any]) -> bytes:
    return msgspec.json.encode(obj) + b"\n"


class CreatedRoutes:
    """The created models of one model set: serving them, the two routes that make them, and their defaults."""

    def __init__(self, model_set: Models) -> None:
        self.model_set = model_set
        #: What each created model served here was made with, by name (its requests' defaults).
        self.made: dict[str, store.CreatedModel] = {}

    def restore(self) -> None:
        """Serve every kept created model (at start): one that no longer loads (its source gone) is skipped with a
        warning, so one stale file never stops a host."""
        for model in store.load_all():
            try:
                self._serve(model)
            except (ApiError, ModelHostError, ValueError) as exc:
                log.warning("created model %s is not served: %s", model.name, exc)

    def _serve(self, model: store.CreatedModel) -> None:
        """Add `model` to the model set (unloaded until a request needs it)."""
        factory = self.model_set.spec_for
        if factory is None:
            raise ApiError(501, "this host cannot serve new models", code="not_supported")
        try:
            path = self.model_set.get(model.source).spec.path or model.source
        except ModelNotFoundError:
            path = model.source  # a catalogue name, a pulled one or a local path: the spec resolves it
        if model.adapter is not None:
            inspect_adapter(model.adapter, field="adapter")  # a missing or foreign adapter: refused now
        spec = factory(path, adapter=model.adapter)
        self.model_set.add(dataclasses.replace(spec, name=model.name, aliases=(), pinned=False))
        self.made[model.name] = model

    def _made(self, body: Any) -> store.CreatedModel:
        """The CreatedModel a create request asks for; ApiError (400) for what is not one."""
        if not isinstance(body, dict):
            raise ApiError(400, "expected a JSON object", code="invalid_value")
        try:
            name = store.check_name(body.get("model") or body.get("name"))
            modelfile = body.get("modelfile")
            fields: dict[str, Any] = store.parse_modelfile(modelfile) if isinstance(modelfile, str) else {}
            source = body.get("from") or fields.get("from")
            if not isinstance(source, str) or not source:
                raise ApiError(400, "from is required (the model this one is made from)", param="from",
                               code="invalid_value")  # fmt: skip
            adapters = body.get("adapters")
            adapter = fields.get("adapter")
            if adapters is not None:
                if (
                    not isinstance(adapters, dict)
                    or len(adapters) != 1
                    or not all(isinstance(v, str) for v in adapters.values())
                ):
                    raise ApiError(400, "adapters: one {name: local path} (one LoRA adapter a model)",
                                   param="adapters", code="invalid_value")  # fmt: skip
                adapter = next(iter(adapters.values()))
            texts = {key: body.get(key, fields.get(key)) for key in ("system", "template")}
            for key, value in texts.items():
                if value is not None and not isinstance(value, str):
                    raise ApiError(400, f"{key}: expected a string", param=key, code="invalid_value")
            parameters = store.check_parameters(body.get("parameters", fields.get("parameters")))
        except ModelHostError as exc:
            raise ApiError(400, str(exc), code=exc.code) from None
        return store.CreatedModel(name, source, adapter, texts["system"], texts["template"], parameters)

    async def create(self, request: Request) -> Response:
        """POST /api/create: serve and keep a model made from another; `{"status": "success"}` (as NDJSON status
        lines unless `stream` is false)."""
        body = await read_json(request)
        model = self._made(body)
        await self._add(model)
        if isinstance(body, dict) and body.get("stream", True) is False:
            return Response(_line({"status": "success"}), media_type="application/json")
        lines = _line({"status": f"creating {model.name} from {model.source}"}) + _line({"status": "success"})
        return Response(lines, media_type="application/x-ndjson")

    async def copy(self, request: Request) -> Response:
        """POST /api/copy: `destination` serves what `source` serves (and keeps what `source` was created with)."""
        body = await read_json(request)
        if not isinstance(body, dict) or not isinstance(body.get("source"), str):
            raise ApiError(400, "source is required", param="source", code="invalid_value")
        source = body["source"]
        try:
            destination = store.check_name(body.get("destination"), "destination")
            served = self.model_set.get(source)
        except ModelNotFoundError as exc:
            raise ApiError(404, str(exc), code=exc.code) from None
        except ModelHostError as exc:
            raise ApiError(400, str(exc), param="destination", code=exc.code) from None
        made = self.made.get(served.name)
        base = (
            dataclasses.replace(made, name=destination) if made is not None else store.CreatedModel(destination, source)
        )
        await self._add(base)
        return Response(status_code=200)

    async def _add(self, model: store.CreatedModel) -> None:
        if model.name in self.model_set.names or model.name in self.model_set.adapters:
            if model.name not in self.made:
                raise ApiError(400, f"model {model.name!r} is already served and was not created here",
                               param="model", code="model_exists")  # fmt: skip
            self._forget(model.name)  # created again: the new one replaces it, as Ollama's create does
        try:
            await asyncio.to_thread(self._serve, model)  # resolving and estimating a model reads its files
            await asyncio.to_thread(store.save, model)
        except ModelNotFoundError as exc:
            raise ApiError(404, str(exc), param="from", code=exc.code) from None
        except ModelHostError as exc:
            raise ApiError(400, str(exc), code=exc.code) from None
        except ValueError as exc:
            raise ApiError(400, str(exc), code="invalid_value") from None

    def _forget(self, name: str) -> None:
        try:
            self.model_set.remove(name)
        except ValueError as exc:
            raise ApiError(400, f"model {name!r}: {exc}", param="model", code="model_in_use") from None
        self.made.pop(name, None)

    async def delete(self, name: str) -> bool:
        """DELETE /api/delete of a created model: stop serving it and forget it; False when `name` is not one."""
        if name not in self.made:
            return False
        self._forget(name)
        await asyncio.to_thread(store.remove, name)
        return True

    def with_defaults(self, body: Any, *, chat: bool) -> Any:
        """A chat or generate body with its created model's SYSTEM and PARAMETERs filled in where it says nothing."""
        if not isinstance(body, dict):
            return body
        name = body.get("model") or body.get("name")
        if not isinstance(name, str):
            return body  # not a name (a list, an object): the request's own validation answers it with a 400
        made = self.made.get(name)
        if made is None:
            return body
        out = dict(body)
        if made.parameters:
            given = body.get("options")
            out["options"] = {**made.parameters, **given} if isinstance(given, dict) else dict(made.parameters)
        if made.system is not None:
            messages = body.get("messages")
            if chat and isinstance(messages, list):
                if not any(isinstance(m, dict) and m.get("role") == "system" for m in messages):
                    out["messages"] = [{"role": "system", "content": made.system}, *messages]
            elif not chat and "system" not in body:
                out["system"] = made.system
        return out
