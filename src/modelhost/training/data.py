"""Training data: JSONL files of records, and padding-aware batches of their token form. No torch, no backend.

The record shapes (messages, prompt/completion, text), `Example` (token ids and, for each, whether it is trained
on) and IGNORE are the contract's (modelhost.inference.examples), so a backend reads them without importing this
package. Tokenising is the backend's job (`ExampleEncoder.encode_example`): it knows the tokenizer and the
template. This module reads files and cuts batches.
"""

from __future__ import annotations

import json
import math
import os
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from modelhost.errors import InvalidInputError
from modelhost.inference.examples import IGNORE, Example, ExampleEncoder, record_kind

# The contract's four names are re-exported: callers of this package find everything about training data here.
__all__ = [
    "IGNORE",
    "MAX_DATA_BYTES",
    "MAX_RECORD_BYTES",
    "SORT_WINDOW_BATCHES",
    "Example",
    "ExampleEncoder",
    "batches_per_epoch",
    "epoch_batches",
    "fixed_batches",
    "read_jsonl",
    "record_kind",
    "split_eval",
    "stream_batches",
]

#: How many batches' worth of shuffled examples are sorted by length together before they are cut into batches.
#: Sorting the whole set would put every long example in the last batches (and make every epoch alike); sorting
#: a window this size keeps the padding small and the order still random.
SORT_WINDOW_BATCHES = 16

#: Largest JSONL record (one line): a 50 MB record was tokenised whole (tens of millions of token ids as Python
#: ints) and took the server out of memory, for an example truncated to the context anyway. 4 MiB is over 100,000
#: tokens of any text, more than any context a trainable model here has.
MAX_RECORD_BYTES = 4 << 20
#: Largest training (or evaluation) file: every record is held in memory as Python objects (several times its
#: bytes) and tokenised up front. 256 MiB is tens of millions of tokens, days of training on this machine class.
MAX_DATA_BYTES = 256 << 20


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """The records of a JSONL file, each checked; errors name the line. Blank lines are skipped.

    Read a line at a time, each line bounded by MAX_RECORD_BYTES and the file by MAX_DATA_BYTES: a hostile file
    costs at most one record's bytes to refuse."""
    records: list[dict[str, Any]] = []
    try:
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            if size > MAX_DATA_BYTES:
                raise InvalidInputError(f"{path}: {size} bytes; a training file may have at most {MAX_DATA_BYTES}")
            for number, raw in enumerate(iter(lambda: file.readline(MAX_RECORD_BYTES + 1), b""), 1):
                if len(raw) > MAX_RECORD_BYTES:
                    raise InvalidInputError(f"{path}:{number}: a record may have at most {MAX_RECORD_BYTES} bytes")
                record = _parse_record(raw, f"{path}:{number}")
                if record is not None:
                    records.append(record)
    except OSError as exc:
        raise InvalidInputError(f"{path}: cannot read it: {exc}") from exc
    if not records:
        raise InvalidInputError(f"{path}: no training records")
    return records


def _parse_record(raw: bytes, where: str) -> dict[str, Any] | None:
    """One line as a checked record; None for a blank line."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{where}: not UTF-8 text: {exc}") from exc
    if not line.strip():
        return None
    try:
        record = json.loads(line)
    except ValueError as exc:
        raise InvalidInputError(f"{where}: not JSON: {exc}") from exc
    except RecursionError:
        # `[` x100000 exhausts the decoder's recursion: uncaught it was a 500 for what is the file's own fault.
        raise InvalidInputError(f"{where}: JSON nested too deeply") from None
    try:
        record_kind(record)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{where}: {exc}") from exc
    return dict(record)


def split_eval(records: Sequence[Any], fraction: float, seed: int) -> tuple[list[Any], list[Any]]:
    """(train, eval): a seeded random `fraction` of the records held out (at least one, never all)."""
    if fraction <= 0 or len(records) < 2:
        return list(records), []
    order = list(range(len(records)))
    random.Random(seed).shuffle(order)
    held = min(len(records) - 1, max(1, round(len(records) * fraction)))
    chosen = set(order[:held])
    return [r for i, r in enumerate(records) if i not in chosen], [r for i, r in enumerate(records) if i in chosen]


def batches_per_epoch(examples: int, batch_size: int) -> int:
    """Batches one pass over `examples` makes (the last may be short)."""
    return math.ceil(examples / batch_size)


def epoch_batches(examples: Sequence[Example], batch_size: int, rng: random.Random) -> list[list[Example]]:
    """One epoch of batches: shuffled, then sorted by length within windows so each batch pads little.

    Every example appears exactly once. The batch order is shuffled again after sorting, so long batches are not
    all together (a steady memory and time per step).
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    order = list(range(len(examples)))
    rng.shuffle(order)
    window = batch_size * SORT_WINDOW_BATCHES
    result: list[list[Example]] = []
    for start in range(0, len(order), window):
        chunk = sorted(order[start : start + window], key=lambda i: len(examples[i].ids))
        result.extend([examples[i] for i in chunk[j : j + batch_size]] for j in range(0, len(chunk), batch_size))
    rng.shuffle(result)
    return result


def stream_batches(examples: Sequence[Example], batch_size: int, seed: int) -> Iterator[list[Example]]:
    """Epoch after epoch of `epoch_batches`, forever; the same seed gives the same order."""
    if not examples:
        raise InvalidInputError("no training examples")
    rng = random.Random(seed)
    while True:
        yield from epoch_batches(examples, batch_size, rng)


def fixed_batches(examples: Sequence[Example], batch_size: int) -> list[list[Example]]:
    """Batches in a fixed, length-sorted order (evaluation: no randomness, little padding)."""
    ordered = sorted(examples, key=lambda e: len(e.ids))
    return [list(ordered[i : i + batch_size]) for i in range(0, len(ordered), batch_size)]
