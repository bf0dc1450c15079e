"""A loaded GGUF's vocabulary: tokenizing prompts, token pieces, the special ids every part of the backend needs.

One object made at load and passed to whoever needs it (the engine, the prompt builder, the embedder), so no part
of the backend reaches into another's private members for a BOS id or a piece.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

from modelhost.backends.llama_cpp import lowlevel
from modelhost.errors import InvalidInputError
from modelhost.inference.generation import ThoughtMarkers
from modelhost.inference.prompt_checks import too_many_bytes

#: Bytes of the piece buffer tried first: every piece of a real vocabulary fits; a longer one is asked again at the
#: size llama.cpp reports.
PIECE_BUFFER = 64


class Vocab:
    """The vocabulary of a `llama_cpp.Llama` (its weights' own, independent of any context)."""

    def __init__(self, llm: Any) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self._llm = llm
        self.handle: Any = lowlevel.vocab_pointer(llm)  # for llama.cpp's C functions
        self.size: int = llm.n_vocab()
        # Every end-of-generation token the vocabulary declares (EOS, EOT, <|im_end|>, <|eom_id|> ...): a model
        # stops on whichever its template makes it emit, not only on `tokenizer.ggml.eos_token_id`.
        self.eog: frozenset[int] = frozenset(
            i for i in range(self.size) if llama_cpp.llama_vocab_is_eog(self.handle, i)
        )
        self.bos: int = llm.token_bos()
        self.add_bos: bool = bool(llama_cpp.llama_vocab_get_add_bos(self.handle))
        self.add_eos: bool = bool(llama_cpp.llama_vocab_get_add_eos(self.handle))
        self.bos_text: str = lowlevel.token_text(llm, self.bos) if self.bos >= 0 else ""
        eos = llm.token_eos()
        self.eos_text: str = lowlevel.token_text(llm, eos) if eos >= 0 else ""
        # Token pieces are fixed for the life of the vocabulary; caching them turns a ctypes call with a buffer
        # per generated token into a dict lookup.
        self._pieces: dict[int, bytes] = {}
        self._buf = ctypes.create_string_buffer(PIECE_BUFFER)
        #: The most bytes one token stands for: a text of more than `n * this` bytes has more than `n` tokens.
        self.max_token_bytes = _longest_piece(llama_cpp, self.handle, self.size)
        #: The model's thought channel (one pair of markers the vocabulary holds as single tokens), or None.
        self.think: ThoughtMarkers | None = ThoughtMarkers.find(self.single_special)

    def tokenize(self, data: bytes, *, add_bos: bool, special: bool = True) -> list[int]:
        """Token ids of `data` (UTF-8), special tokens parsed when `special`."""
        return [int(t) for t in self._llm.tokenize(data, add_bos=add_bos, special=special)]

    def encode(self, text: str, *, chat: bool, limit: int) -> list[int]:
        """Tokens for a prompt of at most `limit` tokens: special tokens parsed; BOS added as the vocabulary asks,
        never twice. InvalidInputError for a prompt over the limit (refused by its byte length before tokenising
        when that alone proves it: a 25 MiB prompt held the model thread for 10-30 s only to be refused after)."""
        if not isinstance(text, str):
            raise InvalidInputError(f"a prompt must be a string, got {type(text).__name__}")
        data = text.encode("utf-8")
        if len(data) > limit * self.max_token_bytes:
            raise too_many_bytes("prompt", len(data), limit * self.max_token_bytes)
        # A raw prompt gets the vocabulary's own BOS rule. A rendered chat template writes its own `bos_token`
        # when its model wants one, so only a template that forgot it gets one added.
        tokens = self.tokenize(data, add_bos=not chat)
        if chat and self.add_bos and self.bos >= 0 and (not tokens or tokens[0] != self.bos):
            tokens.insert(0, self.bos)
        if not tokens:
            if self.bos < 0:
                raise InvalidInputError("the prompt is empty and this model has no BOS token to start from")
            tokens = [self.bos]
        if len(tokens) > limit:
            raise InvalidInputError(
                f"the prompt has {len(tokens)} tokens but the context holds {limit}; "
                "shorten it or load the model with a larger context_length"
            )
        return tokens

    def piece(self, token: int) -> bytes:
        """The bytes token `token` stands for in generated text (control tokens: none)."""
        piece = self._pieces.get(token)
        if piece is None:
            buf = self._buf
            n = self._lib.llama_token_to_piece(self.handle, token, buf, len(buf), 0, False)
            if n < 0:  # a piece longer than the buffer: llama.cpp says how long
                buf = ctypes.create_string_buffer(-n)
                n = self._lib.llama_token_to_piece(self.handle, token, buf, len(buf), 0, False)
            piece = buf.raw[: max(n, 0)]
            self._pieces[token] = piece
        return piece

    def decode(self, ids: Sequence[int]) -> str:
        """Text of token ids; control tokens render as nothing, as in generated text."""
        return b"".join(self.piece(int(i)) for i in ids).decode("utf-8", "replace")

    def single_special(self, text: str) -> int | None:
        """The one token `text` is, parsed as special, or None when it takes several."""
        ids = self.tokenize(text.encode("utf-8"), add_bos=False)
        return ids[0] if len(ids) == 1 else None


def _longest_piece(lib: Any, vocab: Any, n_vocab: int) -> int:
    """The most bytes any one token of the vocabulary stands for (special tokens' text included, since prompts
    parse them). A text of more than `n * this` bytes has more than `n` tokens, whatever they are: the exact bound
    that refuses (or cuts, for truncation) an over-long input before the tokenizer spends seconds on it."""
    buf = ctypes.create_string_buffer(256)
    longest = 1
    for token in range(n_vocab):
        n = lib.llama_token_to_piece(vocab, token, buf, len(buf), 0, True)
        longest = max(longest, -n if n < 0 else n)
    return longest
