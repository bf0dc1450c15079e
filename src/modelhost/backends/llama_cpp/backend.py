"""The llama_cpp backend: loads GGUF files with llama-cpp-python, on the CPU unless the build offloads to a GPU.

Load options are honoured or refused, never silently dropped: a host that asks for GPU layers on a CPU-only build,
or for a dtype a GGUF file cannot change, hears so at load time rather than discovering it in its latency.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

from modelhost.backends.llama_cpp.lora import check_against_model
from modelhost.errors import InvalidOptionError, ModelLoadError
from modelhost.inference import catalogue, openmp
from modelhost.inference.options import LoadOptions
from modelhost.inference.types import DeviceInfo

#: Context size when the caller sets none (capped at the model's trained length). Enough for a long chat or a page
#: of OCR output; the KV cache of a small model at 4096 tokens is tens of megabytes, where the trained maximum of
#: a modern model (32k-128k) would cost gigabytes that most requests never touch.
DEFAULT_CONTEXT_LENGTH = 4096

#: Flash attention, on. Its kernel accumulates each query's attention over the cells of its own sequence in
#: order, skipping masked ones, so a sequence's output does not depend on how many cells other sequences in the
#: same batch use; without it, llama.cpp's attention sums over a span padded to the longest sequence of the batch,
#: in an order that changes with that span, and batched greedy output drifts from the one-at-a-time output
#: (measured on the tiny GGUF: a request diverged when a longer one decoded beside it). It is also faster here:
#: SmolLM2-135M on one thread, 48 tokens, 3 alternating rounds, 40.5 vs 35.9 tokens/s one at a time and 65 vs 33
#: aggregate for 4 batched streams.
FLASH_ATTENTION = True

#: Requests decoded together when the caller sets no `parallel` (llama-server's `-np` default is 4 as well): the
#: engine's one context holds parallel x context_length KV cells from the load. On 2 cores, 4 streams decode ~1.3x
#: faster in aggregate than one at a time (bench/concurrency.py), and a fifth request waits in the host's queue
#: rather than slowing four others further.
DEFAULT_PARALLEL = 4

#: Context size `llama_cpp.Llama` is opened with (llama.cpp pads it to its minimum of 256 cells). The Llama must
#: open a context to exist, but every request runs in the engine's context (engine.py), so the model frees this one
#: as soon as the engine's is made: opened at full size it would have been a second, idle copy of a whole context
#: (SmolLM2-135M at 4096 tokens: a 90 MiB KV buffer plus a 98 MiB compute buffer).
OPENING_CONTEXT = 1


def default_threads() -> int:
    """CPUs this process may run on (its affinity mask, not the machine's count): one OpenMP thread per CPU."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class LlamaCppBackend:
    """The `llama_cpp` engine: GGUF files through llama-cpp-python. Implements Backend, FormatProbe and
    DeviceInfoProvider."""

    name = "llama_cpp"
    _available: bool | None = None
    _import_error: str = ""  # why `import llama_cpp` failed, for `modelhost backends`

    def available(self) -> bool:
        """True when llama_cpp imports (a failed import is not tried again in this process; never raises)."""
        return self._engine(None) is not None

    def _engine(self, poll: int | None) -> Any:
        """llama_cpp, imported through openmp.import_engine with `poll` in force (InvalidOptionError for one OpenMP
        can no longer take), or None when it does not import here (why: `unavailable_reason`)."""
        if LlamaCppBackend._available is False:
            return None
        try:
            module = openmp.import_engine("llama_cpp", poll)  # the import loads OpenMP, which reads its wait once
        except InvalidOptionError:
            raise
        except Exception as exc:
            # Missing, or present but its shared library does not load on this CPU: either way, not here.
            LlamaCppBackend._available = False
            LlamaCppBackend._import_error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return None
        LlamaCppBackend._available = True
        return module

    def unavailable_reason(self) -> str:
        """Why `import llama_cpp` failed (not installed, or its library does not load on this CPU)."""
        self.available()
        return f"llama_cpp does not import ({self._import_error}): make install builds it"

    def accepts(self, path: str) -> bool:
        """True for a GGUF file, judged by its magic bytes."""
        return catalogue.is_gguf(Path(path))

    def device_info(self) -> DeviceInfo:
        """The CPU this backend computes on: processor name, architecture and total RAM."""
        return DeviceInfo(name=_cpu_name(), architecture=platform.machine(), memory_size=_total_memory())

    def memory_estimate(self, path: str, **load_opts: Any) -> int:
        """Bytes the model will hold once loaded with these options (the MemoryEstimator capability): the GGUF file,
        its projector, and the KV cache of the engine's `parallel` slots (memory.py)."""
        from modelhost.backends.llama_cpp import memory
        from modelhost.backends.llama_cpp import vision as _vision

        opts = LoadOptions.parse(load_opts)
        resolved = catalogue.resolve(path)
        mmproj = _vision.resolve_mmproj(opts.mmproj, resolved)
        return memory.estimate(
            resolved,
            context=opts.context_length,
            default_context=DEFAULT_CONTEXT_LENGTH,
            parallel=opts.parallel or DEFAULT_PARALLEL,
            mmproj=str(mmproj) if mmproj is not None else None,
        )

    def load_model(self, path: str, **load_opts: Any) -> Any:
        """Load a GGUF file (or a catalogue name such as "default") as a LlamaCppModel.

        Honours context_length (per request, and per slot when batching), threads, poll (how the compute threads
        wait, inference/openmp.py), gpu_layers (on a build with GPU offload), adapter (a llama.cpp LoRA GGUF),
        mmproj (a vision model's projector GGUF; without it, an `mmproj-<name>.gguf` beside the model is loaded; an
        image prompt is one batch slot's prefill) and parallel (slots of the continuous-batching engine, default
        DEFAULT_PARALLEL; 1 keeps the host one request at a time); refuses dtype and GPU layers on a CPU-only build
        with InvalidOptionError. The engine's context (`parallel` x context_length cells) is made now, so a context
        that cannot be made fails the load.
        """
        opts = LoadOptions.parse(load_opts)
        if opts.backend not in (None, self.name):
            raise InvalidOptionError("backend", f"this is the {self.name!r} backend, not {opts.backend!r}")
        resolved = catalogue.resolve(path)
        if not catalogue.is_gguf(Path(resolved)):
            raise ModelLoadError(f"backend {self.name!r} loads GGUF files only; {resolved!r} is not one")
        llama_cpp = self._engine(opts.poll)  # refuses a poll OpenMP cannot take now
        if llama_cpp is None:
            raise ModelLoadError(f"backend {self.name!r} is not available: llama-cpp-python does not import")
        from modelhost.backends.llama_cpp import logs

        logs.install()  # llama.cpp's lines through Python's logging, not raw onto stderr

        _check_unsupported(
            opts,
            gpu_offload=bool(llama_cpp.llama_supports_gpu_offload()),
            max_parallel=int(llama_cpp.llama_max_parallel_sequences()),
        )
        adapter = _resolve_adapter(opts.adapter) if opts.adapter else None
        if adapter is not None:
            # llama.cpp would take an adapter whose pair has a third dimension, then abort at the first decode.
            check_against_model(Path(adapter), resolved)
        threads = opts.threads or default_threads()
        try:
            llm = _open(resolved, OPENING_CONTEXT, threads, opts, adapter)
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelLoadError(f"backend {self.name!r} failed to load {resolved!r}: {exc}") from exc
        from modelhost.backends.llama_cpp import vision as _vision
        from modelhost.backends.llama_cpp.model import LlamaCppModel

        context = opts.context_length or DEFAULT_CONTEXT_LENGTH
        trained = int(llama_cpp.llama_model_n_ctx_train(llm.model))
        if opts.context_length is None and 0 < trained < DEFAULT_CONTEXT_LENGTH:
            # A model trained on fewer positions would only produce noise past them: its own length is the limit.
            context = trained
        try:
            mmproj = _vision.resolve_mmproj(opts.mmproj, resolved)
            if mmproj is not None:
                return _load_vision(llm, mmproj, resolved, adapter, context, threads, opts)
            return LlamaCppModel(
                llm, path=resolved, adapter=adapter, context_length=context, parallel=opts.parallel or DEFAULT_PARALLEL
            )
        except Exception:
            llm.close()
            raise


def _load_vision(
    llm: Any, mmproj: str, path: str, adapter: str | None, context: int, threads: int, opts: LoadOptions
) -> Any:
    """A LlamaCppModel with its projector: the mmproj through mtmd (checked first so that mtmd never asserts)."""
    from modelhost.backends.llama_cpp import vision as _vision
    from modelhost.backends.llama_cpp.model import LlamaCppModel

    projector = _vision.Projector(mmproj, llm, threads=threads)
    if projector.mrope and opts.parallel is not None and opts.parallel > 1:
        projector.close()
        raise InvalidOptionError("parallel", "a vision model with M-RoPE positions serves one request at a time")
    try:
        return LlamaCppModel(
            llm,
            projector=projector,
            path=path,
            adapter=adapter,
            context_length=context,
            parallel=opts.parallel or DEFAULT_PARALLEL,
        )
    except Exception:
        projector.close()
        raise


def _open(path: str, n_ctx: int, threads: int, opts: LoadOptions, adapter: str | None) -> Any:
    import llama_cpp

    from modelhost.backends.llama_cpp import logs
    from modelhost.backends.llama_cpp.engine import BATCH_SIZE  # here: the engine imports numpy

    with logs.opening():  # verbose, so that llama-cpp-python leaves the process's stderr alone (see `opening`)
        llm = llama_cpp.Llama(
            model_path=path,
            n_ctx=n_ctx,
            n_batch=BATCH_SIZE,
            n_threads=threads,
            # Prefill and decode share one OpenMP group size: a second, larger group would oversubscribe the cores
            # that the decode group spins on.
            n_threads_batch=threads,
            n_gpu_layers=opts.gpu_layers or 0,
            lora_path=adapter,
            flash_attn=FLASH_ATTENTION,
            logits_all=False,  # only the last position's logits are ever read; all of them would cost n_vocab per token
            verbose=True,
        )
    llm.verbose = False  # built: nothing later prints (its decode paths are quiet unless verbose)
    return llm


def _check_unsupported(opts: LoadOptions, *, gpu_offload: bool, max_parallel: int) -> None:
    if opts.dtype is not None:
        raise InvalidOptionError(
            "dtype", "a GGUF file fixes its own weight types; quantise or convert the file instead of passing dtype"
        )
    if opts.parallel is not None and opts.parallel > max_parallel:
        raise InvalidOptionError("parallel", f"this llama.cpp build decodes at most {max_parallel} sequences at once")
    if opts.gpu_layers and not gpu_offload:
        raise InvalidOptionError(
            "gpu_layers", "this llama-cpp-python build has no GPU offload (it is CPU-only); pass 0 or leave it unset"
        )


def _resolve_adapter(adapter: str) -> str:
    """The LoRA GGUF file for `adapter`: the file itself, or the one .gguf in a folder."""
    path = Path(os.path.expanduser(adapter))
    if path.is_dir():
        found = sorted(p for p in path.glob("*.gguf") if catalogue.is_gguf(p))
        if len(found) != 1:
            raise InvalidOptionError(
                "adapter",
                f"{adapter!r} is a folder with {len(found)} GGUF files; llama.cpp needs one LoRA GGUF "
                "(convert a peft adapter with llama.cpp's convert_lora_to_gguf.py)",
            )
        path = found[0]
    if not catalogue.is_gguf(path):
        raise InvalidOptionError(
            "adapter",
            f"{adapter!r} is not a GGUF LoRA adapter; convert a peft adapter with llama.cpp's convert_lora_to_gguf.py",
        )
    return str(path)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or "CPU"


def _total_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0
