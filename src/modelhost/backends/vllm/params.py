"""The contract's generation options as vLLM's `SamplingParams`.

vLLM draws the ids (its sampler, its seeds, its grammar); the contract's decoder (inference/decoding.py) decides what
a caller sees of them: stop strings, UTF-8, `max_tokens`, metrics. So vLLM is asked for token ids only
(`detokenize=False`, each step's new ids: `RequestOutputKind.DELTA`) and is not told the stop strings: the decoder
finds them in the ids and the engine aborts the request as it reads them (the core, in its own process, takes the
abort before its next step: at most the step already running is computed past the stop).

What maps how:
- temperature, top_k, top_p, min_p, seed: as they are (vLLM seeds each request's own generator, so a seeded
  request samples the same whatever shares its batch); `repeat_penalty` is vLLM's `repetition_penalty`;
- max_tokens: as it is, bounded by the room the context leaves after the prompt (the decoder then ends the request
  "length" there); min_tokens: vLLM's own, which holds the end-of-sequence and stop ids back as the contract asks;
- stop_tokens: vLLM's `stop_token_ids` (with the checkpoint's end-of-sequence ids, so vLLM and the decoder end on
  the same ids); suppress_tokens: `allowed_token_ids`, every other id (vLLM's `logit_bias` is clamped to -100,
  which lowers an id but does not ban it);
- json_schema: vLLM's structured outputs (`StructuredOutputsParams(json=...)`), compact JSON (loading.py says why);
- logprobs: vLLM's `logprobs` (the sampled id's and that many alternatives, from the raw distribution);
- logits (classify): every id's log-probability (log-softmax of the logits: the same argmax and order).

thinking_budget is refused: vLLM enforces one only through a reasoning parser configured at load.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from modelhost.inference.options import GenerateOptions


def sampling_params(
    opts: GenerateOptions, *, room: int, eos_ids: Collection[int], vocab_size: int, classify: bool = False
) -> Any:
    """vLLM's SamplingParams for one request with resolved `opts`; `room` is how many tokens the context has left
    after the prompt (at least 1)."""
    from vllm.sampling_params import RequestOutputKind, SamplingParams, StructuredOutputsParams

    stops = sorted({*eos_ids, *opts.stop_tokens})
    max_tokens = 1 if classify else max(1, min(opts.max_tokens or 1, room))
    logprobs: int | None = opts.logprobs
    if classify:
        logprobs = -1 if opts.logits else None  # -1: the whole vocabulary (the load lifts vLLM's cap for this)
    allowed = None
    if opts.suppress_tokens:
        banned = set(opts.suppress_tokens)
        allowed = [i for i in range(vocab_size) if i not in banned]
    return SamplingParams(
        temperature=float(opts.temperature if opts.temperature is not None else 1.0),
        top_k=int(opts.top_k or 0),
        top_p=float(opts.top_p if opts.top_p is not None else 1.0),
        min_p=float(opts.min_p or 0.0),
        repetition_penalty=float(opts.repeat_penalty or 1.0),
        seed=opts.seed if opts.seed is None else opts.seed % (1 << 63),  # vLLM seeds a torch generator: int64
        max_tokens=max_tokens,
        min_tokens=0 if classify else min(opts.min_tokens, max_tokens),
        stop_token_ids=stops,
        allowed_token_ids=allowed,
        logprobs=logprobs,
        structured_outputs=StructuredOutputsParams(json=opts.json_schema) if opts.json_schema else None,
        detokenize=False,
        skip_special_tokens=False,
        output_kind=RequestOutputKind.DELTA,
    )
