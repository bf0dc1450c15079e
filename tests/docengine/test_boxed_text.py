"""Text drawn in boxes and notes in the margin, read as text (issue 34's "boxed and shaded text is text").

Found in a sweep of 48 real PDFs nobody here had seen (texlive-science-doc, texlive-humanities-doc, r-cran-* vignettes):
- a code listing in a shaded box with rounded corners (listings' and tcolorbox's frames: four small corner curves,
  the sides as rules, the shading per line) was read as a figure and its code lost;
- a stack of titled boxes (a file's name in a title bar over its contents, each box's frame and body drawn as paths
  across the whole stack's width) was read as one figure and its text lost;
- a documented source's macro names set in the margin beside the paragraphs that describe them were read as a table
  of two columns, the names and the paragraphs' lines (five documents).
Each page is drawn here with reportlab and read through the text path.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from modelhost.docengine.types import Kind, PageLayout

from .conftest import document_layouts, wrapped_prose

pytest.importorskip("reportlab")

PROSE = (
    "The settings below are read when the package is loaded, and each can be changed later in the document by the "
    "commands that this section describes, one after the other, with an example of each. "
)
CODE = [
    "\\lstdefinestyle{sas-more-keywords}{%",
    "morekeywords={SASAUTOS,LABEL},",
    "morekeywords={PROC,INSIGHT,SCATTER,QUIT},",
    "morekeywords={DISCRIM,WCOV,WSSCP,METHOD},",
    "morekeywords={DATALINES,WITH,OPTIONS},",
    "}",
]


def _page(tmp_path: Path, draw: Callable[[object], None]) -> list[PageLayout]:
    """A page with a heading and two paragraphs of prose, and `draw`'s boxes between them (y 420-600)."""
    from reportlab.pdfgen import canvas

    path = tmp_path / "page.pdf"
    c = canvas.Canvas(str(path), pagesize=(595, 842))
    c.setFont("Times-Bold", 14)
    c.drawString(72, 780, "4.2 Extra keywords")
    c.setFont("Times-Roman", 10)
    wrapped_prose(c, PROSE * 3, 760)
    wrapped_prose(c, PROSE * 3, 380)
    draw(c)
    c.showPage()
    c.save()
    return document_layouts(path)


def _text(layouts: list[PageLayout]) -> str:
    return " ".join(b.text for page in layouts for b in page.blocks if b.kind is not Kind.PICTURE)


def _rounded_listing(c: object) -> None:
    """listings' shaded frame: each line's shading a rectangle, the sides rules, each corner a curve of its own."""
    x0, x1, top, bottom, r = 80.0, 515.0, 600.0, 510.0, 3.0
    c.setFillColorRGB(0.93, 0.93, 0.93)  # type: ignore[attr-defined]
    for k in range(len(CODE)):
        y = top - 4 - (k + 1) * 13
        c.rect(x0 + 2, y, x1 - x0 - 4, 13, stroke=0, fill=1)  # type: ignore[attr-defined]
    c.setLineWidth(0.6)  # type: ignore[attr-defined]
    c.setStrokeColorRGB(0.3, 0.3, 0.3)  # type: ignore[attr-defined]
    c.line(x0, bottom + r, x0, top - r)  # type: ignore[attr-defined]
    c.line(x1, bottom + r, x1, top - r)  # type: ignore[attr-defined]
    c.line(x0 + r, top, x1 - r, top)  # type: ignore[attr-defined]
    c.line(x0 + r, bottom, x1 - r, bottom)  # type: ignore[attr-defined]
    for cx, cy, sx, sy in ((x0, top, 1, -1), (x1, top, -1, -1), (x0, bottom, 1, 1), (x1, bottom, -1, 1)):
        path = c.beginPath()  # type: ignore[attr-defined]
        path.moveTo(cx, cy + sy * r)
        path.curveTo(cx, cy + sy * r * 0.45, cx + sx * r * 0.45, cy, cx + sx * r, cy)
        c.drawPath(path, stroke=1, fill=0)  # type: ignore[attr-defined]
    c.setFillColorRGB(0, 0, 0)  # type: ignore[attr-defined]
    c.setFont("Courier", 9)  # type: ignore[attr-defined]
    for k, line in enumerate(CODE):
        c.drawString(x0 + 8, top - 4 - (k + 1) * 13 + 3.5, line)  # type: ignore[attr-defined]


def _titled_boxes(c: object) -> None:
    """Three titled boxes stacked (tcolorbox): a frame drawn as a rounded path, the body's white backdrop inside
    it 2 points in, a file's name in the title bar and its lines in the body."""
    files = [
        ("act.tex", ["\\input{content/act1_notion}", "\\input{content/act2_tp}"]),
        ("crs.tex", ["\\input{content/crs1_definitions}", "\\input{content/crs2_theoremes}"]),
        ("exos.tex", ["\\input{content/exos1_faciles}", "\\input{content/exos2_moyens}"]),
    ]
    top = 605.0
    for title, body in files:
        height = 18 + 15 * len(body) + 6
        c.setFillColorRGB(0.25, 0.25, 0.25)  # type: ignore[attr-defined]
        c.roundRect(72, top - height, 451, height, 4, stroke=0, fill=1)  # type: ignore[attr-defined]
        c.setFillColorRGB(0.97, 0.97, 0.97)  # type: ignore[attr-defined]
        c.roundRect(74, top - height + 2, 447, height - 18, 3, stroke=0, fill=1)  # type: ignore[attr-defined]
        c.setFillColorRGB(1, 1, 1)  # type: ignore[attr-defined]
        c.setFont("Helvetica-Bold", 9)  # type: ignore[attr-defined]
        c.drawString(80, top - 12, title)  # type: ignore[attr-defined]
        c.setFillColorRGB(0, 0, 0)  # type: ignore[attr-defined]
        c.setFont("Courier", 9)  # type: ignore[attr-defined]
        for k, line in enumerate(body):
            c.drawString(80, top - 32 - 15 * k, line)  # type: ignore[attr-defined]
        top -= height + 6


@pytest.mark.parametrize("draw", [_rounded_listing, _titled_boxes], ids=["rounded-listing", "titled-boxes"])
def test_boxed_code_is_text(tmp_path: Path, draw: Callable[[object], None]) -> None:
    layouts = _page(tmp_path, draw)
    kinds = [b.kind for page in layouts for b in page.blocks]
    assert Kind.PICTURE not in kinds
    text = _text(layouts)
    probes = {
        _rounded_listing: ["morekeywords={DISCRIM,WCOV,WSSCP,METHOD},"],
        _titled_boxes: ["crs.tex", "\\input{content/exos2_moyens}"],
    }[draw]
    for probe in probes:
        assert probe in text, (probe, text[:300])


def _justified(c: object, text: str, top: float, x: float, width: float, *, indent: float = 0.0) -> float:
    """`text` set as a justified paragraph (TeX's: every line but the last reaching the right edge) from baseline
    `top` down, 13.6 points apart, its first line indented by `indent`. Returns the last line's baseline."""
    font, size = c._fontname, c._fontsize  # type: ignore[attr-defined]
    rows: list[list[str]] = [[]]
    for word in text.split():
        room = width - (indent if len(rows) == 1 else 0.0)
        if rows[-1] and c.stringWidth(" ".join([*rows[-1], word]), font, size) > room:  # type: ignore[attr-defined]
            rows.append([])
        rows[-1].append(word)
    y = top
    for k, row in enumerate(rows):
        left = x + (indent if k == 0 else 0.0)
        room = width - (left - x)
        spare = room - sum(c.stringWidth(w, font, size) for w in row)  # type: ignore[attr-defined]
        gap = spare / (len(row) - 1) if k < len(rows) - 1 and len(row) > 1 else c.stringWidth(" ", font, size)  # type: ignore[attr-defined]
        for word in row:
            c.drawString(left, y, word)  # type: ignore[attr-defined]
            left += c.stringWidth(word, font, size) + gap  # type: ignore[attr-defined]
        y -= 13.6
    return y + 13.6


#: Under a paragraph, as a documented source sets them: two code lines, a sentence, a section heading, and the names
#: of three macros in the left margin (x 50-123, right-aligned 10 points short of the text block at 133), the first
#: level with a line of prose, the others with the lines of a displayed formula of sums and a product (x, baseline,
#: size, width, text: the geometry of the sweep's page, each word stretched to its width there; the words our own).
MARGIN_PAGE = [
    (148.9, 314, 9.96, 266.7, "\\newcommand*{\\allNsbut}[2][j]{\\allbut[#1]{#2}{\\Nt}}"),
    (148.9, 302, 9.96, 292.9, "\\newcommand*{\\allXsbut}[2][j]{\\allbutlastand[#1]{#2}{x}}"),
    (133.2, 283, 10.91, 14.8, "the"),
    (150.7, 283, 10.91, 15.1, "are"),
    (168.6, 283, 10.91, 51.7, "definitions"),
    (223.0, 283, 10.91, 9.7, "by"),
    (235.3, 284, 10.91, 51.5, "\\allNsbut"),
    (289.6, 283, 10.91, 18.5, "can"),
    (310.8, 283, 10.91, 54.3, "\\allXsbut,"),
    (367.8, 283, 10.91, 59.5, "respectively."),
    (133.2, 253, 11.96, 14.9, "2.7"),
    (160.1, 253, 11.96, 30.5, "this"),
    (193.6, 253, 11.96, 20.6, "the"),
    (217.2, 253, 11.96, 47.8, "settings"),
    (86.6, 233, 9.96, 36.6, "\\sumall"),
    (133.2, 232, 10.91, 7.2, "an"),
    (143.2, 232, 10.91, 7.8, "is"),
    (153.7, 232, 10.91, 42.4, "loaded"),
    (198.8, 232, 10.91, 9.5, "by"),
    (211.0, 232, 10.91, 34.5, "changed"),
    (248.3, 232, 10.91, 25.5, "read"),
    (276.5, 232, 10.91, 18.5, "can"),
    (297.7, 232, 10.91, 42.9, "settings"),
    (343.3, 232, 10.91, 22.4, "that"),
    (368.4, 232, 10.91, 10.1, "is"),
    (50.0, 220, 9.96, 73.2, "\\sumallbutlast"),
    (81.4, 206, 9.96, 41.8, "\\prodall"),
    (173.0, 198, 10.91, 15.2, "X"),
    (177.9, 215, 7.97, 5.3, "C"),
    (174.8, 188, 7.97, 11.5, "i=1"),
    (190.0, 201, 10.91, 5.5, "x"),
    (195.4, 200, 7.97, 2.2, "i"),
    (201.2, 201, 10.91, 7.3, "="),
    (211.5, 201, 10.91, 5.5, "1"),
    (227.9, 201, 10.91, 10.3, "be"),
    (249.0, 201, 10.91, 5.5, "x"),
    (254.5, 200, 7.97, 5.3, "C"),
    (263.3, 201, 10.91, 7.3, "="),
    (273.7, 201, 10.91, 5.5, "1"),
    (281.6, 204, 10.91, 7.3, "−"),
    (291.3, 198, 10.91, 15.2, "X"),
    (291.6, 215, 7.97, 14.6, "C−1"),
    (293.1, 188, 7.97, 11.5, "i=1"),
    (308.3, 201, 10.91, 5.5, "x"),
    (313.7, 200, 7.97, 2.2, "i"),
    (327.4, 201, 10.91, 10.3, "by"),
    (348.5, 201, 10.91, 7.9, "G"),
    (359.4, 201, 10.91, 7.3, "="),
    (369.8, 198, 10.91, 15.2, "X"),
    (374.7, 215, 7.97, 5.3, "C"),
    (371.5, 188, 7.97, 12.1, "j=1"),
    (386.8, 201, 10.91, 6.7, "μ"),
    (393.7, 199, 7.97, 2.8, "j"),
    (397.0, 201, 10.91, 6.1, "n"),
    (403.3, 199, 7.97, 2.8, "j"),
    (417.5, 201, 10.91, 18.5, "one"),
    (446.8, 201, 10.91, 7.5, "K"),
    (457.3, 201, 10.91, 7.3, "="),
    (467.6, 198, 10.91, 15.6, "Y"),
    (472.8, 215, 7.97, 5.3, "C"),
    (469.0, 188, 7.97, 12.9, "k=1"),
    (485.0, 201, 10.91, 4.8, "a"),
    (489.9, 207, 7.97, 4.0, "ν"),
    (493.8, 205, 5.98, 2.7, "k"),
    (489.9, 197, 7.97, 3.6, "k"),
    (497.5, 201, 10.91, 2.7, "."),
]


def test_margin_notes_beside_paragraphs_are_no_table(tmp_path: Path) -> None:
    """Names in the margin beside the text block are no table's first column: the text block's lines start at x 133
    (the prose above), the names stand wholly left of it, and the "columns" right of them hold prose."""
    from reportlab.pdfgen import canvas

    path = tmp_path / "page.pdf"
    c = canvas.Canvas(str(path), pagesize=(595, 842))
    c.setFont("Times-Roman", 10.91)
    _justified(c, PROSE * 4, 760, 133, 405)
    _justified(c, PROSE * 3, 560, 133, 405, indent=17)
    for x, y, size, width, word in MARGIN_PAGE:
        text = c.beginText(x, y)
        text.setFont("Times-Roman", size)
        text.setHorizScale(100 * width / c.stringWidth(word, "Times-Roman", size))
        text.textOut(word)
        c.drawText(text)
    c.showPage()
    c.save()
    layouts = document_layouts(path)
    assert not [b for page in layouts for b in page.blocks if b.kind is Kind.TABLE]
    words = _text(layouts).split()
    for name in ("\\sumall", "\\sumallbutlast", "\\prodall", "respectively."):
        assert name in words
