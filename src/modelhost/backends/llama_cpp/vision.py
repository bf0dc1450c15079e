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
- Slots: an image prompt is the prefill of one slot of the model's engine (engine.py): its chunks are evaluated
  into that slot's sequence in one step, then the slot decodes beside the others. Projectors with M-RoPE positions
  (Qwen-VL) serve one request at a time, since the engine's slots count positions as tokens.

This module is the projector and the prompt's images; it knows no model and no engine (composed, not subclassed).
"""

from __future__ import annotations

import ctypes
import os
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from modelhost.backends.llama_cpp import chat as chat_template
from modelhost.backends.llama_cpp import lowlevel
from modelhost.errors import (
    GenerationError,
    InvalidInputError,
    ModelLoadError,
)
from modelhost.inference import chat_tools, images
from modelhost.inference.gguf_header import gguf_string
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import Message

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
CHUNK_TEXT = 0

#: A media marker no user can guess: text that contains the marker would otherwise claim an image slot.
MARKER = f"<__modelhost_media_{secrets.token_hex(8)}__>"


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
        params.media_marker = MARKER.encode()
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
            if kind == CHUNK_TEXT:
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
    llama_log_callback = lowlevel.log_callback()
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

    vocab = lowlevel.vocab_pointer(llm)
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
        #: The text before the first image: the part of the prompt a slot's cache can hold from an earlier one.
        self.head: list[int] = chunks.tokens[0] if chunks.kinds and chunks.kinds[0] == CHUNK_TEXT else []


def render_with_markers(
    template: str | None,
    messages: Sequence[Message],
    options: GenerateOptions,
    n_images: int,
    *,
    bos_text: str,
    eos_text: str,
) -> str:
    """The chat template's text with the media marker where the template put each image."""
    import jinja2

    inputs = chat_tools.template_inputs(
        messages, options.tool_specs(), lambda: chat_template.tool_support(template, bos_text, eos_text)
    )
    support = inputs.support

    def conversation(image_part: dict[str, Any]) -> list[dict[str, Any]]:
        # Content as parts, images first: the form vision templates iterate over (as the transformers backend).
        out = []
        for m in inputs.turns:
            parts: list[dict[str, Any]] = [dict(image_part) for _ in m.images]
            text = chat_tools.text_of(m, support)
            if text:
                parts.append({"type": "text", "text": text})
            out.append(chat_tools.turn(m, parts, support))
        return out

    variables: dict[str, Any] = {"bos_token": bos_text, "eos_token": eos_text, "add_generation_prompt": True}
    if options.enable_thinking is not None:
        variables["enable_thinking"] = options.enable_thinking
    variables.update(inputs.variables())
    compiled = chat_template.compile_template(template or chat_template.CHATML_FALLBACK)
    try:
        text = str(compiled.render(messages=conversation({"type": "image"}), **variables))
        for placeholder in IMAGE_PLACEHOLDERS:
            user_count = sum(m.content.count(placeholder) for m in messages)
            if text.count(placeholder) == n_images + user_count and user_count == 0:
                return text.replace(placeholder, MARKER)
        # A template that writes nothing recognisable for an image: put the marker in as a text part.
        text = str(compiled.render(messages=conversation({"type": "text", "text": MARKER}), **variables))
    except jinja2.TemplateError as exc:
        raise InvalidInputError(f"the model's chat template failed to render: {exc}") from exc
    if text.count(MARKER) != n_images:
        raise InvalidInputError("the model's chat template does not show where the images go")
    return text


def cache_record(chunks: Chunks, n_past: int, mrope: bool) -> list[int]:
    """What a KV sequence holds after `chunks`: text ids, and -1 over image positions (never matched by a prompt)."""
    record: list[int] = []
    for kind, ids, pos in zip(chunks.kinds, chunks.tokens, chunks.positions, strict=True):
        record.extend(ids if kind == CHUNK_TEXT else [-1] * pos)
    return [-1] * n_past if mrope or len(record) != n_past else record
