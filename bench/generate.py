"""Generation through the contract vs llama-cpp-python called directly: decode tokens/s and time to first token.

Both sides run the embedded default model (SmolLM2-135M-Instruct Q4_1), the same raw prompt, greedy decoding, the
same thread count and context size, in one process. Rounds alternate which side goes first (A/B, B/A, ...) so
that a burst of load from a neighbour on a shared machine hits both sides alike; the report is medians.

Per round and side:
- uncached: a prompt whose first token differs from every earlier one, so no KV-cache prefix can be reused; time
  to first token (TTFT) and decode tokens/s over `--max-tokens` tokens.
- cached: the same prompt again; llama.cpp keeps the prompt's KV entries, so only its last token is re-evaluated.

The direct side is what a careful caller of llama-cpp-python writes for streaming: `Llama.tokenize` once,
`Llama.generate` (which also reuses the cached prefix), `detokenize` per token, stop on end-of-generation.

    .venv/bin/python bench/generate.py [--rounds 7] [--max-tokens 128] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

#: Each round's prompt starts with a different word, so its first token differs and nothing is cached.
OPENINGS = ("Once", "Long", "In", "There", "When", "After", "Before", "During", "Every", "Some", "Many", "Few")
BODY = (
    " upon a time, in a small village by the sea, there lived an old fisherman who knew every current and every "
    "rock of the bay. Each morning he rowed out before dawn, and each evening he told the children what he had "
    "seen. One day he found a bottle with a letter inside. The letter said"
)


@dataclass
class Run:
    """One timed generation: seconds to the first token, then decode tokens/s over the rest."""

    ttft: float
    tokens: int
    decode_tps: float


def timed(stream: Iterable[object]) -> Run:
    """Drain a token stream, timing the first token and the rest."""
    start = time.perf_counter()
    first = last = 0.0
    n = 0
    for _ in stream:
        last = time.perf_counter()
        if n == 0:
            first = last
        n += 1
    decode = last - first
    return Run(first - start, n, (n - 1) / decode if n > 1 and decode > 0 else 0.0)


def contract_side(threads: int, max_tokens: int) -> tuple[Callable[[str, int], Run], Callable[[], None]]:
    """load_model("default") -> generate, exactly as an application would."""
    from modelhost.inference import load_model

    model = load_model("default", backend="llama_cpp", threads=threads)

    def run(prompt: str, n: int) -> Run:
        return timed(model.generate(prompt, max_tokens=n, temperature=0))

    return run, model.close


def direct_side(threads: int, max_tokens: int, n_ctx: int) -> tuple[Callable[[str, int], Run], Callable[[], None]]:
    """llama_cpp.Llama on the same file, same threads and context, greedy."""
    import llama_cpp

    from modelhost.inference import catalogue

    llm = llama_cpp.Llama(
        catalogue.resolve("default"), n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads, verbose=False
    )
    vocab = llm._model.vocab

    def tokens(prompt: str, n: int) -> Iterable[bytes]:
        ids = llm.tokenize(prompt.encode(), add_bos=True, special=True)
        for i, token in enumerate(llm.generate(ids, temp=0.0, repeat_penalty=1.0)):
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                return
            yield llm.detokenize([token])
            if i + 1 >= n:
                return

    def run(prompt: str, n: int) -> Run:
        return timed(tokens(prompt, n))

    return run, llm.close


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> None:
    """Run the A/B rounds and print medians and ratios."""
    from modelhost.backends.llama_cpp.backend import DEFAULT_CONTEXT_LENGTH, default_threads

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=default_threads())
    args = parser.parse_args()
    if args.rounds > len(OPENINGS) - 1:
        parser.error(f"--rounds is at most {len(OPENINGS) - 1} (one unique opening per round, plus the warm-up)")

    sides = {
        "contract": contract_side(args.threads, args.max_tokens),
        "direct": direct_side(args.threads, args.max_tokens, DEFAULT_CONTEXT_LENGTH),
    }
    results: dict[str, dict[str, list[float]]] = {name: {"tps": [], "ttft": [], "cached": []} for name in sides}
    counts: dict[str, list[int]] = {name: [] for name in sides}
    for run, _ in sides.values():  # warm-up: page the weights in, start the OpenMP thread group
        run(OPENINGS[-1] + BODY, 16)

    for r in range(args.rounds):
        prompt = OPENINGS[r] + BODY
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for name in order:
            run, _ = sides[name]
            uncached = run(prompt, args.max_tokens)
            cached = run(prompt, 1)
            results[name]["tps"].append(uncached.decode_tps)
            results[name]["ttft"].append(uncached.ttft)
            results[name]["cached"].append(cached.ttft)
            counts[name].append(uncached.tokens)
        print(
            f"round {r + 1}: "
            + "  ".join(
                f"{n}: {results[n]['tps'][-1]:6.1f} tok/s, TTFT {results[n]['ttft'][-1] * 1e3:6.1f} ms "
                f"(cached {results[n]['cached'][-1] * 1e3:5.1f} ms)"
                for n in sides
            ),
            flush=True,
        )
    for _, close in sides.values():
        close()

    c, d = results["contract"], results["direct"]
    print()
    print(f"threads={args.threads} max_tokens={args.max_tokens} rounds={args.rounds} (medians)")
    print(f"tokens generated per run: contract {counts['contract']}, direct {counts['direct']}")
    print(f"{'':24}{'contract':>12}{'direct':>12}{'ratio':>8}")
    tps_c, tps_d = median(c["tps"]), median(d["tps"])
    print(f"{'decode tokens/s':24}{tps_c:12.1f}{tps_d:12.1f}{tps_c / tps_d:8.3f}")
    ttft_c, ttft_d = median(c["ttft"]), median(d["ttft"])
    print(f"{'TTFT uncached (ms)':24}{ttft_c * 1e3:12.1f}{ttft_d * 1e3:12.1f}{ttft_d / ttft_c:8.3f}")
    cached_c, cached_d = median(c["cached"]), median(d["cached"])
    print(f"{'TTFT cached (ms)':24}{cached_c * 1e3:12.1f}{cached_d * 1e3:12.1f}{cached_d / cached_c:8.3f}")
    print("ratio: contract speed / direct speed (>1 means the contract is faster; TTFT ratios are direct/contract)")


if __name__ == "__main__":
    main()
