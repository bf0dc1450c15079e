"""The wire shapes of the HTTP door, against fixed byte vectors and refusal rules (no server, no model)."""

from __future__ import annotations

import base64
import json

import pytest

from modelhost.errors import InvalidOptionError, QueueFullError, UnsupportedAttachmentError
from modelhost.host import Done
from modelhost.http import errors, images, parsing
from modelhost.http.ollama import schema as ollama_schema
from modelhost.http.ollama import streams as ollama_streams
from modelhost.http.openai import schema as openai_schema
from modelhost.http.openai import streams as openai_streams
from modelhost.inference.types import GenerateMetrics

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16
PNG_URI = "data:image/png;base64," + base64.b64encode(PNG).decode()


def done(reason: str = "stop", prompt: int = 5, completion: int = 3) -> Done:
    return Done(reason, prompt, completion, GenerateMetrics(prefill_seconds=0.5, decode_seconds=0.25))  # type: ignore[arg-type]


def test_error_bodies_are_byte_exact() -> None:
    err = errors.ApiError(400, "n: only n=1", param="n", code="unsupported_parameter")
    assert errors.openai_error_body(err) == (
        b'{"error":{"message":"n: only n=1","type":"invalid_request_error","param":"n","code":"unsupported_parameter"}}'
    )
    assert errors.ollama_error_body(err) == b'{"error":"n: only n=1"}'
    sse = openai_streams.sse_error(err)
    assert sse.startswith(b'data: {"error":{') and sse.endswith(b"\n\ndata: [DONE]\n\n")


def test_host_errors_map_to_status_type_and_the_clients_parameter_name() -> None:
    names = {"max_tokens": "max_completion_tokens"}
    err = errors.from_host_exception(InvalidOptionError("max_tokens", "must be >= 0"), names)
    assert (err.status, err.type, err.param, err.code) == (
        400,
        "invalid_request_error",
        "max_completion_tokens",
        "invalid_option",
    )
    img = errors.from_host_exception(UnsupportedAttachmentError("model 'x' does not accept image input"), {})
    assert img.status == 400 and "does not accept image input" in img.message
    assert errors.from_host_exception(QueueFullError("full"), {}).status == 429
    assert errors.from_host_error("generation_failed", "boom").status == 500


def test_chat_maps_options_and_content_parts() -> None:
    parsed = openai_schema.parse_chat_completion(
        {
            "model": "anything",
            "messages": [
                {"role": "developer", "content": "be brief"},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "a"},
                        {"type": "text", "text": "b"},
                        {"type": "image_url", "image_url": {"url": PNG_URI, "detail": "low"}},
                    ],
                },
            ],
            "max_tokens": 9,
            "max_completion_tokens": 7,
            "temperature": 0,
            "top_p": 0.5,
            "seed": 3,
            "stop": ["\n"],
            "n": 1,
            "presence_penalty": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )
    gen = parsed.generation
    assert gen.options == {"max_tokens": 7, "temperature": 0.0, "top_p": 0.5, "seed": 3, "stop": ["\n"]}
    assert parsed.wire_names["max_tokens"] == "max_completion_tokens"
    assert parsed.stream and parsed.include_usage
    assert [m.role for m in gen.messages] == ["system", "user"]
    assert gen.messages[1].content == "a\nb" and gen.messages[1].images == (PNG,)


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"n": 0}, "n"),
        ({"n": 17}, "n"),
        ({"functions": [{"name": "f"}]}, "functions"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"frequency_penalty": 0.5}, "frequency_penalty"),
        ({"response_format": {"type": "xml"}}, "response_format.type"),
        ({"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}}, "response_format.json_schema"),
        ({"best_of_luck": 1}, "best_of_luck"),
        ({"temperature": "hot"}, "temperature"),
    ],
)
def test_unsupported_or_unknown_parameters_are_refused_by_name(extra: dict[str, object], param: str) -> None:
    with pytest.raises(errors.ApiError) as info:
        openai_schema.parse_chat_completion({"messages": [{"role": "user", "content": "hi"}], **extra})
    assert info.value.status == 400 and info.value.param == param


def test_images_must_be_bounded_png_or_jpeg_data_uris() -> None:
    def chat_with(url: str) -> None:
        part = {"type": "image_url", "image_url": {"url": url}}
        openai_schema.parse_chat_completion({"messages": [{"role": "user", "content": [part]}]})

    with pytest.raises(errors.ApiError, match="fetches nothing"):
        chat_with("https://example.com/cat.png")
    with pytest.raises(errors.ApiError, match="PNG or JPEG"):
        chat_with("data:image/png;base64," + base64.b64encode(b"GIF89a....").decode())
    with pytest.raises(errors.ApiError, match="not valid base64"):
        chat_with("data:image/png;base64,@@@@")
    with pytest.raises(errors.ApiError) as info:
        chat_with("data:image/png;base64," + "A" * (images.MAX_IMAGE_BASE64_CHARS + 4))
    assert info.value.code == "image_too_large"


def test_completions_take_prompts_and_openais_default_length() -> None:
    parsed = openai_schema.parse_completion({"prompt": ["Once"]})
    assert parsed.generation.prompt == "Once" and parsed.prompts == ()
    assert parsed.generation.options["max_tokens"] == openai_schema.COMPLETIONS_DEFAULT_MAX_TOKENS
    several = openai_schema.parse_completion({"prompt": ["a", "b"], "n": 2, "seed": 7})
    # One generation per prompt, each checked once and submitted n times (the host's Admission seeds the choices).
    assert [(g.prompt, g.options["seed"]) for g in several.generations()] == [("a", 7), ("b", 7)]
    assert several.n == 2
    with pytest.raises(errors.ApiError) as info:
        openai_schema.parse_completion({"prompt": []})
    assert info.value.param == "prompt"
    with pytest.raises(errors.ApiError):
        openai_schema.parse_completion({"prompt": "a", "echo": True})


def test_ollama_options_map_ignore_load_settings_and_refuse_the_rest() -> None:
    parsed = ollama_schema.parse_ollama_chat(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "hi", "images": [base64.b64encode(PNG).decode()]}],
            "options": {"num_predict": 5, "temperature": 0, "num_ctx": 4096, "mirostat": 0, "stop": ["x"]},
            "keep_alive": "5m",
        }
    )
    assert parsed.stream  # Ollama streams unless told not to
    assert parsed.generation.options == {"max_tokens": 5, "temperature": 0, "stop": ["x"]}
    assert parsed.generation.messages[0].images == (PNG,)
    assert parsed.wire_names["max_tokens"] == "options.num_predict"
    with pytest.raises(errors.ApiError) as info:
        ollama_schema.parse_ollama_chat({"messages": [{"role": "user", "content": "hi"}], "options": {"mirostat": 2}})
    assert info.value.param == "options.mirostat"
    gen = ollama_schema.parse_ollama_generate({"prompt": "hi", "system": "sys", "stream": False})
    assert gen is not None and [m.role for m in gen.generation.messages] == ["system", "user"] and not gen.stream
    raw = ollama_schema.parse_ollama_generate({"prompt": "hi", "raw": True})
    assert raw is not None and raw.generation.prompt == "hi"
    assert ollama_schema.parse_ollama_generate({"model": "m"}) is None  # Ollama's "load the model" call


def test_stream_serialisers() -> None:
    chat = openai_streams.OpenAIChatStream("m", include_usage=True)
    first = json.loads(chat.started().removeprefix(b"data: "))
    assert first["object"] == "chat.completion.chunk" and first["choices"][0]["delta"] == {
        "role": "assistant",
        "content": "",
    }
    assert json.loads(chat.delta("hi").removeprefix(b"data: "))["choices"][0]["delta"] == {"content": "hi"}
    events = chat.done(done("length"), 1.0).split(b"\n\n")
    finish, usage = json.loads(events[0][6:]), json.loads(events[1][6:])
    assert finish["choices"][0]["finish_reason"] == "length"
    assert usage["choices"] == [] and usage["usage"] == {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
    assert events[2] == b"data: [DONE]"

    line = json.loads(ollama_streams.OllamaStream("m", "chat").done(done(), 2.0, "all"))
    assert line["done"] and line["message"] == {"role": "assistant", "content": "all"}
    assert (line["prompt_eval_count"], line["eval_count"], line["done_reason"]) == (5, 3, "stop")
    assert line["total_duration"] == 2_000_000_000 and line["prompt_eval_duration"] == 500_000_000
    gen = json.loads(ollama_streams.OllamaStream("m", "generate").delta("x"))
    assert gen["response"] == "x" and gen["done"] is False and gen["created_at"].endswith("Z")


def test_json_nested_past_the_recursion_limit_is_a_400() -> None:
    with pytest.raises(errors.ApiError) as info:
        parsing.decode_json(b"[" * 100_000 + b"]" * 100_000)
    assert info.value.status == 400 and info.value.code == "invalid_json"


def test_ollama_images_are_bounded_per_request_not_per_message() -> None:
    image = base64.b64encode(PNG).decode()
    messages = [{"role": "user", "content": "hi", "images": [image] * 4} for _ in range(images.MAX_IMAGES // 4 + 1)]
    with pytest.raises(errors.ApiError) as info:
        ollama_schema.parse_ollama_chat({"messages": messages})
    assert info.value.status == 400 and info.value.code == "too_many_images"
    # At the limit, spread over several messages: accepted.
    parsed = ollama_schema.parse_ollama_chat({"messages": messages[:-1]})
    assert sum(len(m.images) for m in parsed.generation.messages) == images.MAX_IMAGES
