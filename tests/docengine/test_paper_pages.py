"""A paper's pages that hold no table and no heading where their lines only look like one: numbered display
equations in TeX's math fonts over a justified line of the column; an algorithm's pseudo-code with its line numbers
set small (algorithm2e); a body face whose descriptor's StemV says bold (Debian's builds of REVTeX's samples and R's
vignettes), which made every short line of prose a bold heading. Pages drawn here with reportlab in the TrueType
faces matplotlib ships (the text layer names them as TeX's PDFs do: cmmi10 is the math italic)."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelhost.docengine.types import Kind

from .conftest import drawn_layout, wrapped_prose

matplotlib = pytest.importorskip("matplotlib")

PROSE = (
    "The equations of motion follow from the action once the boundary terms vanish, and we write them out in full "
    "for the reader who wishes to check each step of the derivation below. "
) * 2


@pytest.fixture(scope="module", autouse=True)
def _tex_fonts() -> None:
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont

    fonts = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    for name in ("cmmi10", "cmr10"):
        pdfmetrics.registerFont(TTFont(name, str(fonts / f"{name}.ttf")))


def _math(c: object, x: float, y: float, parts: list[str]) -> None:
    """A formula set as TeX sets it: figures and brackets in the roman, letters in the math italic, and a part
    starting with "^" or "_" a 7-point superscript or subscript."""
    for part in parts:
        size, rise, text = (
            (7, 4, part[1:]) if part[0] == "^" else (7, -3, part[1:]) if part[0] == "_" else (10, 0, part)
        )
        font = "cmr10" if not text.strip("()[]=+-.,/0123456789 ") else "cmmi10"
        c.setFont(font, size)  # type: ignore[attr-defined]
        c.drawString(x, y + rise, text)  # type: ignore[attr-defined]
        x += c.stringWidth(text, font, size) + 0.4  # type: ignore[attr-defined]


def _justified(c: object, x0: float, x1: float, y: float, words: list[str]) -> None:
    """One line of `words` spread from x0 to x1, as a justified column sets a line with a long word in it."""
    widths = [c.stringWidth(w, "cmr10", 10) for w in words]  # type: ignore[attr-defined]
    gap = (x1 - x0 - sum(widths)) / (len(words) - 1)
    c.setFont("cmr10", 10)  # type: ignore[attr-defined]
    for word, width in zip(words, widths, strict=True):
        c.drawString(x0, y, word)  # type: ignore[attr-defined]
        x0 += width + gap


def _equation_array(c: object) -> None:
    # REVTeX's column (x 54-299): a paragraph, two numbered equations (a term and "=" left of the first, the second
    # aligned under its right side, the numbers flush with the column's right edge), a justified line whose long
    # word spreads its spaces to an em, and the paragraph going on.
    c.setFont("cmr10", 10)  # type: ignore[attr-defined]
    y = wrapped_prose(c, PROSE, 780, x=54, width=245) - 24
    _math(c, 66, y, ["M", " ="])
    _math(
        c, 100, y, ["ig", "^2", "_Z", "(4E", "_1", "E", "_2", ")", "^1/2", "(l", "^2", "_i", ")", "(g", "^2", "x", "(p"]
    )
    _math(c, 100, y - 15, ["x", "[", "_i", "]", "s", "_1", "x", "(p", "_1", ")."])
    c.setFont("cmr10", 10)  # type: ignore[attr-defined]
    c.drawRightString(299, y, "(7a)")  # type: ignore[attr-defined]
    c.drawRightString(299, y - 15, "(7b)")  # type: ignore[attr-defined]
    _justified(c, 54, 299, y - 34, ["Putting", "a", "\\label{#1}", "command", "right", "after", "the"])
    c.setFont("cmr10", 10)  # type: ignore[attr-defined]
    wrapped_prose(c, PROSE, y - 46, x=54, width=245)


def _aligned_array(c: object) -> None:
    # An equation array aligned at "=" over four lines, numbered on its first and last lines only (the lines between
    # carry on its right side), then a justified line and the paragraph.
    c.setFont("cmr10", 10)  # type: ignore[attr-defined]
    y = wrapped_prose(c, PROSE, 780, x=54, width=245) - 24
    lines = [
        (["H"], ["p", "^2", "/2m", "+", "V", "(x)"], "(3)"),
        ([], ["+", "g", "x", "^2", "y", "^2"], ""),
        ([], ["+", "k", "(x", "y", ")", "^4"], ""),
        (["E"], ["h", "w", "(n", "+", "1/2)"], "(4)"),
    ]
    for k, (left, right, number) in enumerate(lines):
        if left:
            _math(c, 80, y - 15 * k, left)
            _math(c, 100, y - 15 * k, ["="])
        _math(c, 114, y - 15 * k, right)
        if number:
            c.setFont("cmr10", 10)  # type: ignore[attr-defined]
            c.drawRightString(299, y - 15 * k, number)  # type: ignore[attr-defined]
    _justified(c, 54, 299, y - 78, ["Putting", "a", "\\label{#1}", "command", "right", "after", "the"])
    c.setFont("cmr10", 10)  # type: ignore[attr-defined]
    wrapped_prose(c, PROSE, y - 90, x=54, width=245)


@pytest.mark.parametrize("draw", [_equation_array, _aligned_array], ids=lambda d: d.__name__)
def test_numbered_equations_over_a_justified_line_are_no_table(tmp_path: Path, draw: object) -> None:
    layout = drawn_layout(tmp_path / "equations.pdf", draw)
    assert [b for b in layout.blocks if b.kind is Kind.TABLE] == []
    text = " ".join(b.text for b in layout.blocks if b.kind is Kind.TEXT)
    assert "Putting a \\label{#1} command right after the" in text


def test_a_body_face_bold_by_its_stemv_alone_makes_no_short_line_a_heading(tmp_path: Path) -> None:
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont

    fonts = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    # The body face's descriptor written with StemV 151 (pdfium reads weight 744), as those builds write CMR10's; the
    # heading face is bold by its name.
    body = TTFont("BodyStemV151", str(fonts / "DejaVuSerif.ttf"))
    body.face.stemV = 151
    pdfmetrics.registerFont(body)
    pdfmetrics.registerFont(TTFont("DejaVuSerif-Bold", str(fonts / "DejaVuSerif-Bold.ttf")))
    text = "The results of the survey are set out below, region by region, with the figures of the year before. " * 4

    def draw(c: object) -> None:
        c.setFont("DejaVuSerif-Bold", 12)  # type: ignore[attr-defined]
        c.drawString(72, 780, "1 Introduction")  # type: ignore[attr-defined]
        c.setFont("BodyStemV151", 10)  # type: ignore[attr-defined]
        y = wrapped_prose(c, text, 760)
        # a line of its own between two paragraphs, as prose stands between two code chunks in a vignette
        c.drawString(72, y - 24, "and one more line of the text")  # type: ignore[attr-defined]
        wrapped_prose(c, text, y - 48)

    layout = drawn_layout(tmp_path / "stemv.pdf", draw)
    headings = [b.text for b in layout.blocks if b.kind in (Kind.TITLE, Kind.SECTION_HEADER)]
    assert headings == ["1 Introduction"]
    assert any(b.kind is Kind.TEXT and b.text == "and one more line of the text" for b in layout.blocks)


ALGORITHM = [
    (0, "Data: a graph G and a source s"),
    (0, "Result: the distance of every node from s"),
    (0, "for each node v of G do"),
    (1, "d(v) := infinity;"),
    (0, "end"),
    (0, "d(s) := 0; put s in the queue Q;"),
    (0, "while Q is not empty do"),
    (1, "take the first node u out of Q;"),
    (1, "for each neighbour w of u do"),
    (2, "if d(w) is infinity then"),
    (3, "d(w) := d(u) + 1;"),
    (3, "put w in Q;"),
    (2, "end"),
    (1, "end"),
    (0, "end"),
]


def test_pseudo_code_with_small_line_numbers_is_no_table(tmp_path: Path) -> None:
    # algorithm2e's layout: the line numbers in 7-point bold flush left, the pseudo-code in 10-point roman indented
    # by its blocks, a comment's end flush right on some lines.
    def draw(c: object) -> None:
        c.setFont("Times-Roman", 10)  # type: ignore[attr-defined]
        y = wrapped_prose(c, PROSE, 780) - 24
        for k, (depth, line) in enumerate(ALGORITHM):
            c.setFont("Helvetica-Bold", 7)  # type: ignore[attr-defined]
            c.drawRightString(100, y - 12 * k, str(k + 1))  # type: ignore[attr-defined]
            c.setFont("Times-Roman", 10)  # type: ignore[attr-defined]
            c.drawString(120 + 15 * depth, y - 12 * k, line)  # type: ignore[attr-defined]
            if k % 4 == 1:
                c.drawRightString(500, y - 12 * k, "*/")  # type: ignore[attr-defined]
        c.setFont("Times-Roman", 10)  # type: ignore[attr-defined]
        wrapped_prose(c, PROSE, y - 12 * len(ALGORITHM) - 20)

    layout = drawn_layout(tmp_path / "algorithm.pdf", draw)
    assert [b for b in layout.blocks if b.kind is Kind.TABLE] == []
    assert "while Q is not empty do" in " ".join(b.text for b in layout.blocks)
