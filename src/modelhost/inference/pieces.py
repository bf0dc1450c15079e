"""Token ids to the exact bytes they stand for, so the shared decode loop can join characters split across tokens.

`tokenizer.decode([id])` is not enough: a byte-level token holding half of "é" decodes to U+FFFD, and the two halves
decoded separately never become "é" again. The shared loop wants bytes and assembles UTF-8 itself, so this module
undoes each tokenizer family's own text encoding of bytes:

- byte-level BPE (GPT-2, Llama 3, SmolLM2, Qwen): every byte is spelled as one printable character;
- SentencePiece-style (Llama 2, Mistral, Gemma): "▁" is a space and a byte fallback token is spelled "<0xE2>".

Special tokens (end of turn, image placeholders) show nothing; added tokens that are not special (`<think>`, DocTags
tags in some checkpoints) show their text, as `decode(skip_special_tokens=True)` would.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

_BYTE_FALLBACK = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2's printable spelling of the 256 bytes, inverted (character -> byte)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return {c: b for b, c in chars.items()}


def _decoder_kinds(tokenizer: Any) -> set[str]:
    """The decoder types of a fast tokenizer ("ByteLevel", "ByteFallback", "Replace", ...), nested ones included."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return set()
    decoder = json.loads(backend.to_str()).get("decoder") or {}
    kinds: set[str] = set()
    stack = [decoder]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("type"), str):
                kinds.add(node["type"])
            stack.extend(node.get("decoders") or [])
    return kinds


def token_bytes(tokenizer: Any) -> Callable[[int], bytes]:
    """A function from token id to its bytes for this tokenizer, memoised per id."""
    special = {int(i) for i in getattr(tokenizer, "all_special_ids", ()) or ()}
    added = {int(i): tok.content for i, tok in (getattr(tokenizer, "added_tokens_decoder", None) or {}).items()}
    kinds = _decoder_kinds(tokenizer)
    alphabet = _byte_level_alphabet() if "ByteLevel" in kinds else None
    sentencepiece = alphabet is None and bool(kinds & {"ByteFallback", "Metaspace", "Replace"})
    cache: dict[int, bytes] = {}

    def spell(token_id: int) -> bytes:
        if token_id in special:
            return b""
        if token_id in added:
            return str(added[token_id]).encode("utf-8")
        piece = tokenizer.convert_ids_to_tokens(token_id)
        if not isinstance(piece, str):
            return b""
        if alphabet is not None:
            if all(c in alphabet for c in piece):
                return bytes(alphabet[c] for c in piece)
            return piece.encode("utf-8")  # not byte-level spelled (a hand-edited vocabulary): take it as text
        if sentencepiece:
            match = _BYTE_FALLBACK.match(piece)
            if match:
                return bytes([int(match.group(1), 16)])
            return piece.replace("▁", " ").encode("utf-8")
        # Unknown family (WordPiece, a slow tokenizer): decode alone; rare, and right for whole-character tokens.
        return str(tokenizer.decode([token_id], skip_special_tokens=True)).encode("utf-8")

    def piece(token_id: int) -> bytes:
        found = cache.get(token_id)
        if found is None:
            found = cache[token_id] = spell(token_id)
        return found

    return piece
