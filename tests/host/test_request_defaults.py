"""A created model's request defaults (host/defaults.py) and the Go template subset its TEMPLATE runs in
(host/gotemplate.py): Ollama's two template shapes rendered as Ollama renders them, a request's own choices winning,
and what the subset does not run refused when the template is read."""

from __future__ import annotations

import asyncio
import threading
from typing import ClassVar

import pytest

from modelhost.errors import InvalidInputError
from modelhost.host import gotemplate
from modelhost.host.defaults import RequestDefaults, render
from modelhost.host.events import GenerationRequest
from modelhost.host.models import Models
from modelhost.host.spec import ModelSpec
from modelhost.inference.types import Message
from modelhost.testing.waiting import STATE_WAIT_SECONDS

CHAT = [Message("system", "Be brief."), Message("user", "Hi"), Message("assistant", "Hello"), Message("user", "Bye")]

#: The shape of Ollama's newer library templates: a range over .Messages, trim markers, eq on .Role, $.System.
MESSAGES_TEMPLATE = """{{- if $.System }}<|system|>{{ $.System }}<|end|>
{{ end }}{{- range $i, $m := .Messages }}{{ if eq $m.Role "user" }}<|user|>{{ .Content }}<|end|>
{{ else if eq .Role "assistant" }}<|assistant|>{{ .Content }}<|end|>
{{ end }}{{ end }}<|assistant|>"""


def test_a_template_over_messages_renders_the_whole_chat_once() -> None:
    assert render(gotemplate.parse(MESSAGES_TEMPLATE), CHAT) == (
        "<|system|>Be brief.<|end|>\n<|user|>Hi<|end|>\n<|assistant|>Hello<|end|>\n<|user|>Bye<|end|>\n<|assistant|>"
    )


def test_an_older_template_renders_each_turn_and_stops_where_the_answer_begins() -> None:
    older = gotemplate.parse(
        "{{ if .System }}SYS {{ .System }}\n{{ end }}USER {{ .Prompt }}\nBOT {{ .Response }}</s>\n"
    )
    # The system prompt on the first turn only; the last turn cut before its answer (and its </s>).
    assert render(older, CHAT) == "SYS Be brief.\nUSER Hi\nBOT Hello</s>\nUSER Bye\nBOT "


def test_defaults_fill_only_what_a_request_leaves_out_and_apply_once() -> None:
    defaults = RequestDefaults(options={"temperature": 0.0, "max_tokens": 8}, system="Be brief.")
    plain = defaults.apply(GenerationRequest(messages=[Message("user", "Hi")], options={"max_tokens": 2}))
    assert plain.messages[0] == Message("system", "Be brief.") and plain.options == {
        "temperature": 0.0,
        "max_tokens": 2,
    }
    assert defaults.apply(plain) == plain, "a prepared request is left as it is (the set applies at two doors)"
    own = defaults.apply(GenerationRequest(messages=[Message("system", "Mine."), Message("user", "Hi")]))
    assert [m.content for m in own.messages] == ["Mine.", "Hi"]
    raw = defaults.apply(GenerationRequest(prompt="as is"))
    assert raw.prompt == "as is" and raw.options["max_tokens"] == 8, "a raw prompt: options only, no system"

    templated = RequestDefaults(system="Be brief.", template="{{ .System }}|{{ .Prompt }}|")
    prompt = templated.apply(GenerationRequest(messages=[Message("user", "Hi")]))
    assert prompt.prompt == "Be brief.|Hi|" and not prompt.messages
    assert templated.apply(prompt) == prompt
    pictured = GenerationRequest(messages=[Message("user", "What is this?", images=(b"\x89PNG",))])
    assert templated.apply(pictured).messages, "a chat with an image keeps the checkpoint's template"


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("{{ .Prompt | upper }}", "pipes"),
        ("{{ printf .Prompt }}", "not a function"),
        ("{{ $x := .Prompt }}", "variables"),
        ("{{ if .System }}open", "never closed"),
        ("{{ end }}", "without the if or range"),
        ("{{ .Prompt", "never closed by }}"),
        ("{{ range .Messages }}" * 40, "nested more than"),
        ("{{ .Prompt }}." * 600, "more than 1024 text runs"),
    ],
)
def test_what_the_subset_does_not_run_is_refused_when_read(template: str, why: str) -> None:
    with pytest.raises(InvalidInputError, match=why):
        RequestDefaults(template=template)


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("{{ if ne .Role }}x{{ end }}", "takes 2"),
        ("{{ not }}", "cannot read"),
        ("{{ len .A .B }}", "takes 1"),
        ('{{ if eq .Role "\\x" }}x{{ end }}', "cannot read"),
    ],
)
def test_a_function_called_wrongly_is_refused_when_read_not_at_each_request(template: str, why: str) -> None:
    with pytest.raises(InvalidInputError, match=why):
        RequestDefaults(template=template)


def test_a_string_literal_reads_as_go_reads_it() -> None:
    template = gotemplate.parse('{{ if eq .Prompt "é" }}accent{{ else }}plain{{ end }} {{ "tab\\there" }}')
    assert template.render({"Prompt": "é"}) == "accent tab\there"


def test_a_hostile_template_is_stopped_not_run_for_ever() -> None:
    # 20 ranges over the whole chat, one inside the other: 4**20 passes (a trillion) if run. It stops at once with
    # a refusal of the request (400), not by holding the event loop that renders it.
    nested = RequestDefaults(template="{{ range $.Messages }}" * 20 + "x" + "{{ end }}" * 20)
    with pytest.raises(InvalidInputError, match="more than"):
        nested.apply(GenerationRequest(messages=CHAT))
    # One range, but each pass copies the whole system prompt: the prompt it builds is bounded too.
    copies = RequestDefaults(template="{{ range .Messages }}{{ $.System }}{{ end }}")
    long_chat = [Message("system", "s" * 1_000_000)] + [Message("user", "u")] * 100
    with pytest.raises(InvalidInputError, match="more than"):
        copies.apply(GenerationRequest(messages=long_chat))
    # An older template renders each turn alone: the whole chat's prompt is bounded, not only each turn's.
    echoes = RequestDefaults(template="{{ .Prompt }}" * 1000)
    turns = [Message("user" if i % 2 == 0 else "assistant", "t" * 1000) for i in range(200)]
    with pytest.raises(InvalidInputError, match="more than"):
        echoes.apply(GenerationRequest(messages=turns))
    # What a template over messages runs once each stays well inside both bounds.
    assert RequestDefaults(template=MESSAGES_TEMPLATE).apply(GenerationRequest(messages=CHAT * 1000)).prompt


@pytest.mark.parametrize("template", ["{{ range $i, $m := .Messages }}{{ range $i }}{{ end }}{{ end }}",
                                      "{{ range $i, $m := .Messages }}{{ len $i }}{{ end }}"])  # fmt: skip
def test_a_template_that_goes_wrong_on_a_chat_refuses_it_as_bad_input(template: str) -> None:
    with pytest.raises(InvalidInputError, match="template"):
        RequestDefaults(template=template).apply(GenerationRequest(messages=CHAT))


class _NotingDefaults(RequestDefaults):
    """The real defaults, noting the thread each request is rendered on."""

    rendered_on: ClassVar[list[int]] = []  # a class's list: the frozen dataclass takes no field of a subclass

    def apply(self, request: GenerationRequest) -> GenerationRequest:
        self.rendered_on.append(threading.get_ident())
        return super().apply(request)


def test_a_created_models_template_renders_on_a_worker_thread_not_the_event_loop() -> None:
    defaults = _NotingDefaults(template=MESSAGES_TEMPLATE)

    def never_loaded() -> None:
        raise AssertionError("precheck of an unloaded model loads nothing")

    models = Models([ModelSpec("made", never_loaded, defaults=defaults)])  # type: ignore[arg-type]

    async def precheck() -> tuple[str | None, int]:
        admitted = await models.get("made").precheck(GenerationRequest(messages=CHAT))
        return admitted.request.prompt, threading.get_ident()

    prompt, loop_thread = asyncio.run(precheck())
    assert prompt is not None and prompt.endswith("<|user|>Bye<|end|>\n<|assistant|>"), "the TEMPLATE rendered it"
    assert defaults.rendered_on and loop_thread not in defaults.rendered_on, "a chat's render never blocks the loop"


def test_a_plain_request_submitted_to_a_created_model_renders_off_the_loop_and_runs() -> None:
    """ServedModel.submit given a GenerationRequest (the Python API, not a door's Admission) rendered the TEMPLATE
    on the event loop; it renders (and is checked) on a worker thread as precheck does, and runs as before."""
    from modelhost.host import Done, Failed
    from modelhost.testing.standins import ScriptedModel

    defaults = _NotingDefaults(template=MESSAGES_TEMPLATE)
    _NotingDefaults.rendered_on.clear()
    model = ScriptedModel(pieces=["o", "k"])
    models = Models([ModelSpec("made", lambda: model, defaults=defaults)])  # type: ignore[arg-type]

    async def main() -> tuple[list[object], list[object], int, int]:
        await models.start()
        try:
            served = models.get("made")
            async with served.submit(GenerationRequest(messages=CHAT)) as stream:
                events = [event async for event in stream]
            # What only the rendered request shows is refused by the stream, as an engine's refusal is.
            async with served.submit(GenerationRequest(messages=CHAT, options={"max_tokens": -1})) as stream:
                refused = [event async for event in stream]
            return events, refused, threading.get_ident(), served.host.waiting if served.host else -1
        finally:
            await models.aclose()

    events, refused, loop_thread, waiting = asyncio.run(main())
    assert isinstance(events[-1], Done) and events[-1].completion_tokens == 2, events
    assert model.prompts and model.prompts[0].endswith("<|user|>Bye<|end|>\n<|assistant|>"), "rendered, then run"
    assert len(defaults.rendered_on) == 2 and loop_thread not in defaults.rendered_on, "never on the event loop"
    assert isinstance(refused[-1], Failed) and refused[-1].option == "max_tokens", refused
    assert waiting == 0


class _FaultyDefaults(RequestDefaults):
    """Defaults whose rendering fails with an error that is no ModelHostError (a fault, not a refusal)."""

    def apply(self, request: GenerationRequest) -> GenerationRequest:
        raise RuntimeError("the template broke")


def test_a_plain_request_whose_render_faults_ends_its_stream_failed_not_hanging() -> None:
    """A fault while a plain request is rendered off the loop (ServedModel.submit's deferred path) ends the stream
    with Failed "internal", as the model thread's admission does; the caller's stream hung for ever before."""
    from modelhost.host import Failed
    from modelhost.testing.standins import ScriptedModel

    model = ScriptedModel(pieces=["o", "k"])
    defaults = _FaultyDefaults(template=MESSAGES_TEMPLATE)
    models = Models([ModelSpec("made", lambda: model, defaults=defaults)])  # type: ignore[arg-type]

    async def main() -> list[object]:
        await models.start()
        try:
            async with models.get("made").submit(GenerationRequest(messages=CHAT)) as stream:
                return [event async for event in stream]
        finally:
            await models.aclose()

    async def bounded() -> list[object]:
        return await asyncio.wait_for(main(), STATE_WAIT_SECONDS)

    events = asyncio.run(bounded())
    assert isinstance(events[-1], Failed) and events[-1].code == "internal", events
    assert "the template broke" in events[-1].message and not model.prompts
