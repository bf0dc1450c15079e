"""JSON as Go's ``encoding/json`` writes it (spec §7): compact, key order kept, Go's extra escapes, Go's floats."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Final

__all__ = ["go_float", "go_json"]


# Go's encoding/json escapes these on top of what Python's json escapes: < > & so that JSON can sit inside HTML
# (DocTags is full of them, so every delta shows it), U+2028/U+2029 because they end lines in JavaScript. Lone
# surrogates cannot occur in a Go string; Go writes invalid UTF-8 as the escape \ufffd, and so do we, rather than
# failing to encode the frame at all.
_GO_ESCAPES: Final = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_GO_ESCAPE_RE: Final = re.compile("[<>&\u2028\u2029\ud800-\udfff]")


def _go_string(text: str) -> str:
    # json.dumps(ensure_ascii=False) already matches Go (>= 1.22) for " \\ \b \f \n \r \t, other C0 controls as
    # lowercase \u00xx, raw DEL and raw "/". Only Go's extra escapes remain; they can occur only inside strings.
    out = json.dumps(text, ensure_ascii=False)
    if _GO_ESCAPE_RE.search(out):
        out = _GO_ESCAPE_RE.sub(lambda m: _GO_ESCAPES.get(m.group(), "\\ufffd"), out)
    return out


def go_float(value: float) -> str:
    """Spell a float64 exactly as Go's encoding/json does.

    Shortest round-trip digits (the same digits Python's ``repr`` picks); plain decimal (``'f'``) when
    ``1e-6 <= |x| < 1e21``, so ``0`` not ``0.0`` and ``0.0000015``; otherwise exponent form with Go's cleanup
    (``1e-7``, ``1e+21``). ``-0.0`` is ``-0``. NaN and infinities raise ValueError, as in Go: JSON cannot spell them.
    """
    if not math.isfinite(value):
        raise ValueError(f"JSON cannot represent {value!r}")
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    mantissa, _, exp_text = repr(abs(value)).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = whole + frac
    # The value is 0.<digits> * 10**point; normalise digits to no leading or trailing zeros.
    point = len(whole) + (int(exp_text) if exp_text else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    if 1e-6 <= abs(value) < 1e21:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return sign + digits + "0" * (point - len(digits))
        return f"{sign}{digits[:point]}.{digits[point:]}"
    # Exponent form. |x| < 1e-6 means an exponent <= -7 and |x| >= 1e21 one >= 21, so Go's "at least two exponent
    # digits, then drop the 0 of e-0N" comes out as the plain exponent.
    exponent = point - 1
    frac_part = f".{digits[1:]}" if len(digits) > 1 else ""
    return f"{sign}{digits[0]}{frac_part}e{'-' if exponent < 0 else '+'}{abs(exponent)}"


def _go_encode(value: object, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif isinstance(value, int):
        out.append(str(int(value)))
    elif isinstance(value, float):
        out.append(go_float(value))
    elif isinstance(value, str):
        out.append(_go_string(value))
    elif isinstance(value, Mapping):
        out.append("{")
        for i, (key, item) in enumerate(value.items()):
            if i:
                out.append(",")
            out.append(_go_string(str(key)))
            out.append(":")
            _go_encode(item, out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _go_encode(item, out)
        out.append("]")
    else:
        raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def go_json(value: object) -> bytes:
    """Serialise JSON-able Python values (dicts in insertion order) the way Go's ``json.Marshal`` would."""
    out: list[str] = []
    _go_encode(value, out)
    return "".join(out).encode("utf-8")
