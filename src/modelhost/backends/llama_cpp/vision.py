"""Vision for the llama_cpp backend: a GGUF language model with its multimodal projector (mmproj), through mtmd.

llama.cpp runs a vision-language model (granite-docling, SmolVLM, ...) as two files: the language model GGUF and an
`mmproj` GGUF holding the vision tower and its projector. libmtmd (shipped in llama-cpp-python, bound in
`llama_cpp.mtmd_cpp`) turns a prompt with media markers plus images into chunks (text tokens, image embeddings)
and evaluates them into the language model's context; generation then goes on exactly as for text.

- Images reach mtmd as raw RGB bitmaps: a wire page (an HxWx3 uint8 array) is handed over by pointer, a PIL image
  or PNG/JPEG bytes are decoded once. There is no PNG round trip anywhere.
- Sizes are checked before anything is decoded or preprocessed (the wire's bounds, and an aspect-ratio bound).
- Crash guard: mtmd reports most failures by status, but a few it asserts, and an assert aborts the whole host.
  The ones a request or a file can trigger are checked here first: the special tokens its projector's image
  template looks up (Idefics3 needs `"\\n\\n"` as one token; a missing one is `GGML_ASSERT(idx >= 0)`), images so
  thin that the preprocessor would resize a side to zero pixels (`GGML_ASSERT(inSize > 0 && outSize > 0)`), and a
  media marker a user could type (ours is random per process, so text cannot smuggle in an image slot).
- Prompt reuse: the text before the first image is reused from the KV cache like any text prompt; image chunks
  and everything after them are evaluated afresh, and the cache remembers image positions as -1 so a later prompt
  never matches into them.
- Batching: an image prompt is the prefill of one slot of the continuous-batching engine (VisionBatchEngine): its
  chunks are evaluated into that slot's sequence in one step, then the slot decodes beside the others. A slot's
  image prompt reuses no cache (text prompts still reuse theirs). Projectors with M-RoPE positions (Qwen-VL) serve
  one request at a time, since the engine's slots count positions as tokens.
"""

from __future__ import annotations

import ctypes
import os
import secrets
from collections.abc import Generator, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from modelhost.backends.llama_cpp import chat as chat_template
from modelhost.backends.llama_cpp.batch import LlamaBatchEngine
from modelhost.backends.llama_cpp.memory import read_header
from modelhost.backends.llama_cpp.model import LlamaCppModel, TokenChooser
from modelhost.errors import (
    GenerationError,
    InvalidInputError,
    ModelLoadError,
    UnsupportedAttachmentError,
)
from modelhost.inference import chat_tools, images
from modelhost.inference.decoding import SequenceDecoder
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import Admission, Message, SlotOutput, StepReport, Token, has_images

#: Largest ratio of an image's long side to its short side. Preprocessors scale the long side to a fixed edge
#: (Idefics3: `clip.vision.preproc_image_size`, 64 in the tiny test model, 512+ in real ones) and the short side
#: with it; a side scaled below one pixel makes llama.cpp assert and abort the process. 64:1 keeps every known
#: preprocessor at two pixels or more; a real page is never that thin.
MAX_ASPECT_RATIO = 64

#: Text the chat template writes for an image part, tried in order; the first that appears exactly once per image
#: is replaced with the media marker. Idefics3/SmolVLM/granite-docling write `<image>`.
IMAGE_PLACEHOLDERS = ("<image>", "<|image|>", "<start_of_image>", "<|image_pad|>", "[IMG]")

#: Tokens each projector's image template looks up in the vocabulary (llama.cpp tools/mtmd/mtmd.cpp). A missing one
#: is an assert inside mtmd_tokenize, so a model lacking any is refused at load instead.
REQUIRED_TOKENS: dict[str, tuple[str, ...]] = {
    "idefics3": ("\n\n", "\n", "<fake_token_around_image>", "<global-img>"),
    "minicpmv": ("<image>", "</image>", "<slice>", "</slice>", "\n"),
    "step3vl": ("<im_start>", "<im_end>", "<patch_start>", "<patch_end>", "<patch_newline>"),
    "lfm2": ("<|img_thumbnail|>",),
}

#: The mtmd chunk type of text (mtmd.h: MTMD_INPUT_CHUNK_TYPE_TEXT).
_CHUNK_TEXT = 0

#: A media marker no user can guess: text that contains the marker would otherwise claim an image slot.
_MARKER = f"<__modelhost_media_{secrets.token_hex(8)}__>"


# --- finding and reading the mmproj ----------------------------------------------------------------------------


def find_mmproj(model_path: str) -> str | None:
    """The mmproj GGUF beside `model_path`: `mmproj-<stem>.gguf`, `<stem>-mmproj.gguf` or `<stem>.mmproj.gguf`,
    else the only `mmproj*.gguf` in the folder (how llama.cpp model repositories ship the pair); None if none."""
    path = Path(model_path)
    folder, stem = path.parent, path.stem
    for name in (f"mmproj-{stem}.gguf", f"{stem}-mmproj.gguf", f"{stem}.mmproj.gguf"):
        if (folder / name).is_file():
            return str(folder / name)
    found = sorted(p for p in folder.glob("mmproj*.gguf") if p.is_file() and p != path)
    return str(found[0]) if len(found) == 1 else None


def resolve_mmproj(option: str | None, model_path: str) -> str | None:
    """The mmproj file to load: the `mmproj` load option (a file, or a folder with one mmproj) or one beside the
    model; None for a text-only model."""
    if option is None:
        return find_mmproj(model_path)
    path = Path(os.path.expanduser(option))
    if path.is_dir():
        found = sorted(p for p in path.glob("*.gguf") if "mmproj" in p.name)
        if len(found) != 1:
            raise ModelLoadError(f"mmproj {option!r} is a folder with {len(found)} mmproj GGUF files; name one")
        path = found[0]
    if not path.is_file():
        raise ModelLoadError(f"mmproj {option!r} does not exist")
    return str(path)


def gguf_string(path: str, key: str) -> str | None:
    """The string value of metadata `key` in a GGUF file (None if absent or not a string), reading only the header
    (the backend's one GGUF header reader, memory.read_header)."""
    value = read_header(path, (key,)).get(key)
    return value if isinstance(value, str) else None


# --- images ------------------------------------------------------------------------------------------------------


def check_size(width: int, height: int, index: int) -> None:
    """Refuse an image mtmd could not preprocess safely, before any pixel is decoded: the contract's bounds
    (inference.images), and the aspect-ratio bound mtmd's preprocessors need."""
    images.check_size(width, height, f"image {index}")
    if max(width, height) > MAX_ASPECT_RATIO * min(width, height):
        raise InvalidInputError(f"image {index} is {width}x{height}; sides may differ by at most {MAX_ASPECT_RATIO}:1")


def rgb_pixels(image: Any, index: int) -> np.ndarray:
    """One caller image as a C-contiguous HxWx3 uint8 array (an array caller's own memory when it already is one),
    its size checked before anything is decoded."""
    pixels: np.ndarray = images.to_rgb_array(image, index)
    check_size(int(pixels.shape[1]), int(pixels.shape[0]), index)
    return pixels


# --- the projector -----------------------------------------------------------------------------------------------


class Projector:
    """An mtmd context: the mmproj's vision tower on the language model's weights."""

    def __init__(self, path: str, llm: Any, *, threads: int) -> None:
        from llama_cpp import mtmd_cpp

        self._mtmd = mtmd_cpp
        self.path = path
        try:
            arch = gguf_string(path, "general.architecture")
            self.projector_type = gguf_string(path, "clip.projector_type") or gguf_string(
                path, "clip.vision.projector_type"
            )
        except ModelLoadError as exc:
            raise ModelLoadError(f"mmproj {path!r} is not a readable GGUF file: {exc}") from exc
        if arch != "clip":
            raise ModelLoadError(f"{path!r} is not an mmproj GGUF (its architecture is {arch!r}, not 'clip')")
        _check_tokens(llm, self.projector_type or "", path)
        _quiet(mtmd_cpp)
        params = mtmd_cpp.mtmd_context_params_default()
        params.use_gpu = False
        params.n_threads = threads
        params.print_timings = False
        params.warmup = False
        params.media_marker = _MARKER.encode()
        self._ctx: Any = mtmd_cpp.mtmd_init_from_file(path.encode(), llm.model, params)
        if not self._ctx:
            raise ModelLoadError(f"llama.cpp could not load the mmproj {path!r} for this model (see its log)")
        self.vision = bool(mtmd_cpp.mtmd_support_vision(self._ctx))
        self.mrope = bool(mtmd_cpp.mtmd_decode_use_mrope(self._ctx))
        if not self.vision:
            self.close()
            raise ModelLoadError(f"the mmproj {path!r} has no vision encoder")

    @property
    def alive(self) -> bool:
        return bool(self._ctx)

    def tokenize(self, text: str, images: Sequence[np.ndarray], *, add_special: bool) -> Chunks:
        """Text with one marker per image, and the images, as mtmd chunks."""
        m = self._mtmd
        bitmaps = []
        chunks = m.mtmd_input_chunks_init()
        try:
            for pixels in images:
                height, width = int(pixels.shape[0]), int(pixels.shape[1])
                bitmap = m.mtmd_bitmap_init(width, height, pixels.ctypes.data_as(ctypes.POINTER(ctypes.c_ubyte)))
                if not bitmap:
                    raise GenerationError("llama.cpp could not allocate an image bitmap")
                bitmaps.append(bitmap)
            data = text.encode("utf-8")
            source = m.mtmd_input_text(data, len(data), add_special, True)
            array = (m.mtmd_bitmap_p_ctypes * max(1, len(bitmaps)))(*bitmaps)
            rc = m.mtmd_tokenize(self._ctx, chunks, ctypes.byref(source), array, len(bitmaps))
            if rc != 0:
                raise InvalidInputError(f"llama.cpp could not prepare the images (mtmd_tokenize status {rc})")
            result = Chunks(m, chunks)
            chunks = None
            return result
        finally:
            for bitmap in bitmaps:
                m.mtmd_bitmap_free(bitmap)
            if chunks is not None:
                m.mtmd_input_chunks_free(chunks)

    def eval(self, lctx: Any, chunks: Chunks, start: int, n_past: int, *, seq_id: int, n_batch: int) -> int:
        """Evaluate chunks[start:] at position n_past into sequence `seq_id`; return the new position."""
        m = self._mtmd
        import llama_cpp

        count = len(chunks)
        for i in range(start, count):
            # Must start at n_past: the helper's text path adds to it, its image path overwrites it.
            new_past = llama_cpp.llama_pos(n_past)
            rc = m.mtmd_helper_eval_chunk_single(
                self._ctx, lctx, chunks.get(i), n_past, seq_id, n_batch, i == count - 1, ctypes.byref(new_past)
            )
            if rc != 0:
                raise GenerationError(f"llama.cpp failed to evaluate the prompt's images (status {rc})")
            n_past = int(new_past.value)
        return n_past

    def close(self) -> None:
        ctx, self._ctx = self._ctx, None
        if ctx:
            self._mtmd.mtmd_free(ctx)


class Chunks:
    """Owned mtmd input chunks: text runs (token ids) and image runs (n tokens, n positions each)."""

    def __init__(self, mtmd: Any, handle: Any) -> None:
        self._mtmd = mtmd
        self.handle = handle
        self.kinds: list[int] = []
        self.tokens: list[list[int]] = []  # text ids of text chunks; empty for media chunks
        self.sizes: list[int] = []  # tokens per chunk
        self.positions: list[int] = []  # positions per chunk (differs from sizes under M-RoPE)
        for i in range(int(mtmd.mtmd_input_chunks_size(handle))):
            chunk = mtmd.mtmd_input_chunks_get(handle, i)
            kind = int(mtmd.mtmd_input_chunk_get_type(chunk))
            ids: list[int] = []
            if kind == _CHUNK_TEXT:
                n = ctypes.c_size_t()
                raw = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
                ids = [int(raw[j]) for j in range(n.value)]
            self.kinds.append(kind)
            self.tokens.append(ids)
            self.sizes.append(int(mtmd.mtmd_input_chunk_get_n_tokens(chunk)))
            self.positions.append(int(mtmd.mtmd_input_chunk_get_n_pos(chunk)))

    def __len__(self) -> int:
        return len(self.kinds)

    def get(self, i: int) -> Any:
        return self._mtmd.mtmd_input_chunks_get(self.handle, i)

    def free(self) -> None:
        handle, self.handle = self.handle, None
        if handle is not None:
            self._mtmd.mtmd_input_chunks_free(handle)

    def __del__(self) -> None:
        self.free()


def _quiet(mtmd: Any) -> None:
    """Route mtmd's log (several lines per image on stderr otherwise) through llama-cpp-python's logger, as llama's."""
    from llama_cpp._logger import llama_log_callback

    mtmd.mtmd_log_set(llama_log_callback, ctypes.c_void_p(0))
    mtmd.mtmd_helper_log_set(llama_log_callback, ctypes.c_void_p(0))


def _check_tokens(llm: Any, projector_type: str, path: str) -> None:
    needed = REQUIRED_TOKENS.get(projector_type, ())
    missing = [t for t in needed if _lookup(llm, t) is None]
    if missing:
        raise ModelLoadError(
            f"the mmproj {path!r} ({projector_type}) needs the tokens {missing!r} as single tokens in the language "
            "model's vocabulary, which lacks them (llama.cpp would abort on the first image)"
        )


def _lookup(llm: Any, text: str) -> int | None:
    """The token whose special-rendered piece is `text`, as mtmd's own lookup finds it; None if there is none."""
    import llama_cpp

    vocab = llm._model.vocab
    want = text.encode("utf-8")
    buf = ctypes.create_string_buffer(256)

    def piece(token: int) -> bytes:
        n = llama_cpp.llama_token_to_piece(vocab, token, buf, len(buf), 0, True)
        return buf.raw[: max(n, 0)]

    for token in llm.tokenize(want, add_bos=False, special=True):  # the usual case: it tokenizes to itself
        if piece(int(token)) == want:
            return int(token)
    for token in range(llm.n_vocab()):
        if piece(token) == want:
            return token
    return None


# --- the model ---------------------------------------------------------------------------------------------------


class VisionPrompt(list[int]):
    """A chat prompt with images: the text token ids (for the sampler's history) and the mtmd chunks to evaluate."""

    def __init__(self, chunks: Chunks) -> None:
        super().__init__(t for ids in chunks.tokens for t in ids)
        self.chunks = chunks
        self.total_tokens = sum(chunks.sizes)


class LlamaCppVisionModel(LlamaCppModel):
    """A LlamaCppModel with an mmproj: `chat()` takes images; one request at a time (`batch_slots()` is 1). Its
    ChatFeatures are the text model's: images are rendered through the same template and vocabulary."""

    def __init__(self, llm: Any, *, projector: Projector, **kwargs: Any) -> None:
        super().__init__(llm, **kwargs)
        self._projector = projector
        self.mmproj = projector.path
        if self.batch_slots() <= 1:
            self._allocate_context()  # an M-RoPE projector serves one request at a time, from this context

    def accepts_images(self) -> bool:
        """A live probe: the model is open and its mtmd context is loaded with a vision encoder."""
        return self._llm is not None and self._projector.alive and self._projector.vision

    def chat(self, messages: Sequence[Message], **opts: Any) -> Iterator[Token]:
        """Stream the reply; images go through the mmproj (checked and prepared now, computed on iteration)."""
        if not has_images(messages):
            return super().chat(messages, **opts)
        self._check_open()
        options = self._options(opts)
        return self._start(self._vision_prompt(messages, options), options)

    def batch_slots(self) -> int:
        """The `parallel` load option; 1 for an M-RoPE projector, whose positions the batch slots cannot count."""
        return 1 if self._projector.mrope else self._parallel

    def open_batch(self) -> VisionBatchEngine:
        """A continuous-batching engine whose slots also take image prompts (one slot's prefill each)."""
        self._check_open()
        return VisionBatchEngine(self, self.batch_slots())

    def close(self) -> None:
        """Free the mtmd context, then the weights and the KV cache. Idempotent."""
        if self._llm is None:
            return
        self._release_live()
        self._projector.close()
        super().close()

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + f", mmproj={self.mmproj!r})"

    # --- internals ---------------------------------------------------------------------------------------------

    def _chat_tokens(self, messages: Sequence[Message], options: GenerateOptions) -> list[int]:
        if has_images(messages):  # chat() and VisionBatchEngine.admit() take images before this is reached
            raise UnsupportedAttachmentError("images go through chat() or the vision batch engine")
        return super()._chat_tokens(messages, options)

    def _vision_prompt(self, messages: Sequence[Message], options: GenerateOptions) -> VisionPrompt:
        chat_template.check_messages(messages)
        images = [rgb_pixels(img, i) for i, img in enumerate(img for m in messages for img in m.images)]
        text = self._render_with_markers(messages, options, len(images))
        add_special = self._add_bos and self._bos >= 0 and not text.startswith(self._bos_text or "\0")
        chunks = self._projector.tokenize(text, images, add_special=add_special)
        prompt = VisionPrompt(chunks)
        if sum(chunks.positions) > self._n_ctx:
            chunks.free()
            raise InvalidInputError(
                f"the prompt with its images takes {sum(chunks.positions)} positions but the context holds "
                f"{self._n_ctx}; send fewer or smaller images, or load the model with a larger context_length"
            )
        return prompt

    def _render_with_markers(self, messages: Sequence[Message], options: GenerateOptions, n_images: int) -> str:
        """The chat template's text with the media marker where the template put each image."""
        import jinja2

        tools = options.tool_specs()
        support = chat_tools.NO_SUPPORT
        if chat_tools.needs_tools(messages, tools):
            support = chat_template.tool_support(self._template, self._bos_text, self._eos_text)
        turns, tools_variable = chat_tools.template_inputs(messages, tools, support)

        def conversation(image_part: dict[str, Any]) -> list[dict[str, Any]]:
            # Content as parts, images first: the form vision templates iterate over (as the transformers backend).
            out = []
            for m in turns:
                parts: list[dict[str, Any]] = [dict(image_part) for _ in m.images]
                text = chat_tools.text_of(m, support)
                if text:
                    parts.append({"type": "text", "text": text})
                out.append(chat_tools.turn(m, parts, support))
            return out

        variables: dict[str, Any] = {
            "bos_token": self._bos_text,
            "eos_token": self._eos_text,
            "add_generation_prompt": True,
        }
        if options.enable_thinking is not None:
            variables["enable_thinking"] = options.enable_thinking
        if tools_variable is not None:
            variables["tools"] = tools_variable
        template = chat_template._compile(self._template or chat_template.CHATML_FALLBACK)
        try:
            text = str(template.render(messages=conversation({"type": "image"}), **variables))
            for placeholder in IMAGE_PLACEHOLDERS:
                user_count = sum(m.content.count(placeholder) for m in messages)
                if text.count(placeholder) == n_images + user_count and user_count == 0:
                    return text.replace(placeholder, _MARKER)
            # A template that writes nothing recognisable for an image: put the marker in as a text part.
            text = str(template.render(messages=conversation({"type": "text", "text": _MARKER}), **variables))
        except jinja2.TemplateError as exc:
            raise InvalidInputError(f"the model's chat template failed to render: {exc}") from exc
        if text.count(_MARKER) != n_images:
            raise InvalidInputError("the model's chat template does not show where the images go")
        return text

    def _sample(self, prompt: list[int], chooser: TokenChooser, decoder: SequenceDecoder) -> Generator[int, None, None]:
        if not isinstance(prompt, VisionPrompt):
            yield from super()._sample(prompt, chooser, decoder)
            return
        llm = self._llm
        try:
            cached = self._prefill_vision(prompt)
            while True:
                token = chooser.choose(llm._ctx, -1)
                if chooser.produced == 1:
                    decoder.prefill_done(prompt.total_tokens, cached)
                yield token
                if llm.n_tokens >= self._n_ctx:
                    return
                llm.eval([token])
        finally:
            prompt.chunks.free()

    def _prefill_vision(self, prompt: VisionPrompt) -> int:
        """Evaluate the chunks, reusing the cached prefix of the text before the first image; return tokens reused."""
        llm = self._llm
        chunks = prompt.chunks
        head = chunks.tokens[0] if chunks.kinds and chunks.kinds[0] == _CHUNK_TEXT else []
        keep = 0
        if head and llm.n_tokens and not self._recurrent:
            n = min(llm.n_tokens, len(head))
            differ = np.flatnonzero(llm.input_ids[:n] != np.asarray(head[:n], dtype=np.intc))
            keep = int(differ[0]) if differ.size else n
            if len(chunks) == 1:
                keep = min(keep, len(head) - 1)
        mem = self._lib.llama_get_memory(llm.ctx)
        if keep == 0 or not self._lib.llama_memory_seq_rm(mem, -1, keep, -1):
            llm.reset()
            self._lib.llama_memory_clear(mem, True)
            keep = 0
        llm.n_tokens = keep
        start, n_past = 0, keep
        if head and keep == len(head):
            start = 1  # the whole first text chunk is cached
        elif head and keep:
            # Part of the first text chunk is cached: evaluate its tail as text, then the rest through mtmd.
            llm.eval(head[keep:])
            start, n_past = 1, len(head)
        n_past = self._projector.eval(llm.ctx, chunks, start, n_past, seq_id=0, n_batch=int(llm.n_batch))
        llm.input_ids[:n_past] = _cache_record(chunks, n_past, self._projector.mrope)
        llm.n_tokens = n_past
        return keep


def _cache_record(chunks: Chunks, n_past: int, mrope: bool) -> list[int]:
    """What a KV sequence holds after `chunks`: text ids, and -1 over image positions (never matched by a prompt)."""
    record: list[int] = []
    for kind, ids, pos in zip(chunks.kinds, chunks.tokens, chunks.positions, strict=True):
        record.extend(ids if kind == _CHUNK_TEXT else [-1] * pos)
    return [-1] * n_past if mrope or len(record) != n_past else record


class VisionBatchEngine(LlamaBatchEngine):
    """The continuous-batching engine with image prompts: an image prompt is one slot's prefill.

    Admission renders and tokenizes the prompt (images checked, preprocessed by mtmd); the step after, the slot's
    chunks (text runs, image embeddings) are evaluated into its sequence with mtmd's helper, in one go, and its
    first token is drawn; from then on it decodes in the batch like any other slot. Image prompts wait their turn
    with text prompts, oldest first, one prompt's prefill per step.
    """

    def __init__(self, model: LlamaCppVisionModel, slots: int, **kwargs: Any) -> None:
        super().__init__(model, slots, **kwargs)
        self._vmodel = model
        self._images: dict[int, VisionPrompt] = {}

    def admit(self, prompt: str | None = None, messages: Sequence[Message] = (), **opts: Any) -> Admission:
        """Take a request into a free slot; one with images gets the least recently used slot, its cache cleared."""
        if not messages or not has_images(messages):
            return super().admit(prompt, messages, **opts)
        model = self._vmodel
        model._check_open()
        self._check_open()
        options = model._options(opts)
        free = [s for s in self._slots if not s.busy]
        if not free:
            raise RuntimeError("no free slot: admit only while free_slots() > 0")
        request = model._vision_prompt(messages, options)
        slot = min(free, key=lambda s: s.last_used)
        self._lib.llama_memory_seq_rm(self._mem, slot.index, -1, -1)
        self._occupy(slot, options, request, cached=[], pending=[], prompt_tokens=request.total_tokens)
        self._images[slot.index] = request
        return Admission(slot.index, request.total_tokens, 0)

    def step(self) -> StepReport:
        """The text engine's step, then the prefill of the oldest image prompt when it is the oldest prompt waiting
        (or no text prompt took this step)."""
        report = super().step()
        waiting = sorted((s for s in self._slots if s.busy and s.index in self._images), key=lambda s: s.admitted)
        if not waiting:
            return report
        slot = waiting[0]
        texts = [s.admitted for s in self._slots if s.busy and s.pending]
        if report.prompt_tokens and texts and min(texts) < slot.admitted:
            return report  # an older text prompt is still in prefill: it goes first
        request = self._images.pop(slot.index)
        try:
            n_past = self._vmodel._projector.eval(
                self._ctx.ctx, request.chunks, 0, 0, seq_id=slot.index, n_batch=self._n_batch
            )
            slot.cached = _cache_record(request.chunks, n_past, self._vmodel._projector.mrope)
        except GenerationError as exc:
            self._lib.llama_memory_seq_rm(self._mem, slot.index, -1, -1)
            slot.cached = []
            return replace(report, outputs=(*report.outputs, self._finish(slot, None, "error", exc)))
        finally:
            request.chunks.free()
        output = self._advance(slot, -1)
        return StepReport(
            (*report.outputs, output),
            report.batch_tokens + request.total_tokens,
            report.sampled + 1,
            report.prompt_tokens + request.total_tokens,
        )

    def _finish(self, slot: Any, token: Token | None, reason: Any, error: BaseException | None = None) -> SlotOutput:
        request = self._images.pop(slot.index, None)
        if request is not None:  # cancelled (or closed) before its prefill
            request.chunks.free()
        return super()._finish(slot, token, reason, error)
