"""LoRA training through modelhost (`modelhost.training.train`, the loop `modelhost train` runs) vs a plain peft +
torch loop: optimiser steps/s and trained-on tokens/s.

Both sides train the same model folder with the same LoRA (rank, alpha, targets, seeded init), the same AdamW,
learning rate and gradient clip, on the same token ids in the same batches (the plain side gets the batches our
data module made, so batching is not what is compared), in one process, with the same torch thread count. The plain
side is what a careful user writes: `get_peft_model`, `model(input_ids, attention_mask, labels)`, backward, clip,
step. Rounds alternate which side goes first, so a neighbour's burst of load on a shared machine hits both alike;
each round starts with unmeasured warm-up steps; the report is medians, the ratio ours / plain (goal >= 0.95),
and the median of the per-round ratios (the steadier figure on a loaded machine).

The default model is a small random Llama (4 layers, hidden 256) built on the spot; `--model default` trains the
embedded SmolLM2-135M through its dequantised transformers twin (slow on 2 cores: use fewer steps).

    .venv/bin/python bench/training.py [--rounds 5] [--steps 20] [--batch-size 4] [--threads 1] [--model PATH]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

WORDS = (
    "the robot counted birds by the river and wrote the numbers in a notebook while the cat asked about the ocean",
    "stars mountains and the history of people who lived in the quiet house",
)


VOCAB = " ".join(WORDS).split(" ")


def records(n: int, seed: int) -> list[dict[str, Any]]:
    """Chat records of varied length (10-60 words of answer), so padding and masking are part of the work."""
    import random

    rng = random.Random(seed)
    out = []
    for i in range(n):
        question = " ".join(rng.choice(VOCAB) for _ in range(rng.randint(4, 12)))
        answer = " ".join(rng.choice(VOCAB) for _ in range(rng.randint(10, 60)))
        out.append(
            {"messages": [{"role": "user", "content": f"{i}: {question}?"}, {"role": "assistant", "content": answer}]}
        )
    return out


def ours(folder: str, recs: list[dict[str, Any]], args: argparse.Namespace) -> tuple[float, int]:
    """Seconds and tokens of `args.steps` measured steps through modelhost's run loop."""
    from modelhost.inference import load_trainable
    from modelhost.training import TrainSettings, train

    settings = TrainSettings(
        steps=args.warmup + args.steps, batch_size=args.batch_size, learning_rate=1e-4, rank=args.rank, seed=0
    )
    marks: list[tuple[float, int]] = []
    with load_trainable(folder, backend="transformers") as model, tempfile.TemporaryDirectory() as out:
        train(model, recs, settings, out, plot=False, on_step=lambda r: marks.append((time.perf_counter(), r.tokens)))
    (t0, k0), (t1, k1) = marks[args.warmup - 1], marks[-1]
    return t1 - t0, k1 - k0


def plain(folder: str, recs: list[dict[str, Any]], args: argparse.Namespace) -> tuple[float, int]:
    """The same steps as a hand-written peft + torch loop."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from modelhost.inference import load_trainable
    from modelhost.training.data import stream_batches
    from modelhost.training.run import DEFAULT_TARGETS

    with load_trainable(folder, backend="transformers") as encoder:  # the same token ids as our side
        examples = [encoder.encode_example(r) for r in recs]
        pad = int(encoder.checkpoint.tokenizer.pad_token_id)
    batches = stream_batches(examples, args.batch_size, 0)
    base = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    config = LoraConfig(
        r=args.rank, lora_alpha=2 * args.rank, target_modules=list(DEFAULT_TARGETS), lora_dropout=0.0, bias="none"
    )
    torch.manual_seed(0)
    model = get_peft_model(base, config)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    tokens = 0
    start = 0.0
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            start, tokens = time.perf_counter(), 0
        batch = next(batches)
        width = max(len(e.ids) for e in batch)
        ids = torch.tensor([list(e.ids) + [pad] * (width - len(e.ids)) for e in batch])
        labels = torch.tensor([list(e.labels) + [-100] * (width - len(e.ids)) for e in batch])
        mask = torch.tensor([[1] * len(e.ids) + [0] * (width - len(e.ids)) for e in batch])
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        tokens += int(mask.sum())
    return time.perf_counter() - start, tokens


def model_folder(args: argparse.Namespace, tmp: Path) -> str:
    if args.model:
        from modelhost.backends.transformers.loading import dequantised_gguf_folder
        from modelhost.inference import catalogue

        path = Path(catalogue.resolve(args.model))
        return str(dequantised_gguf_folder(path) if path.is_file() else path)
    from modelhost.testing import tinymodels

    built = tinymodels.build_tiny_llama(
        tmp / "llama",
        seed=0,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
    )
    return str(built)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20, help="measured optimiser steps per round and side")
    parser.add_argument("--warmup", type=int, default=3, help="unmeasured steps first")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--records", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--model", default=None, help="a model folder, GGUF or catalogue name [a built Llama]")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        folder = model_folder(args, Path(tmp))
        recs = records(args.records, seed=1)
        results: dict[str, list[tuple[float, int]]] = {"ours": [], "plain": []}
        sides = {"ours": ours, "plain": plain}
        for round_ in range(args.rounds):
            order = ["ours", "plain"] if round_ % 2 == 0 else ["plain", "ours"]
            for side in order:
                results[side].append(sides[side](folder, recs, args))
            line = ", ".join(
                f"{s} {args.steps / results[s][-1][0]:.2f} steps/s {results[s][-1][1] / results[s][-1][0]:.0f} tok/s"
                for s in ("ours", "plain")
            )
            print(f"round {round_ + 1}: {line}", flush=True)
    med = {
        s: (
            statistics.median(args.steps / sec for sec, _ in results[s]),
            statistics.median(tok / sec for sec, tok in results[s]),
        )
        for s in results
    }
    print(
        f"model: {args.model or 'built Llama (4 layers, hidden 256)'}, batch {args.batch_size}, rank {args.rank}, "
        f"{args.threads} thread(s), {args.rounds} rounds x {args.steps} steps"
    )
    for side in ("ours", "plain"):
        print(f"{side:6} {med[side][0]:.3f} steps/s  {med[side][1]:.0f} tokens/s")
    steps_ratio, tokens_ratio = med["ours"][0] / med["plain"][0], med["ours"][1] / med["plain"][1]
    print(f"ratio ours/plain: steps/s {steps_ratio:.3f}, tokens/s {tokens_ratio:.3f}")
    # Each round's two sides ran back to back, so their ratio cancels most of a shared machine's drifting load.
    paired = statistics.median(p[0] / o[0] for o, p in zip(results["ours"], results["plain"], strict=True))
    print(f"median of per-round ratios (steps/s): {paired:.3f}")


if __name__ == "__main__":
    main()
