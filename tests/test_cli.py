"""The `modelhost` command end to end, in a subprocess, on real models."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SUMMARY = re.compile(r"\[(\d+) tokens, [\d.]+ tokens/s, prompt (\d+) tokens.*?, (stop|length)\]")


def modelhost(*args: str, stdin: str | None = None, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "modelhost.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_generate_streams_text_and_prints_a_summary(tiny_llama_gguf: Path) -> None:
    result = modelhost("generate", "The quick brown fox", "--model", str(tiny_llama_gguf), "-n", "7", "-t", "0")
    assert result.returncode == 0, result.stderr
    summary = SUMMARY.search(result.stderr)
    assert summary is not None, result.stderr
    assert int(summary.group(1)) == 7 and summary.group(3) == "length"
    assert result.stdout.strip(), "the generated text goes to stdout"
    again = modelhost("generate", "The quick brown fox", "--model", str(tiny_llama_gguf), "-n", "7", "-t", "0")
    assert again.stdout == result.stdout, "greedy generation must repeat exactly"


def test_interactive_chat_keeps_history(tiny_llama_gguf: Path) -> None:
    result = modelhost("chat", "--model", str(tiny_llama_gguf), "-n", "5", "-t", "0", stdin="hello\nand again\n")
    assert result.returncode == 0, result.stderr
    turns = [(int(m.group(1)), int(m.group(2))) for m in SUMMARY.finditer(result.stderr)]
    assert len(turns) == 2, result.stderr
    (first_out, first_prompt), (_, second_prompt) = turns
    # The second prompt holds the first question, the first answer and the new question.
    assert second_prompt > first_prompt + first_out


def test_one_shot_chat_with_the_embedded_model() -> None:
    result = modelhost("chat", "What is the capital of France? Answer in one word.", "-n", "24", "-t", "0")
    assert result.returncode == 0, result.stderr
    assert "Paris" in result.stdout


def test_info_and_backends(tiny_llama_gguf: Path) -> None:
    info = modelhost("info", str(tiny_llama_gguf))
    assert info.returncode == 0, info.stderr
    fields = dict(line.split(None, 1) for line in info.stdout.splitlines() if line.strip())
    assert fields["model_type"] == "llama" and fields["backend"] == "llama_cpp"
    assert fields["layers"] == "2" and fields["hidden_size"] == "64"
    backends = modelhost("backends")
    assert backends.returncode == 0
    assert re.search(r"^llama_cpp\s+available", backends.stdout, re.M), backends.stdout
    assert re.search(r"^transformers\s+", backends.stdout, re.M), backends.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["generate", "hi", "--model", "no-such-model"], "catalogue name: default"),
        (["generate", "hi", "--max-tokens", "-1"], "max_tokens"),
        (["generate", "hi", "--backend", "nope"], "not registered"),
    ],
)
def test_bad_input_fails_clearly(args: list[str], expected: str) -> None:
    result = modelhost(*args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert expected in result.stderr


def test_chat_with_an_image_on_a_vision_model_and_a_clear_refusal_on_a_text_model(
    tiny_idefics3_dir: Path, tiny_llama_gguf: Path, tmp_path: Path
) -> None:
    from PIL import Image

    picture = tmp_path / "page.png"
    Image.new("RGB", (40, 30), (200, 30, 30)).save(picture)
    args = ["chat", "What is this?", "--model", str(tiny_idefics3_dir), "-n", "3", "-t", "0"]
    with_image = modelhost(*args, "--image", str(picture))
    without = modelhost(*args)
    assert with_image.returncode == 0 and without.returncode == 0, (with_image.stderr, without.stderr)
    prompt_with = int(SUMMARY.search(with_image.stderr).group(2))  # type: ignore[union-attr]
    prompt_without = int(SUMMARY.search(without.stderr).group(2))  # type: ignore[union-attr]
    assert prompt_with > prompt_without, "the image's tokens are part of the prompt"

    refused = modelhost("chat", "What is this?", "--model", str(tiny_llama_gguf), "--image", str(picture))
    assert refused.returncode == 2 and "attachment_unsupported" in refused.stderr, refused.stderr


def test_embed_prints_one_json_line_per_text_from_arguments_or_a_file(tiny_llama_gguf: Path, tmp_path: Path) -> None:
    import json

    import numpy as np

    args = ["embed", "--model", str(tiny_llama_gguf)]
    result = modelhost(*args, "a cat sat", "a cat sat", "stock prices fell")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["index"] for r in rows] == [0, 1, 2]
    vectors = np.array([r["embedding"] for r in rows])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert float(vectors[0] @ vectors[1]) > 0.999 and float(vectors[0] @ vectors[2]) < 0.9999
    assert "3 texts" in result.stderr

    # A file longer than one model call: every non-empty line, in order, numbered across the calls.
    lines = [f"line number {i}" for i in range(70)]
    listing = tmp_path / "texts.txt"
    listing.write_text("\n".join(lines[:40]) + "\n\n" + "\n".join(lines[40:]) + "\n")
    from_file = modelhost(*args, "--file", str(listing))
    assert from_file.returncode == 0, from_file.stderr
    rows = [json.loads(line) for line in from_file.stdout.splitlines()]
    assert [r["index"] for r in rows] == list(range(70))
    alone = json.loads(modelhost(*args, lines[65]).stdout)
    assert np.allclose(rows[65]["embedding"], alone["embedding"], atol=1e-4)

    # A text too long for the context is named by its place in the whole file, not in its call.
    listing.write_text("\n".join([*lines[:65], "word " * 5000, *lines[65:]]) + "\n")
    too_long = modelhost(*args, "--file", str(listing))
    assert too_long.returncode == 2 and "input[65]" in too_long.stderr, too_long.stderr
    neither = modelhost(*args)
    assert neither.returncode == 2 and "--file" in neither.stderr


def test_json_schema_makes_the_answer_json_of_that_schema(tiny_llama_gguf: Path, tmp_path: Path) -> None:
    import json

    jsonschema = pytest.importorskip("jsonschema")
    schema = {
        "type": "object",
        "properties": {"city": {"enum": ["Paris", "Oslo"]}, "days": {"type": "integer", "minimum": 1, "maximum": 9}},
        "required": ["city", "days"],
    }
    listing = tmp_path / "schema.json"
    listing.write_text(json.dumps(schema))
    for given in (str(listing), json.dumps(schema)):
        for command in ("chat", "generate"):
            result = modelhost(command, "Weather?", "--model", str(tiny_llama_gguf), "-n", "60", "-t", "0",
                               "--json-schema", given)  # fmt: skip
            assert result.returncode == 0, result.stderr
            jsonschema.validate(json.loads(result.stdout), schema)
    refused = modelhost("chat", "x", "--model", str(tiny_llama_gguf), "--json-schema", '{"uniqueItems": true}')
    assert refused.returncode == 2 and "json_schema" in refused.stderr
    broken = modelhost("chat", "x", "--model", str(tiny_llama_gguf), "--json-schema", "{nope")
    assert broken.returncode == 2 and "--json-schema" in broken.stderr


def test_no_think_closes_a_thinking_models_thought(tiny_thinking_dir: Path, tmp_path: Path) -> None:
    from modelhost.testing import tinymodels

    gguf = tinymodels.write_llama_gguf(tiny_thinking_dir, tmp_path / "think.gguf")
    args = ["chat", "hi", "--model", str(gguf), "-n", "12", "-t", "0"]
    thinking = modelhost(*args)
    assert thinking.returncode == 0, thinking.stderr
    # The template opens <think> in the prompt: the random model's answer starts as thought (the text shows it
    # whole, markers included, as the CLI prints every token); --no-think closes an empty thought instead.
    answered = modelhost(*args, "--no-think")
    assert answered.returncode == 0, answered.stderr
    prompt = [SUMMARY.search(r.stderr) for r in (thinking, answered)]
    assert prompt[0] and prompt[1], (thinking.stderr, answered.stderr)
    assert int(prompt[1].group(2)) > int(prompt[0].group(2)), "the closed empty thought is part of the prompt"
    assert answered.stdout != thinking.stdout
