"""A face is monospaced by how its characters advance, not by its name (textlayer._fixed_pitch).

Found on a printed web page (the USGS's file formats, tables_dev/gnis_file_formats): it is set in ArialUnicodeMS, whose
name holds "code", one of the name fragments that mark typewriter faces, so every word was taken for code and the page
came out as code blocks with its italic words run together.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from modelhost.docengine.textlayer import _fixed_pitch
from modelhost.docengine.types import Kind, Word

from .conftest import document_layouts

DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")

#: A proportional face's advance per character, in ems, by letter (narrow, round, wide).
_ADVANCE = {**dict.fromkeys("ilt.,", 0.28), **dict.fromkeys("aeorsn", 0.55)}


def _claimed(text: str, font: str, y: float, even: bool, size: float = 10.0) -> Word:
    """A word of a face its name or flags call monospaced, advancing `even`ly (0.6 em a character) or not."""
    width = 0.6 * size * len(text) if even else size * sum(_ADVANCE.get(c, 0.8) for c in text)
    return Word(text, (0.0, y, width, y + size), font=font, size=size, monospace=True)


def test_a_face_named_like_a_typewriter_whose_advances_vary_is_proportional() -> None:
    words = [
        _claimed(t, "UnicodeSans", 12.0 * k, even=False)
        for k, t in enumerate(["illicit", "momentum", "little", "women", "title", "summer"])
    ]
    assert not any(w.monospace for w in _fixed_pitch(words))


def test_a_typewriter_face_stays_monospace_beside_words_that_mix_in_the_text_face() -> None:
    """texinfo's `@code{n2},`: the word's first face is the typewriter's, its comma the text face's; such words say
    nothing of the typewriter's pitch. Nor do braces, which draw past their advance (Latin Modern Mono's
    `\\begin{cvProfile}` reads 0.6 em a character where its letters read 0.525)."""
    words = [_claimed(t, "LMMono10", 12.0 * k, even=True) for k, t in enumerate(["pwilcox", "double", "int"])]
    words += [_claimed(t, "LMMono10", 40 + 12.0 * k, even=True) for k, t in enumerate(["void", "nchisq", "prob"])]
    braces = [
        Word(t, (0.0, 80.0 + 12 * k, 6.0 * len(t), 90.0 + 12 * k), font="LMMono10", size=10.0, monospace=True)
        for k, t in enumerate(["\\begin{cvProfile}", "\\cvID{John}{Doe}", "[degree=bachelor]", "{hfutthesis}"])
    ]
    mixed = [
        Word(t, (0.0, 140.0 + 12 * k, 4.4 * len(t), 150.0 + 12 * k), font="LMMono10", size=10.0, monospace=False)
        for k, t in enumerate(["n2,", "NB,", "rr,", "df,", "cc,", "ab,"])
    ]
    out = _fixed_pitch(words + braces + mixed)
    assert all(w.monospace for w in out[: len(words) + len(braces)])


@pytest.mark.skipif(not DEJAVU.exists(), reason="needs Debian's fonts-dejavu-core")
def test_prose_in_a_face_whose_name_holds_code_is_prose(tmp_path: Path) -> None:
    pytest.importorskip("reportlab")
    import pymupdf
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont
    from reportlab.pdfgen import canvas

    pdfmetrics.registerFont(TTFont("DejaVu", str(DEJAVU)))
    drawn = tmp_path / "drawn.pdf"
    c = canvas.Canvas(str(drawn), pagesize=(612, 792))
    c.setFont("DejaVu", 10)
    lines = [
        "These files are available as a national file, as files of single states, or as",
        "single states zipped into one file. Each record names a feature and the state",
        "and county it lies in, with the codes that identify them in federal standards.",
    ]
    for k, line in enumerate(lines):
        c.drawString(72, 700 - 14 * k, line)
    c.save()
    # The same page, its embedded face renamed as a producer names Arial Unicode MS: the name holds "code".
    doc = pymupdf.open(drawn)
    for xref, *_ in doc[0].get_fonts():
        doc.xref_set_key(xref, "BaseFont", "/ABCDEF+ArialUnicodeMS")
        descriptor = doc.xref_get_key(xref, "FontDescriptor")
        if descriptor[0] == "xref":
            doc.xref_set_key(int(descriptor[1].split()[0]), "FontName", "/ABCDEF+ArialUnicodeMS")
    path = tmp_path / "renamed.pdf"
    doc.save(path)
    assert "ArialUnicodeMS" in str(pymupdf.open(path)[0].get_fonts())
    (layout,) = document_layouts(path)
    assert [b.kind for b in layout.blocks] == [Kind.TEXT]
    assert "as a national file" in layout.blocks[0].text
