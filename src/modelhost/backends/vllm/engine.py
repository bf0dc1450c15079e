"""The vllm backend's one engine: the contract's admit/step/release over vLLM's LLMEngine (add_request, step,
abort_request).

vLLM already is a step engine with continuous batching, so this engine is mostly bookkeeping: a request admitted
here is tokenized (prompts.py), given SamplingParams (params.py) and added to vLLM under a request id of its own;
each `step()` is one `LLMEngine.step()`: the outputs of one step of vLLM's engine core, which runs in its own
process (loading.py) and schedules every running request and a chunk of waiting prompts, runs one forward and
samples, step after step, while this thread takes the outputs; each new id vLLM reports goes through the request's
own `SequenceDecoder`, the contract's one decoder (stops, UTF-8, max_tokens, metrics). A request the decoder ends
(a stop string) is aborted in vLLM at once; `release` aborts too: the abort reaches the core before its next step,
which frees the request's KV blocks (the core may have run the step it was in: vLLM's own server stops strings the
same way). Handles are never reused; vLLM's request ids are made from them, so a late output of an aborted request
cannot be mistaken for a newer one.

Why LLMEngine and not AsyncLLM: the host already runs one thread per model that admits, steps and releases
(host/loop.py), which is LLMEngine's own loop; AsyncLLM would add a second loop (its output task) and a
queue per request between vLLM and the host's, for the same batching. Both sit over the same multiprocess core.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from modelhost.backends.vllm.loading import Loaded
from modelhost.backends.vllm.params import sampling_params
from modelhost.backends.vllm.prompts import Prompts
from modelhost.errors import GenerationError, InvalidInputError, InvalidOptionError, ModelClosedError
from modelhost.inference.decoding import SequenceDecoder, ThoughtTracker
from modelhost.inference.engine import Admitted, EngineOutput, EngineRequest, Handle, StepResult
from modelhost.inference.options import GenerateOptions
from modelhost.inference.pieces import token_bytes
from modelhost.inference.types import FinishReason, GenerateMetrics, Token, TokenLogprob, has_images

#: Options this engine cannot honour (params.py says why); refused at admission, never ignored.
REFUSED = ("thinking_budget",)


@dataclass(eq=False)
class _Live:
    """One admitted request: its decoder, and its id inside vLLM (None: it never reached vLLM, max_tokens=0)."""

    handle: Handle
    decoder: SequenceDecoder
    prompt_tokens: int
    classify: bool
    logits: bool
    top: int | None  # the `logprobs` option: alternatives per token (None: no log-probabilities asked for)
    request_id: str | None = None
    started: bool = False  # vLLM has reported its first token (its prompt is evaluated)


class VllmEngine:
    """An Engine (the contract's) of `slots` slots over one vLLM LLMEngine. Drive it from one thread.

    `with_slots(n)` is another engine over the same vLLM engine (the conformance kit's one-slot reference); only
    one of them may have requests live at a time, since a vLLM step serves every request it holds.
    """

    def __init__(self, loaded: Loaded, prompts: Prompts, slots: int) -> None:
        if slots < 1:
            raise ValueError("an engine needs at least one slot")
        self.slots = slots
        self._loaded = loaded
        self._prompts = prompts
        self._piece = token_bytes(loaded.tokenizer)
        self._handles = itertools.count(1)  # never reused (engine.py says why)
        self._live: dict[Handle, _Live] = {}
        self._by_id: dict[str, _Live] = {}
        self._closed = False

    def with_slots(self, slots: int) -> VllmEngine:
        """Another engine of `slots` slots over the same vLLM engine (see the class doc)."""
        return VllmEngine(self._loaded, self._prompts, slots)

    def free_slots(self) -> int:
        """Slots that can take a request now."""
        return self.slots - len(self._live)

    def options(self, opts: Any) -> GenerateOptions:
        """The request's options, checked and resolved against the checkpoint's defaults; refuses what it cannot
        honour (InvalidOptionError naming the option)."""
        parsed = GenerateOptions.of(opts).resolved(self._loaded.defaults)
        parsed.refuse("vllm", REFUSED, "vLLM enforces a thinking budget only through a reasoning parser")
        return parsed

    def prepare(self, request: EngineRequest) -> EngineRequest:
        """The request with its prompt tokenized (PreparingEngine): safe on any thread beside `step()`."""
        opts = self.options(request.options)
        if request.prompt_ids is not None or request.classify or has_images(request.messages):
            return replace(request, options=opts)
        return replace(request, prompt=None, messages=(), prompt_ids=self._prompts.ids(request, opts), options=opts)

    def admit(self, request: EngineRequest) -> Admitted:
        """Check the request (options, then prompt) and add it to vLLM; see Engine.admit."""
        self._check_open()
        if self.free_slots() <= 0:
            raise RuntimeError("no free slot: admit only while free_slots() > 0")
        opts = self.options(request.options)
        ids = self._prompts.ids(request, opts)
        decoder = SequenceDecoder(opts, self._piece, eos_ids=self._loaded.eos_ids, thought=ThoughtTracker(None))
        handle = next(self._handles)
        live = _Live(handle, decoder, len(ids), request.classify, opts.logits, opts.logprobs)
        if request.classify or not decoder.done:  # max_tokens=0 never reaches vLLM: it ends at the next step
            room = self._loaded.info.context_length - len(ids)
            params = sampling_params(
                opts, room=room, eos_ids=self._loaded.eos_ids, vocab_size=self._loaded.info.vocab_size,
                classify=request.classify,
            )  # fmt: skip
            live.request_id = self._add(str(handle), ids, params, opts)
            self._by_id[live.request_id] = live
        self._live[handle] = live
        return Admitted(handle, len(ids))

    def step(self) -> StepResult:
        """One vLLM step; each request's new ids through its decoder; see Engine.step."""
        self._check_open()
        outputs: dict[Handle, EngineOutput] = {}
        for early in [lv for lv in self._live.values() if lv.request_id is None]:
            outputs[early.handle] = self._finish(early, (), "length")
        if not self._by_id:
            return StepResult(outputs)
        sampled = prompt_tokens = 0
        try:
            results = self._loaded.llm.step()
        except Exception as exc:  # vLLM lost every request it held: each ends with the failure
            error = GenerationError(f"vLLM's engine step failed: {exc}")
            for lost in list(self._by_id.values()):
                self._abort(lost)
                outputs[lost.handle] = self._finish(lost, (), "error", error)
            return StepResult(outputs)
        for result in results:
            live = self._by_id.get(result.request_id)
            if live is None:  # an aborted request's last output
                continue
            if not live.started:
                prompt_tokens += live.prompt_tokens
            sampled += 1
            outputs[live.handle] = self._advance(live, result)
        return StepResult(outputs, batch_tokens=sampled + prompt_tokens, sampled=sampled, prompt_tokens=prompt_tokens)

    def release(self, handle: Handle) -> GenerateMetrics | None:
        """End a live request now ("cancelled"), aborting it in vLLM; None when the handle is not live."""
        live = self._live.get(handle)
        if live is None:
            return None
        self._abort(live)
        return self._finish(live, (), "cancelled").metrics

    def close(self) -> None:
        """End every live request ("cancelled"). Idempotent; the model shuts vLLM down."""
        if self._closed:
            return
        for handle in list(self._live):
            self.release(handle)
        self._closed = True

    def cache_usage(self) -> float | None:
        """The fraction of vLLM's KV-cache blocks live requests hold (CacheReportingEngine); None while unknown."""
        stats = getattr(self._loaded.llm.output_processor, "scheduler_stats", None)
        usage = getattr(stats, "kv_cache_usage", None)
        return float(usage) if isinstance(usage, (int, float)) else None

    # ------------------------------------------------------------------------------------------------ internals

    def _add(self, request_id: str, ids: tuple[int, ...], params: Any, opts: GenerateOptions) -> str:
        """Add a request to vLLM; its refusal (a schema its grammar engine cannot compile, ...) as the contract's."""
        lora = self._loaded.lora
        try:
            self._loaded.llm.add_request(request_id, {"prompt_token_ids": list(ids)}, params, lora_request=lora)
        except (ValueError, TypeError) as exc:
            if opts.json_schema is not None and any(w in str(exc).lower() for w in ("schema", "grammar", "json")):
                raise InvalidOptionError("json_schema", f"vLLM's structured output refused it: {exc}") from exc
            raise InvalidInputError(f"vLLM refused the request: {exc}") from exc
        # vLLM keys its outputs and aborts by this id (add_request returns an internal one with a random suffix).
        return request_id

    def _advance(self, live: _Live, result: Any) -> EngineOutput:
        """Run one vLLM output (its new ids) through the request's decoder."""
        completion = result.outputs[0]
        decoder = live.decoder
        if not live.started:
            live.started = True
            decoder.prefill_done(live.prompt_tokens, int(getattr(result, "num_cached_tokens", 0) or 0))
        ids = [int(i) for i in completion.token_ids]
        if live.classify:
            return self._classified(live, ids[0], completion.logprobs[0] if completion.logprobs else None)
        tokens: list[Token] = []
        for i, token_id in enumerate(ids):
            logprob = None
            if live.top is not None and completion.logprobs and i < len(completion.logprobs):
                logprob = self._logprob(token_id, completion.logprobs[i], live.top)
            visible = decoder.push(token_id, logprob)
            if visible is not None:
                tokens.append(visible)
            if decoder.done:
                break
        if decoder.done:
            if not result.finished:
                self._abort(live)  # a stop string, or max_tokens: vLLM would go on
            return self._finish(live, tuple(tokens), decoder.finish_reason)
        if result.finished:  # vLLM ended it and the decoder did not: the context's room ran out
            self._by_id.pop(live.request_id or "", None)
            tail = decoder.out_of_room()
            return self._finish(live, (*tokens, tail) if tail is not None else tuple(tokens), "length")
        return EngineOutput(live.handle, tuple(tokens))

    def _classified(self, live: _Live, token_id: int, row: dict[int, Any] | None) -> EngineOutput:
        """A classify request's one token, as it is (a stop token too), with its logits row when asked."""
        self._abort(live)
        live.decoder.clock.generated_tokens = 1
        logits = None
        if live.logits and row is not None:
            logits = np.full(self._loaded.info.vocab_size, -np.inf, dtype=np.float32)
            for i, entry in row.items():
                if 0 <= i < logits.shape[0]:
                    logits[i] = entry.logprob
        token = Token(token_id, self._piece(token_id).decode("utf-8", "replace"))
        out = self._finish(live, (token,), "length")
        return EngineOutput(out.handle, out.tokens, out.finish_reason, out.metrics, logits=logits)

    def _logprob(self, token_id: int, row: dict[int, Any], top: int) -> TokenLogprob:
        """vLLM's logprobs of one position: the `top` most likely ids (ranks 1..top) and the sampled id, which vLLM
        adds with its own rank when it is not among them."""
        ranked = sorted((e.rank, i, e.logprob) for i, e in row.items() if e.rank is not None and e.rank <= top)
        chosen = row.get(token_id)
        own = self._entry(token_id, float(chosen.logprob) if chosen is not None else float("-inf"))
        return TokenLogprob(own.text, own.bytes, own.logprob, tuple(self._entry(i, lp) for _, i, lp in ranked))

    def _entry(self, token_id: int, logprob: float) -> TokenLogprob:
        data = self._piece(token_id)
        return TokenLogprob(data.decode("utf-8", "replace"), data, float(logprob))

    def _abort(self, live: _Live) -> None:
        request_id = live.request_id
        if request_id is not None and self._by_id.pop(request_id, None) is not None:
            self._loaded.llm.abort_request([request_id])

    def _finish(
        self, live: _Live, tokens: tuple[Token, ...], reason: FinishReason, error: BaseException | None = None
    ) -> EngineOutput:
        self._live.pop(live.handle, None)
        if live.request_id is not None:
            self._by_id.pop(live.request_id, None)
        live.decoder.close()
        return EngineOutput(live.handle, tokens, reason, live.decoder.metrics(reason), error)

    def _check_open(self) -> None:
        if self._loaded.llm is None:
            raise ModelClosedError("this vllm model was closed")
        if self._closed:
            raise GenerationError("this engine was closed")
