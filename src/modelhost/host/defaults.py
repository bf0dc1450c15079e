"""A served model's request defaults: the SYSTEM prompt, PARAMETERs and TEMPLATE an Ollama Modelfile gave a created
model, applied to every request for it, whichever door it came through (Ollama, OpenAI, the inferd socket, jobs).

The model set applies them (`ServedModel.precheck` and `submit`), so no door repeats them. A request's own choices
win: its options over the defaults', its own system message over SYSTEM. A TEMPLATE renders a chat's turns into the
raw prompt the model completes (as Ollama runs it), in place of the checkpoint's own chat template; a chat with images
or tools keeps the checkpoint's template, which knows where those go. Applying is idempotent (a request already
prepared is left as it is), so the model set may apply it at both of its doors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from modelhost.host import gotemplate
from modelhost.host.events import GenerationRequest
from modelhost.inference.types import Message

#: Where the last turn's answer would go in an older template (one turn from .System, .Prompt and .Response): the
#: rendering is cut there, so the prompt ends where the model's answer begins, as Ollama cuts it.
_ANSWER = "\x00modelhost-answer\x00"


@dataclass(frozen=True, slots=True)
class RequestDefaults:
    """What a created model adds to each request: `options` (the contract's names), a `system` prompt, a `template`
    (Ollama's Go template text, checked by `gotemplate.parse` when the defaults are made)."""

    options: Mapping[str, Any] = field(default_factory=dict)
    system: str | None = None
    template: str | None = None

    def __post_init__(self) -> None:
        if self.template is not None:
            gotemplate.parse(self.template)  # a template this host cannot run is refused at create, not per request

    def renders(self, request: GenerationRequest) -> bool:
        """Whether `apply` renders `request` through the TEMPLATE (a chat of text turns, no tools): the costly part,
        which the model set runs on a worker thread, never on the event loop."""
        plain = not request.options.get("tools") and not any(m.images or m.tool_calls for m in request.messages)
        return self.template is not None and bool(request.messages) and plain

    def apply(self, request: GenerationRequest) -> GenerationRequest:
        """`request` with these defaults where it says nothing (see the module doc)."""
        options = {**self.options, **request.options} if self.options else request.options
        messages = list(request.messages)
        if messages and self.system is not None and not any(m.role == "system" for m in messages):
            messages.insert(0, Message("system", self.system))
        if self.template is not None and self.renders(request):
            prompt = render(gotemplate.parse(self.template), messages)
            return dataclasses.replace(request, messages=(), prompt=prompt, options=options)
        if options is request.options and len(messages) == len(request.messages):
            return request
        return dataclasses.replace(request, messages=tuple(messages), options=options)


def render(template: gotemplate.Template, messages: list[Message]) -> str:
    """A chat's turns through an Ollama TEMPLATE: once over `.Messages` for a template that walks them, else one
    rendering per user turn (with its answer as `.Response`, the system prompt on the first), the last one cut where
    its answer would begin."""
    system = "\n".join(m.content for m in messages if m.role == "system")
    turns = [m for m in messages if m.role != "system"]
    if template.uses_messages:
        listed = [{"Role": m.role, "Content": m.content} for m in messages]
        last_user = next((m.content for m in reversed(turns) if m.role == "user"), "")
        return template.render({"System": system, "Messages": listed, "Prompt": last_user, "Response": ""})
    out: list[str] = []
    written = 0

    def turn(prompt: str, response: str) -> str:
        nonlocal written
        text = template.render({"System": "" if out else system, "Prompt": prompt, "Response": response})
        written += len(text)
        if written > gotemplate.MAX_RENDER_CHARS:  # each turn is bounded alone; the chat is, too
            raise gotemplate.too_long()
        return text

    pending: str | None = None
    for message in turns:
        if message.role == "user":
            if pending is not None:
                out.append(turn(pending, ""))
            pending = message.content
        elif pending is not None:  # the answer to the pending turn
            out.append(turn(pending, message.content))
            pending = None
    out.append(turn(pending or "", _ANSWER).split(_ANSWER, 1)[0])
    return "".join(out)
