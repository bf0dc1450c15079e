"""Figures drawn as vectors on born-digital pages (docengine/figures.py): a chart's or a diagram's labels are its
picture's, never a table, a heading or a paragraph's words; a ruled table and a boxed note stay what they are.

Each page is drawn here: prose set with reportlab around a figure matplotlib draws as vectors (its PDF placed on the
page as a form, as LaTeX and Word place a figure's PDF), then read through the text path as a document is.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pypdfium2 as pdfium
import pytest

from modelhost.docengine.types import Kind, PageLayout

from .conftest import document_layouts, wrapped_prose

plt = pytest.importorskip("matplotlib.pyplot")
pytest.importorskip("reportlab")

PROSE = (
    "The measurements reported in this section were taken over three weeks on the same instrument, and each value "
    "is the mean of five repeated runs with the spread shown as a band around the line. "
)
CAPTION = "Figure 1: The results of the experiment described above, over all runs."


def _figure_pdf(path: Path, draw: Callable[[object], None], size: tuple[float, float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    with matplotlib.rc_context({"pdf.fonttype": 42}):  # TrueType text with its Unicode map, as papers embed it
        fig = plt.figure(figsize=size)
        draw(fig)
        fig.savefig(path)
        plt.close(fig)


def _page(tmp_path: Path, draw: Callable[[object], None], size: tuple[float, float] = (5, 3)) -> list[PageLayout]:
    """A page of prose: a heading, a paragraph, the figure, its caption, a paragraph; read through the text path."""
    from reportlab.pdfgen import canvas

    page = tmp_path / "page.pdf"
    c = canvas.Canvas(str(page), pagesize=(595, 842))
    c.setFont("Times-Bold", 14)
    c.drawString(72, 780, "2 Results")
    for top in (760, 330):
        c.setFont("Times-Roman", 10)
        wrapped_prose(c, PROSE * 3, top)
    c.drawString(72, 360, CAPTION)
    c.showPage()
    c.save()
    # Into the text block, between the first paragraph and the caption.
    return document_layouts(_placed(tmp_path, page, draw, size, (72, 375, 450, 300)))


def _placed(
    tmp_path: Path,
    page: Path,
    draw: Callable[[object], None],
    size: tuple[float, float],
    frame: tuple[float, float, float, float],
) -> Path:
    """`page` with the figure `draw` makes placed as a form, scaled into `frame` (left, bottom, width, height)."""
    figure = tmp_path / "figure.pdf"
    _figure_pdf(figure, draw, size)
    out = tmp_path / "placed.pdf"
    doc = pdfium.PdfDocument(str(page))
    src = pdfium.PdfDocument(str(figure))
    try:
        placed = src.page_as_xobject(0, doc).as_pageobject()
        width, height = src[0].get_size()
        scale = min(frame[2] / width, frame[3] / height)
        placed.transform(pdfium.PdfMatrix().scale(scale, scale).translate(frame[0], frame[1]))
        target = doc[0]
        target.insert_obj(placed)
        target.gen_content()
        doc.save(str(out))
    finally:
        src.close()
        doc.close()
    return out


def _line_plot(fig: object) -> None:
    import numpy as np

    ax = fig.subplots()  # type: ignore[attr-defined]
    x = np.linspace(0, 10, 100)
    ax.plot(x, np.sin(x), label="Baseline model")
    ax.plot(x, np.cos(x), label="Proposed method")
    ax.set_xlabel("Training epochs")
    ax.set_ylabel("Validation loss")
    ax.legend()


def _bars(fig: object) -> None:
    ax = fig.subplots()  # type: ignore[attr-defined]
    ax.bar(["Alpha", "Beta", "Gamma", "Delta"], [3, 5, 2, 4], label="Year one")
    ax.set_ylabel("Mean score")
    ax.set_title("Scores by group")
    ax.legend()


def _scatter(fig: object) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    ax = fig.subplots()  # type: ignore[attr-defined]
    for label in ("Control group", "Treated group", "Placebo arm"):
        ax.scatter(rng.normal(size=30), rng.normal(size=30), label=label)
    ax.legend()
    ax.set_xlabel("First component")


def _panels(fig: object) -> None:
    import numpy as np

    x = np.linspace(0, 5, 50)
    for k, ax in enumerate(fig.subplots(2, 2).flat):  # type: ignore[attr-defined]
        ax.plot(x, x ** (k + 1) / 10)
        ax.set_title(f"({'abcd'[k]}) Order {k + 1}")
        ax.set_xlabel("Time (s)")
    fig.tight_layout()  # type: ignore[attr-defined]


def _heatmap(fig: object) -> None:
    import numpy as np

    ax = fig.subplots()  # type: ignore[attr-defined]
    data = np.arange(16).reshape(4, 4) * 1.5
    ax.imshow(data)
    names = ["North", "South", "East", "West"]
    ax.set_xticks(range(4), names)
    ax.set_yticks(range(4), names)
    for i in range(4):
        for j in range(4):
            ax.text(j, i, f"{data[i, j]:.1f}", ha="center", va="center")


def _diagram(fig: object) -> None:
    from matplotlib.patches import FancyBboxPatch

    ax = fig.subplots()  # type: ignore[attr-defined]
    ax.axis("off")
    boxes = [("Input image", 0.05), ("Encoder", 0.3), ("Attention block", 0.55), ("Decoder output", 0.8)]
    for name, x in boxes:
        ax.add_patch(FancyBboxPatch((x, 0.4), 0.17, 0.2, boxstyle="round,pad=0.02", fill=False))
        ax.text(x + 0.085, 0.5, name, ha="center", va="center")
    for (_, a), (_, b) in itertools.pairwise(boxes):
        ax.annotate("", xy=(b, 0.5), xytext=(a + 0.17, 0.5), arrowprops={"arrowstyle": "->"})


FIGURES = {
    "line plot": (_line_plot, (5, 3), ["Baseline", "Proposed", "Training epochs"]),
    "bar chart": (_bars, (5, 3), ["Alpha", "Gamma", "Scores by group", "Year one"]),
    "scatter with a legend": (_scatter, (5, 3), ["Control group", "Placebo arm", "First component"]),
    "panels (a) to (d)": (_panels, (6, 4.5), ["Order 1", "Time (s)"]),
    "annotated heatmap": (_heatmap, (5, 4), ["North", "South", "22.5"]),
    "boxes and arrows": (_diagram, (6, 2.5), ["Input image", "Encoder", "Attention block"]),
}


@pytest.mark.parametrize("name", list(FIGURES))
def test_a_vector_figures_labels_are_its_picture_never_tables_headings_or_text(tmp_path: Path, name: str) -> None:
    draw, size, labels = FIGURES[name]
    blocks = [b for layout in _page(tmp_path, draw, size) for b in layout.blocks]
    kinds = [b.kind for b in blocks]
    assert Kind.TABLE not in kinds  # the ticks' rows and columns are no table
    assert [b.text for b in blocks if b.kind in (Kind.SECTION_HEADER, Kind.TITLE)] == ["2 Results"]
    assert Kind.LIST_ITEM not in kinds  # "(a) Order 1" is a panel's label, no list
    texts = " ".join(b.text for b in blocks)
    assert not [label for label in labels if label in texts]
    # One picture, its caption linked, and the page's prose whole on both sides of it.
    pictures = [i for i, b in enumerate(blocks) if b.kind is Kind.PICTURE]
    assert pictures and blocks[pictures[0]].caption >= 0
    assert blocks[blocks[pictures[0]].caption].text == CAPTION
    prose = [b.text for b in blocks if b.kind is Kind.TEXT]
    assert len(prose) == 2 and all(p.startswith("The measurements") and p.endswith("around the line.") for p in prose)


def test_a_ruled_table_and_a_rounded_note_beside_a_chart_stay_a_table_and_text(tmp_path: Path) -> None:
    """A table's rules bound cells of text, and a note's rounded frame holds sentences: neither is a figure, though a
    chart stands on the same page."""
    from reportlab.lib import colors
    from reportlab.pdfgen import canvas
    from reportlab.platypus import Table, TableStyle

    page = tmp_path / "page.pdf"
    c = canvas.Canvas(str(page), pagesize=(595, 842))
    c.setFont("Times-Roman", 10)
    c.drawString(72, 780, PROSE.strip()[:90])
    table = Table(
        [["Region", "Sales", "Share"], ["North", "120", "0.4"], ["South", "80", "0.3"], ["East", "95", "0.3"]]
    )
    table.setStyle(TableStyle([("GRID", (0, 0), (-1, -1), 0.5, colors.black)]))
    table.wrapOn(c, 400, 200)
    table.drawOn(c, 72, 680)
    c.roundRect(72, 580, 450, 70, 8)
    c.drawString(80, 630, "Note: every value in this report is the mean of five runs on the same instrument,")
    c.drawString(80, 616, "and the spread of the runs is given in the appendix with each of the raw values.")
    c.drawString(72, 120, CAPTION)
    c.showPage()
    c.save()
    blocks = document_layouts(_placed(tmp_path, page, _line_plot, (5, 3), (72, 140, 450, 300)))[0].blocks
    tables = [b for b in blocks if b.kind is Kind.TABLE]
    assert len(tables) == 1 and tables[0].table is not None
    assert [cell.text for cell in tables[0].table.cells][:3] == ["Region", "Sales", "Share"]
    assert [b.kind for b in blocks].count(Kind.PICTURE) == 1  # the chart's, its labels in it
    assert "Baseline" not in " ".join(b.text for b in blocks)
    assert any(b.kind is Kind.TEXT and b.text.startswith("Note: every value") for b in blocks)


def test_small_panels_in_one_column_of_two_are_one_picture_and_the_other_column_reads_on(tmp_path: Path) -> None:
    """Four panels a column wide (axes 27 points tall, labels 7 points): a two-column paper's figure. Its labels are
    the picture's; the prose of both columns stays whole."""
    from reportlab.pdfgen import canvas

    page = tmp_path / "page.pdf"
    c = canvas.Canvas(str(page), pagesize=(612, 792))
    c.setFont("Times-Roman", 10)
    words = (PROSE * 12).split()
    for x, skip in ((54, (560, 380)), (318, None)):
        y, line, i = 740, "", 0
        while i < len(words) and y > 60:
            if skip and skip[0] >= y >= skip[1]:
                y = skip[1] - 12
                continue
            if c.stringWidth(f"{line} {words[i]}", "Times-Roman", 10) > 240:
                c.drawString(x, y, line.strip())
                y, line = y - 12, ""
            line += f" {words[i]}"
            i += 1
    c.drawString(54, 392, CAPTION[:48])
    c.showPage()
    c.save()
    blocks = document_layouts(_placed(tmp_path, page, _panels, (3.4, 2.4), (54, 405, 240, 160)))[0].blocks
    assert [b.kind for b in blocks].count(Kind.PICTURE) == 1
    assert not [b for b in blocks if b.kind in (Kind.LIST_ITEM, Kind.SECTION_HEADER, Kind.TABLE)]
    assert not [b for b in blocks if "Order" in b.text or "Time (s)" in b.text]
    right = [b for b in blocks if b.kind is Kind.TEXT and b.bbox[0] > 300]
    assert len(right) == 1 and right[0].text.startswith("The measurements") and len(right[0].text.split()) > 300


def test_a_caution_sign_beside_a_paragraph_leaves_the_paragraph_whole(tmp_path: Path) -> None:
    """A warning triangle drawn as a path with "!" and a tiny "CAUTION" under it, in a paragraph's margin, the
    paragraph running on under the sign (as IRS instructions set it): the sign's "labels" would be the paragraph's
    lines, so it is no figure and the paragraph reads whole."""
    from reportlab.pdfgen import canvas

    page = tmp_path / "page.pdf"
    c = canvas.Canvas(str(page), pagesize=(612, 792))
    path = c.beginPath()
    path.moveTo(404, 700)
    path.lineTo(430, 700)
    path.lineTo(417, 726)
    path.close()
    c.drawPath(path, stroke=1, fill=0)
    inner = c.beginPath()  # the sign's face inside its border, as the IRS draws it
    inner.moveTo(408, 703)
    inner.lineTo(426, 703)
    inner.lineTo(417, 721)
    inner.close()
    c.setFillGray(0.8)
    c.drawPath(inner, stroke=0, fill=1)
    c.setFillGray(0)
    c.setFont("Helvetica-Bold", 9.5)
    c.drawString(415, 710, "!")
    c.setFont("Helvetica", 4.8)
    c.drawString(404, 694, "CAUTION")
    c.setFont("Times-Roman", 9.5)
    text = [
        (433, 722, "Nonresident aliens who make"),
        (433, 710, "this election may forfeit the right"),
        (433, 698, "to claim benefits otherwise"),
        (402, 686, "available under a U.S. tax treaty. For"),
        (402, 674, "more details, see the specific treaty."),
    ]
    for x, y, line in text:
        c.drawString(x, y, line)
    c.setFont("Times-Roman", 9.5)
    c.drawString(72, 500, PROSE.strip()[:100])  # the page's body, so the paragraph above is not all it holds
    c.showPage()
    c.save()
    blocks = document_layouts(page)[0].blocks
    assert not any(b.kind is Kind.PICTURE for b in blocks)
    joined = " ".join(b.text for b in blocks)
    assert "may forfeit the right" in joined and "to claim benefits otherwise available" in joined
