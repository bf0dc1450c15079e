"""Render a conversation with the GGUF's own `tokenizer.chat_template`, the way transformers renders it.

A GGUF carries the Jinja template its authors wrote for transformers, so we render it with the same environment
(sandboxed, trim_blocks/lstrip_blocks, loop controls, `raise_exception`, `strftime_now`, a `tojson` that keeps
non-ASCII text) and the same variables (`messages`, `bos_token`, `eos_token`, `add_generation_prompt`). A template
that fails to render is the request's fault far more often than the model's (a role the template forbids, a
system turn in the wrong place), so it surfaces as InvalidInputError naming the template's own complaint.

Tools (the `tools` option) and earlier calls reach the template as transformers passes them (`tools`, and
`tool_calls` / `tool_call_id` / `name` on the turns); a template that does not render them (found by a probe, once
per template) gets the generic tools turn instead. See `modelhost.inference.chat_tools`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

from modelhost.errors import InvalidInputError
from modelhost.inference import chat_tools
from modelhost.inference.chat_tools import ToolSupport
from modelhost.inference.types import ROLES, Message

#: Used when a GGUF has no template at all; llama.cpp's own server falls back to ChatML the same way, and ChatML is
#: what most small instruct models were tuned on.
CHATML_FALLBACK = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def _raise_exception(message: str) -> None:
    raise InvalidInputError(f"the model's chat template refused the conversation: {message}")


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, **kwargs: Any) -> str:
    # Jinja's own tojson escapes HTML characters and non-ASCII text; chat templates expect plain JSON.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, **kwargs)


@lru_cache(maxsize=8)
def compile_template(template: str) -> Any:
    # Compiling a template costs milliseconds; a model renders the same one for every chat call.
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    try:
        return env.from_string(template)
    except jinja2.TemplateError as exc:
        raise InvalidInputError(f"the model's chat template does not compile: {exc}") from exc


def check_messages(messages: Sequence[Message]) -> None:
    """Refuse an empty conversation or an unknown role before any template or compute runs."""
    if not messages:
        raise InvalidInputError("chat needs at least one message")
    for i, message in enumerate(messages):
        if message.role not in ROLES:
            raise InvalidInputError(f"message {i} has role {message.role!r}; known roles: {', '.join(sorted(ROLES))}")
        if not isinstance(message.content, str):
            raise InvalidInputError(f"message {i} content must be a string, got {type(message.content).__name__}")


@lru_cache(maxsize=8)
def tool_support(template: str | None, bos_token: str, eos_token: str) -> ToolSupport:
    """Whether `template` renders tools and earlier calls (probed once per template: a model renders the same one
    for every call)."""
    compiled = compile_template(template or CHATML_FALLBACK)

    def probe_render(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        variables: dict[str, Any] = {"messages": messages, "bos_token": bos_token, "eos_token": eos_token}
        if tools is not None:
            variables["tools"] = tools
        return str(compiled.render(add_generation_prompt=True, **variables))

    return chat_tools.probe(probe_render)


def render(
    template: str | None,
    messages: Sequence[Message],
    *,
    bos_token: str,
    eos_token: str,
    enable_thinking: bool | None = None,
    add_generation_prompt: bool = True,
    tools: Sequence[dict[str, Any]] = (),
) -> str:
    """The prompt text for `messages` under `template` (ChatML when the model has none).

    `enable_thinking` reaches the template only when set, so a template's own default (`enable_thinking` undefined)
    applies otherwise, as in transformers. `tools` (OpenAI function specs) go into the template's `tools` variable
    when it renders one, else into the generic tools turn.
    """
    check_messages(messages)
    import jinja2

    inputs = chat_tools.template_inputs(messages, tools, lambda: tool_support(template, bos_token, eos_token))
    variables: dict[str, Any] = {
        "messages": inputs.text_turns(),
        "bos_token": bos_token,
        "eos_token": eos_token,
        "add_generation_prompt": add_generation_prompt,
        **inputs.variables(),
    }
    if enable_thinking is not None:
        variables["enable_thinking"] = enable_thinking
    try:
        return str(compile_template(template or CHATML_FALLBACK).render(**variables))
    except jinja2.TemplateError as exc:
        raise InvalidInputError(f"the model's chat template failed to render: {exc}") from exc
