"""vLLM's runtime LoRA routes: `POST /v1/load_lora_adapter` {"lora_name", "lora_path"} and
`POST /v1/unload_lora_adapter` {"lora_name"}, with vLLM's answers: 200 and a plain-text "Success: ..." line; 400
for a missing field, a name already served, files that are not an adapter, or too many adapters; 404 for unloading
a name not served.

Off unless the operator allows it (`serve --allow-adapter-loading`, as vLLM asks for
VLLM_ALLOW_RUNTIME_LORA_UPDATING): a client that may load adapters makes the server read any path it names, so it
is the operator's call; refused with 403 naming the switch while off. The adapter's files are checked on a worker
thread and it is loaded on its model's own thread between two steps (host/adapters.py), so the event loop never
waits on the disk or on peft.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from modelhost.errors import InvalidOptionError, ModelNotFoundError
from modelhost.host import adapters
from modelhost.host.models import Models
from modelhost.http.errors import ApiError
from modelhost.http.parsing import read_json

#: The most bytes of an adapter name or path: a name is an id clients send in `model`, a path a local file; both
#: are short, and a megabyte of either is a client error, not a name.
MAX_FIELD_CHARS = 4096


def _field(body: Any, name: str) -> str:
    value = body.get(name) if isinstance(body, dict) else None
    if not isinstance(value, str) or not value.strip():
        return ""
    if len(value) > MAX_FIELD_CHARS:
        raise ApiError(400, f"{name} is longer than {MAX_FIELD_CHARS} characters", param=name, code="invalid_value")
    return value


def _allowed(models: Models) -> None:
    if not models.adapter_loading:
        raise ApiError(
            403,
            "loading adapters at runtime is off on this server; start `modelhost serve` with --allow-adapter-loading",
            code="adapter_loading_disabled",
        )


async def load(request: Request, models: Models) -> Response:
    """POST /v1/load_lora_adapter."""
    _allowed(models)
    body = await read_json(request)
    name, path = _field(body, "lora_name"), _field(body, "lora_path")
    if not name or not path:
        missing = "lora_name" if not name else "lora_path"
        raise ApiError(400, "Both 'lora_name' and 'lora_path' must be provided.", param=missing, code="invalid_value")
    if name in models.adapters:
        raise ApiError(400, f"The lora adapter '{name}' has already been loaded.", param="lora_name",
                       code="invalid_value")  # fmt: skip
    base = _field(body, "base_model_name") or None
    try:
        await adapters.add_adapter(models, name, path, base, name_field="lora_name", path_field="lora_path")
    except InvalidOptionError as exc:
        raise ApiError(400, exc.detail, param=exc.option, code="invalid_value") from None
    return PlainTextResponse(f"Success: LoRA adapter '{name}' added successfully.")


async def unload(request: Request, models: Models) -> Response:
    """POST /v1/unload_lora_adapter: answered once the adapter's requests in flight have ended (host/adapters.py)."""
    _allowed(models)
    body = await read_json(request)
    name = _field(body, "lora_name")
    if not name:
        raise ApiError(400, "'lora_name' must be provided.", param="lora_name", code="invalid_value")
    try:
        await adapters.remove_adapter(models, name)
    except ModelNotFoundError:
        raise ApiError(404, f"The lora adapter '{name}' cannot be found.", type="not_found_error", param="lora_name",
                       code="model_not_found") from None  # fmt: skip
    return PlainTextResponse(f"Success: LoRA adapter '{name}' removed successfully.")
