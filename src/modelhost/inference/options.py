"""Generation and load options: validated once, at the edge, with an error that names the option.

Options arrive as keyword arguments (`model.generate(prompt, max_tokens=32, temperature=0)`); `None` means "not
set", so the checkpoint's own default (its `generation_config.json`) or the engine's fallback applies. Precedence
for sampling is: the request, then the checkpoint, then `FALLBACK`. A backend calls `GenerateOptions.parse(opts)`
once per call and `resolved(checkpoint_defaults)` to get concrete values.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Protocol

from modelhost.errors import InvalidOptionError
from modelhost.inference import openmp
from modelhost.inference.schema_limits import check_schema


class CancelToken(Protocol):
    """Anything with `is_set()`: a threading.Event, or the host's own per-request flag."""

    def is_set(self) -> bool: ...


#: The bound on `max_tokens` when neither the request nor the checkpoint sets one. Generous enough for a page of
#: DocTags, small enough that a forgotten bound cannot run a model for hours.
DEFAULT_MAX_TOKENS = 512

#: Largest `max_tokens` accepted: a wire field is u32, and anything past this is a typo, not a plan.
MAX_TOKENS_LIMIT = 1 << 20

#: Largest `json_schema` accepted, as compact JSON text. Real extraction schemas are a few KB; a schema becomes a
#: grammar whose size (and per-token cost) grows with it, so an unbounded one is a way to stall the model thread.
MAX_JSON_SCHEMA_CHARS = 64 * 1024

#: Most tools one request may offer (OpenAI's own bound). Each is written into the prompt, and into the grammar when
#: a call is required, so an unbounded list would fill the context and stall the grammar's compilation.
MAX_TOOLS = 128

#: Largest `tools` accepted, as compact JSON text: the same bound as a schema, since the tools' parameters become one
#: (and their text is rendered into every prompt of the conversation).
MAX_TOOLS_CHARS = MAX_JSON_SCHEMA_CHARS

#: Most alternatives `logprobs` may ask for per token (OpenAI's own bound on top_logprobs).
MAX_LOGPROBS = 20

#: The schema of JSON mode (OpenAI's `json_object`, Ollama's `format: "json"`): any JSON object.
ANY_JSON_OBJECT: dict[str, Any] = {"type": "object"}


@dataclass(frozen=True, slots=True)
class GenerateOptions:
    """Validated per-call options. Every field is optional; see the module docstring for precedence."""

    max_tokens: int | None = None
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    stop_tokens: tuple[int, ...] = ()
    suppress_tokens: tuple[int, ...] = ()
    min_tokens: int = 0
    repeat_penalty: float | None = None
    logits: bool = False
    enable_thinking: bool | None = None
    thinking_budget: int = 0
    #: A JSON Schema the output must match, enforced by constrained decoding (never by hoping); held as compact
    #: JSON text so it is hashable and a backend can cache what it compiles from it. `ANY_JSON_OBJECT` is JSON mode.
    json_schema: str | None = None
    #: Attach each generated token's log-probability (Token.logprob) and this many top alternatives (0: none).
    logprobs: int | None = None
    #: The functions the model may call, in OpenAI's shape (`{"type": "function", "function": {"name", "description",
    #: "parameters"}}`), held as compact JSON text of the list (hashable, like `json_schema`); a chat template that
    #: knows tools renders them in its own format (see `tool_specs`).
    tools: str | None = None
    cancel: CancelToken | None = None

    @classmethod
    def parse(cls, opts: Mapping[str, Any] | None = None, /, **kwargs: Any) -> GenerateOptions:
        """Validate keyword options; an unknown name or a bad value raises InvalidOptionError naming it."""
        merged = {**(opts or {}), **kwargs}
        known = {f.name for f in fields(cls)}
        for name in merged:
            if name not in known:
                raise InvalidOptionError(name, f"unknown generation option; known: {', '.join(sorted(known))}")
        values: dict[str, Any] = {}
        for name, value in merged.items():
            if value is None:
                continue
            values[name] = _VALIDATORS[name](name, value)
        return cls(**values)

    @classmethod
    def of(cls, opts: GenerateOptions | Mapping[str, Any]) -> GenerateOptions:
        """`opts` as they are when already parsed (a host hands its engine parsed options: issue 37 item 1), else
        parsed now (a caller's keyword options)."""
        return opts if isinstance(opts, GenerateOptions) else cls.parse(opts)

    def as_kwargs(self) -> dict[str, Any]:
        """The options that are set, as keyword options that `parse` turns back into these same options (for a
        TextModel's `generate(**opts)`, which takes keywords)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != f.default}

    def resolved(self, defaults: Mapping[str, Any] | None = None) -> GenerateOptions:
        """Fill unset sampling fields from the checkpoint's defaults, then from `FALLBACK`."""
        changes: dict[str, Any] = {}
        for name, fallback in FALLBACK.items():
            if getattr(self, name) is None:
                value = (defaults or {}).get(name)
                changes[name] = fallback if value is None else _VALIDATORS[name](name, value)
        return replace(self, **changes) if changes else self

    @property
    def greedy(self) -> bool:
        """True when sampling reduces to argmax (temperature 0 or top_k 1)."""
        return self.temperature == 0 or self.top_k == 1

    def tool_specs(self) -> list[dict[str, Any]]:
        """The `tools` option as a list of dicts (empty when unset): what a chat template's `tools` variable takes."""
        return list(json.loads(self.tools)) if self.tools else []

    def cancelled(self) -> bool:
        """True once the caller's cancel token is set."""
        return self.cancel is not None and self.cancel.is_set()

    def refuse(self, backend: str, names: Iterable[str], why: str = "") -> None:
        """Raise InvalidOptionError for the first of `names` that is set: a backend that cannot honour an option
        says so rather than ignoring it (a JSON schema ignored would hand the caller text that does not parse)."""
        defaults = {f.name: f.default for f in fields(self)}
        for name in names:
            if getattr(self, name) != defaults[name]:
                raise InvalidOptionError(name, f"the {backend} backend does not support it{why and ': ' + why}")


#: Engine fallbacks, used when neither the request nor the checkpoint says. 0/1.0 values disable a sampler step.
FALLBACK: dict[str, Any] = {
    "max_tokens": DEFAULT_MAX_TOKENS,
    "temperature": 0.7,
    "top_k": 0,
    "top_p": 1.0,
    "min_p": 0.0,
    "repeat_penalty": 1.0,
}


def _int(name: str, value: Any, lo: int, hi: int) -> int:
    # bool is an int in Python; `max_tokens=True` is a bug in the caller, not a request for one token.
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOptionError(name, f"must be an integer, got {type(value).__name__} {value!r}")
    if not lo <= value <= hi:
        raise InvalidOptionError(name, f"must be between {lo} and {hi}, got {value}")
    return value


def _float(name: str, value: Any, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidOptionError(name, f"must be a number, got {type(value).__name__} {value!r}")
    number = float(value)
    if math.isnan(number) or not lo <= number <= hi:
        raise InvalidOptionError(name, f"must be between {lo} and {hi}, got {value}")
    return number


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidOptionError(name, f"must be true or false, got {value!r}")
    return value


def _strings(name: str, value: Any) -> tuple[str, ...]:
    items: Iterable[Any] = (value,) if isinstance(value, str) else value
    try:
        result = tuple(items)
    except TypeError:
        raise InvalidOptionError(name, f"must be a string or a list of strings, got {value!r}") from None
    for item in result:
        if not isinstance(item, str) or not item:
            raise InvalidOptionError(name, f"every stop string must be a non-empty string, got {item!r}")
    return result


def _ids(name: str, value: Any) -> tuple[int, ...]:
    items: Iterable[Any] = (value,) if isinstance(value, int) and not isinstance(value, bool) else value
    try:
        result = tuple(items)
    except TypeError:
        raise InvalidOptionError(name, f"must be a list of token ids, got {value!r}") from None
    for item in result:
        _int(name, item, 0, (1 << 31) - 1)
    return result


def _from_json_text(name: str, value: Any) -> Any:
    """`value` itself, or, when a caller passed it as JSON text, what that text holds."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError as exc:
        raise InvalidOptionError(name, f"is not valid JSON: {exc}") from None


def _json_schema(name: str, value: Any) -> str:
    # A mapping (the usual case) or JSON text; either way held as compact JSON text of an object.
    value = _from_json_text(name, value)
    if not isinstance(value, Mapping):
        raise InvalidOptionError(name, f"must be a JSON Schema object, got {type(value).__name__}")
    try:
        text = json.dumps(value, separators=(",", ":"), allow_nan=False)  # key order kept: it orders the output
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidOptionError(name, f"is not JSON-serialisable: {exc}") from None
    if len(text) > MAX_JSON_SCHEMA_CHARS:
        raise InvalidOptionError(name, f"is {len(text)} characters as JSON; the limit is {MAX_JSON_SCHEMA_CHARS}")
    check_schema(value)  # what every grammar engine must be spared (schema_limits.py), before any engine sees it
    return text


def _tools(name: str, value: Any) -> str:
    # A list of OpenAI function specs (or its JSON text); each checked for the fields a chat template reads.
    value = _from_json_text(name, value)
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidOptionError(name, f"must be a list of tools, got {type(value).__name__}")
    specs = list(value)
    if not 1 <= len(specs) <= MAX_TOOLS:
        raise InvalidOptionError(name, f"must list between 1 and {MAX_TOOLS} tools, got {len(specs)}")
    seen: set[str] = set()
    for i, spec in enumerate(specs):
        function = spec.get("function") if isinstance(spec, Mapping) else None
        if not isinstance(spec, Mapping) or spec.get("type") != "function" or not isinstance(function, Mapping):
            raise InvalidOptionError(name, f'tool {i} must be {{"type": "function", "function": {{...}}}}')
        tool_name = function.get("name")
        if not isinstance(tool_name, str) or not tool_name:
            raise InvalidOptionError(name, f"tool {i} needs a function name (a non-empty string)")
        if tool_name in seen:
            raise InvalidOptionError(name, f"tool names must be unique; {tool_name[:100]!r} is repeated")
        seen.add(tool_name)
        if not isinstance(function.get("description", ""), str):
            raise InvalidOptionError(name, f"tool {i}'s description must be a string")
        if not isinstance(function.get("parameters", {}), Mapping):
            raise InvalidOptionError(name, f"tool {i}'s parameters must be a JSON Schema object")
    try:
        text = json.dumps(specs, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidOptionError(name, f"is not JSON-serialisable: {exc}") from None
    if len(text) > MAX_TOOLS_CHARS:
        raise InvalidOptionError(name, f"is {len(text)} characters as JSON; the limit is {MAX_TOOLS_CHARS}")
    return text


def _cancel(name: str, value: Any) -> CancelToken:
    if not callable(getattr(value, "is_set", None)):
        raise InvalidOptionError(name, "must have an is_set() method, such as threading.Event")
    return value  # type: ignore[no-any-return]


_VALIDATORS: dict[str, Any] = {
    "max_tokens": lambda n, v: _int(n, v, 0, MAX_TOKENS_LIMIT),
    "temperature": lambda n, v: _float(n, v, 0.0, 100.0),
    "top_k": lambda n, v: _int(n, v, 0, 1 << 20),
    "top_p": lambda n, v: _float(n, v, 0.0, 1.0),
    "min_p": lambda n, v: _float(n, v, 0.0, 1.0),
    "seed": lambda n, v: _int(n, v, 0, (1 << 64) - 1),
    "stop": _strings,
    "stop_tokens": _ids,
    "suppress_tokens": _ids,
    "min_tokens": lambda n, v: _int(n, v, 0, MAX_TOKENS_LIMIT),
    "repeat_penalty": lambda n, v: _float(n, v, 0.0, 100.0),
    "logits": _bool,
    "enable_thinking": _bool,
    "thinking_budget": lambda n, v: _int(n, v, 0, MAX_TOKENS_LIMIT),
    "json_schema": _json_schema,
    "logprobs": lambda n, v: _int(n, v, 0, MAX_LOGPROBS),
    "tools": _tools,
    "cancel": _cancel,
}


@dataclass(frozen=True, slots=True)
class LoadOptions:
    """Validated load options. `backend` pins one engine; the rest are hints a backend may ignore."""

    backend: str | None = None
    context_length: int | None = None
    gpu_layers: int | None = None
    parallel: int | None = None
    adapter: str | None = None
    threads: int | None = None
    # How compute threads wait for each other (0-100, llama-server's `--poll` scale): llama_cpp and transformers
    # (OpenMP), fixed once per process; see inference/openmp.py.
    poll: int | None = None
    dtype: str | None = None
    mmproj: str | None = None  # llama_cpp: the vision projector GGUF of a vision model (else one found beside it)
    # vllm: devices one model's layers are split across (vLLM's tensor_parallel_size) and pipeline stages
    # (pipeline_parallel_size); how its workers are started ("mp" processes on this machine, "ray" across a cluster).
    tensor_parallel: int | None = None
    pipeline_parallel: int | None = None
    distributed_executor: str | None = None

    @classmethod
    def parse(cls, opts: Mapping[str, Any] | None = None, /, **kwargs: Any) -> LoadOptions:
        """Validate keyword load options; an unknown name or a bad value raises InvalidOptionError naming it."""
        merged = {k: v for k, v in {**(opts or {}), **kwargs}.items() if v is not None}
        known = {f.name for f in fields(cls)}
        for name in merged:
            if name not in known:
                raise InvalidOptionError(name, f"unknown load option; known: {', '.join(sorted(known))}")
        checks: dict[str, Any] = {
            "context_length": lambda n, v: _int(n, v, 1, 1 << 24),
            "gpu_layers": lambda n, v: _int(n, v, -1, 1 << 16),
            "parallel": lambda n, v: _int(n, v, 1, 1024),
            "threads": lambda n, v: _int(n, v, 1, 4096),
            "poll": lambda n, v: _int(n, v, 0, openmp.MAX_POLL),
            # A node has at most a few dozen accelerators; a bigger number is a typo, not a cluster.
            "tensor_parallel": lambda n, v: _int(n, v, 1, 1024),
            "pipeline_parallel": lambda n, v: _int(n, v, 1, 1024),
        }
        for name, value in merged.items():
            if name in checks:
                checks[name](name, value)
            elif not isinstance(value, str) or not value:
                raise InvalidOptionError(name, f"must be a non-empty string, got {value!r}")
        return cls(**merged)
