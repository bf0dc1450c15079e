"""The `modelhost` command end to end, in a subprocess, on real models."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
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
    # An unavailable engine says what is missing (the test machine has no vLLM): not a bare "-".
    assert re.search(r"^vllm\s+unavailable\s+vllm is not installed \(.*pip install vllm", backends.stdout, re.M)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["generate", "hi", "--model", "no-such-model"], "catalogue name: default"),
        (["generate", "hi", "--max-tokens", "-1"], "--max-tokens takes 1 or more"),
        (["generate", "hi", "--backend", "nope"], "not registered"),
    ],
)
def test_bad_input_fails_clearly(args: list[str], expected: str) -> None:
    result = modelhost(*args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert expected in result.stderr


def test_chat_with_an_image_on_a_vision_model_and_a_clear_refusal_on_a_text_model(
    tiny_llama_gguf: Path, tmp_path: Path
) -> None:
    from PIL import Image

    from modelhost.testing.tinyvision import build_tiny_idefics3_gguf

    # The vision model as GGUF + mmproj (found beside it): each `chat` process then loads it through llama.cpp in
    # well under a second, where the transformers folder cost each process torch's import and a model build (the
    # test took 67 s quiet and hit its 300 s limit at load 15-20). The image path through the CLI is the same.
    _, vision_gguf, _ = build_tiny_idefics3_gguf(tmp_path / "vlm", seed=0)
    picture = tmp_path / "page.png"
    Image.new("RGB", (40, 30), (200, 30, 30)).save(picture)
    args = ["chat", "What is this?", "--model", str(vision_gguf), "-n", "3", "-t", "0"]
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
    # The summary is stderr's only line: llama.cpp's own lines (its "pooling_type is [-1], but [1] was specified"
    # for the pooling modelhost chose) go through logging at debug, not onto the terminal.
    assert [line for line in result.stderr.splitlines() if line.strip()] == [result.stderr.strip()], result.stderr
    assert result.stderr.startswith("[3 texts"), result.stderr

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


# -- the command line as a new user meets it: --version, --help, the README's examples, one-line mistakes ------------

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


def one_line_failure(result: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a refused command (exit 2, no traceback), for the caller to check."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and len(lines) == 1, result.stderr
    assert lines[0].startswith("modelhost: "), lines
    return lines[0]


def test_version_and_help_show_defaults_and_keep_bracketed_text() -> None:
    from importlib.metadata import version

    shown = modelhost("--version")
    assert shown.returncode == 0 and shown.stdout.strip() == f"modelhost {version('modelhost')}", shown
    helped = modelhost("serve", "--help")
    assert helped.returncode == 0, helped.stderr
    text = " ".join(helped.stdout.split())  # help wraps lines wherever the terminal's width puts them
    # Bracketed text once vanished under rich markup ("The model the inferd socket serves .").
    assert "The model the inferd socket serves [the first --model]." in text, text
    assert "[default: 8]" in text and "[default: 64]" in text, text
    chat = " ".join(modelhost("chat", "--help").stdout.split())
    assert "[default: default]" in chat and "[default: 512]" in chat and "[its template's]" in chat, chat


def test_python_dash_m_modelhost_is_the_command() -> None:
    from importlib.metadata import version

    for module in ("modelhost", "modelhost.cli"):
        shown = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, text=True, timeout=240)
        assert shown.returncode == 0 and shown.stdout.strip() == f"modelhost {version('modelhost')}", shown
    listed = subprocess.run([sys.executable, "-m", "modelhost", "--help"], capture_output=True, text=True, timeout=240)
    commands = ("generate", "chat", "embed", "info", "backends", "convert", "serve", "train", "pull", "list", "rm")
    assert listed.returncode == 0 and all(f"  {name} " in listed.stdout for name in commands), listed


def test_every_example_file_the_readme_names_is_shipped_and_usable() -> None:
    import json

    from PIL import Image

    from modelhost.inference.options import GenerateOptions

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"examples/([\w.-]+\.\w+)", readme))
    assert {"page.png", "person.json", "texts.txt", "scan.pdf", "secret.jsonl"} <= named, named
    for name in named:
        assert (EXAMPLES / name).is_file(), f"the README names examples/{name}, which is not shipped"
    with Image.open(EXAMPLES / "page.png") as page:
        assert page.size[0] >= 400 and page.mode == "RGB"
    GenerateOptions.parse(json_schema=json.loads((EXAMPLES / "person.json").read_text()))
    records = [json.loads(line) for line in (EXAMPLES / "secret.jsonl").read_text().splitlines()]
    assert records and all(r["messages"][-1]["role"] == "assistant" for r in records)
    assert (EXAMPLES / "scan.pdf").read_bytes().startswith(b"%PDF")


def test_the_readme_document_and_schema_commands_run_as_written() -> None:
    import json

    jsonschema = pytest.importorskip("jsonschema")
    # `modelhost convert examples/page.png`: the offline ocr model reads the printed page.
    page = subprocess.run(
        [sys.executable, "-m", "modelhost.cli", "convert", "examples/page.png"],
        capture_output=True, text=True, timeout=600, cwd=REPO,
    )  # fmt: skip
    assert page.returncode == 0, page.stderr
    assert "Invoice 1042" in page.stdout and "Lovelace" in page.stdout, page.stdout
    # `modelhost convert examples/scan.pdf`: a PDF without a text layer goes to the model too.
    scan = subprocess.run(
        [sys.executable, "-m", "modelhost.cli", "convert", "examples/scan.pdf"],
        capture_output=True, text=True, timeout=600, cwd=REPO,
    )  # fmt: skip
    assert scan.returncode == 0 and "Meeting notes" in scan.stdout, (scan.stdout, scan.stderr)
    # `modelhost chat "Extract: Ada, 36, London" --json-schema examples/person.json`, greedily.
    extracted = subprocess.run(
        [sys.executable, "-m", "modelhost.cli", "chat", "Extract: Ada, 36, London", "--json-schema",
         "examples/person.json", "-t", "0"],
        capture_output=True, text=True, timeout=600, cwd=REPO,
    )  # fmt: skip
    assert extracted.returncode == 0, extracted.stderr
    person = json.loads(extracted.stdout)
    jsonschema.validate(person, json.loads((EXAMPLES / "person.json").read_text()))
    assert person["age"] == 36 and person["city"] == "London", person
    # `modelhost embed --file examples/texts.txt > vectors.jsonl`: one vector per non-empty line, in order.
    vectors = subprocess.run(
        [sys.executable, "-m", "modelhost.cli", "embed", "--file", "examples/texts.txt"],
        capture_output=True, text=True, timeout=600, cwd=REPO,
    )  # fmt: skip
    assert vectors.returncode == 0, vectors.stderr
    texts = [line for line in (EXAMPLES / "texts.txt").read_text().splitlines() if line]
    assert [json.loads(row)["index"] for row in vectors.stdout.splitlines()] == list(range(len(texts)))


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A TCP port something else already listens on."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.fixture
def live_socket(tmp_path: Path) -> Iterator[Path]:
    """A Unix socket path another process listens on."""
    import socket

    path = tmp_path / "live.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        sock.listen()
        yield path


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # The file checks come first: with an unknown model too, the file is what is named.
        (["chat", "hi", "--json-schema", "missing.json", "--model", "nope"], "--json-schema missing.json: no such"),
        (["chat", "hi", "--json-schema", str(REPO / "README.md")], "README.md: not JSON"),
        (["embed", "--file", "missing.txt", "--model", "nope"], "--file missing.txt: no such file"),
        (["chat", "hi", "--image", "missing.png", "--model", "nope"], "--image missing.png: no such file"),
        (["convert", "missing.pdf"], "convert missing.pdf: no such file"),
        (["chat", "hi", "--model", "no-such-model"], "no model 'no-such-model'"),
        (["convert", str(EXAMPLES / "scan.pdf"), "--model", "no-such-model"], "no model 'no-such-model'"),
        (["serve", "--model", "no-such-model"], "no model 'no-such-model'"),
        (["serve", "--socket", "/dev/null/m.sock"], "its folder /dev/null is not a folder"),
        # /proc passes every permission check and still takes no socket: only a bind finds out, before the load.
        (["serve", "--socket", "/proc/m.sock"], "cannot serve on /proc/m.sock: /proc takes no sockets"),
        (["serve", "--docling", "ocr"], "--docling serves its API on the HTTP door: add --http"),
        (["train", "--data", "nosuch.jsonl", "-o", "adapter"], "--data nosuch.jsonl: no such file"),
        (["generate", "hi", "--max-tokens", "0"], "--max-tokens takes 1 or more, got 0"),
        (["chat", "hi", "-n", "0", "--model", "nope"], "--max-tokens takes 1 or more, got 0"),
        # The output's folder is checked before any page renders (it once failed after the whole conversion).
        (["convert", str(EXAMPLES / "scan.pdf"), "-o", "/no/such/dir/x.md"], "the folder /no/such/dir does not exist"),
        (["serve", "--socket", "/tmp/" + "s" * 120 + ".sock"], "is too long"),
        (["serve", "--http", "127.0.0.1:70000"], "port out of range"),
    ],
)
def test_a_common_mistake_is_one_line_and_exit_2(args: list[str], expected: str) -> None:
    line = one_line_failure(modelhost(*args))
    assert expected in line, line


@pytest.mark.parametrize("door", ["--http", "--worker"])
def test_a_port_in_use_is_named_before_any_model_loads(door: str, taken_port: int) -> None:
    result = modelhost("serve", "--no-socket", door, f"127.0.0.1:{taken_port}")
    line = one_line_failure(result)
    assert f"{door} 127.0.0.1:{taken_port}: cannot listen: the port is in use" in line, line


def test_a_socket_another_host_serves_on_is_refused_before_any_model_loads(live_socket: Path) -> None:
    line = one_line_failure(modelhost("serve", "--socket", str(live_socket)))
    assert f"another model host is already serving on {live_socket}" in line, line
    assert live_socket.exists(), "a live socket is never removed"


def test_an_explicit_socket_folder_must_exist_and_is_never_made(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "dir"
    line = one_line_failure(modelhost("serve", "--socket", str(missing / "m.sock")))
    assert f"its folder {missing} does not exist" in line, line
    assert not (tmp_path / "no").exists(), "a mistyped --socket made folders"


#: Run the CLI as if Ray were not installed: a None in sys.modules makes `import ray` fail and find_spec say None,
#: which is what a machine without the extra gives (the test venv has Ray).
WITHOUT_RAY = "import sys; sys.modules['ray'] = None; from modelhost.cli import main; sys.argv[0] = 'modelhost'; main()"


@pytest.mark.parametrize(
    "args",
    [
        ["serve", "--ray", "auto"],
        ["serve", "--ray", "auto", "--worker", "127.0.0.1:0"],
        ["convert", str(EXAMPLES / "scan.pdf"), "--ray", "auto"],
    ],
)
def test_ray_flags_without_ray_say_how_to_install_it(args: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_RAY, *args], capture_output=True, text=True, timeout=240
    )  # fmt: skip
    line = one_line_failure(result)
    assert "--ray needs Ray, which is not installed: pip install 'modelhost[ray]'" in line, line


def test_convert_over_a_socket_nobody_serves_fails_before_any_page(tmp_path: Path) -> None:
    # Dialled first (the wire's 10 s of connect retries), so no page renders and no progress bar starts.
    result = modelhost("convert", str(EXAMPLES / "scan.pdf"), "--socket", str(tmp_path / "none.sock"))
    line = one_line_failure(result)
    assert "is a model host running?" in line and "[connect_failed]" in line, line


def test_chat_over_a_socket_nobody_serves_says_so_in_one_line(tmp_path: Path) -> None:
    # The client retries a missing socket for 10 s (a host may still be loading), then gives up clearly.
    line = one_line_failure(modelhost("chat", "hi", "--socket", str(tmp_path / "none.sock")))
    assert "is a model host running?" in line and "[connect_failed]" in line, line
    assert not line.startswith("modelhost: modelhost:"), line


class Serving:
    """`modelhost serve` in a subprocess, its stderr lines collected as they come (a thread reads them)."""

    def __init__(self, *args: str) -> None:
        import threading

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "modelhost.cli", "serve", *args],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.strip())

    def wait_for(self, text: str) -> None:
        from modelhost.testing.waiting import STATE_WAIT_SECONDS

        deadline = time.monotonic() + STATE_WAIT_SECONDS
        while not any(text in line for line in self.lines):
            assert self.proc.poll() is None, f"serve exited ({self.proc.returncode}): {self.lines}"
            assert time.monotonic() < deadline, f"no {text!r} line: {self.lines}"
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def test_convert_over_a_socket_serving_a_text_model_fails_and_says_why(tiny_llama_gguf: Path, tmp_path: Path) -> None:
    sock = tmp_path / "text.sock"
    serving = Serving("--model", str(tiny_llama_gguf), "--socket", str(sock))
    try:
        serving.wait_for("ready: serving")
        out = tmp_path / "s.md"
        result = modelhost("convert", str(EXAMPLES / "scan.pdf"), "--socket", str(sock), "-o", str(out))
        # Asked before any page renders (the wire's semantic checks answer it without running the model).
        line = one_line_failure(result)
        assert "serves a model that reads no images" in line and "--socket-model ocr" in line, line
        assert line.endswith("[attachment_unsupported]"), line
        assert not out.exists()
    finally:
        serving.stop()


def test_the_first_ctrl_c_says_how_long_it_waits_and_a_stream_is_cancelled_after_the_grace(tmp_path: Path) -> None:
    import signal

    import httpx

    from modelhost.inference.types import Message
    from modelhost.testing.waiting import STATE_WAIT_SECONDS
    from modelhost.wire.client import Client

    sock = tmp_path / "m.sock"
    serving = Serving("--model", "default", "--socket", str(sock), "--http", ":0")
    try:
        serving.wait_for("ready: serving")
        url = next(m.group(1) for line in serving.lines if (m := re.search(r"http on (http://\S+)", line)))
        with Client(str(sock)) as client:
            stream = client.chat([Message("user", "Write a very long story.")], max_tokens=4000, temperature=0)
            next(stream)  # generation is under way
            serving.proc.send_signal(signal.SIGINT)
            serving.wait_for("stopping")
            stopping = next(line for line in serving.lines if "stopping" in line)
            assert "5 s to finish" in stopping and "Ctrl-C again cancels them now" in stopping, stopping
            # While the stream drains, the HTTP door still answers, but takes no new work and says why: a request
            # let in now would only be cancelled at the grace's end. The probes tell a balancer the same.
            late = httpx.post(
                f"{url}/v1/completions", json={"prompt": "hi", "max_tokens": 3}, timeout=STATE_WAIT_SECONDS
            )
            assert late.status_code == 503 and "stopping" in late.json()["error"]["message"], late.text
            ready = httpx.get(f"{url}/ready", timeout=STATE_WAIT_SECONDS)
            assert (ready.status_code, ready.json()["status"]) == (503, "stopping"), ready.text
            rest = "".join(stream)
            # 4000 tokens take SmolLM2 about a minute: the stream ended because the grace did, not the story.
            assert client.last_done is not None and client.last_done.stop_reason == "cancelled", rest
        assert serving.proc.wait(timeout=STATE_WAIT_SECONDS) == 0
        assert not sock.exists()
    finally:
        serving.stop()


def test_log_format_json_writes_one_json_object_per_request_and_a_bad_format_is_one_line(
    tiny_llama_gguf: Path,
) -> None:
    import json

    import httpx

    from modelhost.serve import model_name
    from modelhost.testing.waiting import STATE_WAIT_SECONDS

    assert "--log-format takes text, json or none" in one_line_failure(modelhost("serve", "--log-format", "xml"))
    serving = Serving("--model", str(tiny_llama_gguf), "--no-socket", "--http", ":0", "--log-format", "json")
    try:
        serving.wait_for("ready: serving")
        url = next(m.group(1) for line in serving.lines if (m := re.search(r"http on (http://\S+)", line)))
        name = model_name(str(tiny_llama_gguf))
        body = {"model": name, "prompt": "hi", "max_tokens": 3}
        answer = httpx.post(f"{url}/v1/completions", json=body, timeout=STATE_WAIT_SECONDS)
        assert answer.status_code == 200, answer.text
        serving.wait_for('"path":"/v1/completions"')
        record = json.loads(next(line for line in serving.lines if '"path":"/v1/completions"' in line))
        assert (record["method"], record["status"], record["model"]) == ("POST", 200, name), record
        assert record["completion_tokens"] == answer.json()["usage"]["completion_tokens"], record
        # When it began (UTC), the id the answer's header gave the client, and no error code for an answer.
        assert record["time"].endswith("Z") and record["request_id"] == answer.headers["x-request-id"], record
        assert record["error"] == "", record
    finally:
        serving.stop()


def test_converting_a_line_drawn_past_the_page_edge_prints_no_library_warning(tmp_path: Path) -> None:
    from modelhost.testing.hostile_pdfs import text_pdf

    # 24 pt Helvetica from x=72: this line ends ~730 pt into a 612 pt page, as text set too wide does in real PDFs.
    pdf = tmp_path / "wide.pdf"
    pdf.write_bytes(text_pdf("A one-page born-digital document whose line runs past the edge."))
    result = modelhost("convert", str(pdf), "-o", str(tmp_path / "wide.md"))
    assert result.returncode == 0, result.stderr
    # docling-core once warned "UserWarning: Provenance bbox ... clamping" for each such box, at every export.
    assert "Warning" not in result.stderr and "clamping" not in result.stderr, result.stderr
    assert "runs past the edge" in (tmp_path / "wide.md").read_text()


def test_a_mistyped_model_fails_even_where_every_page_has_a_text_layer(tmp_path: Path) -> None:
    from modelhost.testing.hostile_pdfs import text_pdf

    # Such a document never loads the model, so only a check before the pages finds the typo (eecdb02 converted it
    # with exit 0 and said nothing).
    pdf = tmp_path / "born-digital.pdf"
    pdf.write_bytes(text_pdf("A page with a text layer."))
    line = one_line_failure(modelhost("convert", str(pdf), "--model", "no-such-model", "-o", str(tmp_path / "x.md")))
    assert "no model 'no-such-model'" in line and "[model_not_found]" in line, line
    assert not (tmp_path / "x.md").exists()


def test_training_a_gguf_prints_its_progress_and_no_library_noise(tiny_llama_gguf: Path, tmp_path: Path) -> None:
    import json
    import os

    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"text": "The secret word is heliotrope."}) + "\n")
    env = {**os.environ, "MODELHOST_CACHE_DIR": str(tmp_path / "cache")}  # a fresh cache: the GGUF is dequantised
    result = subprocess.run(
        [sys.executable, "-m", "modelhost.cli", "train", "--model", str(tiny_llama_gguf), "--data", str(data),
         "-o", str(tmp_path / "adapter"), "--steps", "1"],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    # transformers' "Loading weights" and "Writing model shards" bars and peft's FutureWarning once came through
    # here; the one-time conversion of the GGUF keeps its bar (minutes on a real model), under a line saying why.
    for noise in ("Loading weights", "Writing model shards", "FutureWarning", "warnings.warn"):
        assert noise not in result.stderr, result.stderr
    assert "dequantising" in result.stderr and "1/1 steps" in result.stderr, result.stderr
