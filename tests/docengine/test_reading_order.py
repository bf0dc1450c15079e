"""Reading order on pages of known layout, made here with reportlab: two columns of justified text whose lines share
their baselines (so pdfium's own lines run across the gutter), at several gutter widths and fonts, under a title
that spans both; a figure's caption in its column; single-column text and lists, which have no gutter to find.

Each page's sentences are numbered, so a test checks that every sentence comes out whole and in the order a reader
reads them: the left column before the right one, never a line of one column followed by a line of the other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pypdfium2 as pdfium
import pytest

from modelhost.docengine.analyse import document_style
from modelhost.docengine.lines import gutters
from modelhost.docengine.textlayer import read_text_layer
from modelhost.docengine.types import PageLayout

from .conftest import first_page_layout

#: A letter page, in points.
WIDTH, HEIGHT = 612.0, 792.0
#: The page margin, in points (one inch).
MARGIN = 72.0


def _sentences(tag: str, count: int) -> list[str]:
    """`count` distinct sentences naming their column and number, a dozen words each."""
    return [
        f"Sentence {tag}{i} of this column tells the reader about item number {i} and its nearest neighbours."
        for i in range(count)
    ]


def _two_columns(
    path: Path,
    gutter: float,
    font: str,
    size: float,
    *,
    title: str = "",
    caption: str = "",
    count: int = 14,
    top_margin: float = MARGIN,
) -> tuple[list[str], list[str]]:
    """A page of two justified columns `gutter` points apart, each one paragraph of `count` sentences, from
    `top_margin` points below the page's top; `title` set across both above them; `caption` set at the foot of the
    left column, under its text. Returns the columns' sentences (left, right)."""
    from reportlab.lib.enums import TA_JUSTIFY
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.platypus import BaseDocTemplate, Frame, FrameBreak, PageTemplate, Paragraph, Spacer

    body = ParagraphStyle("body", fontName=font, fontSize=size, leading=size * 1.2, alignment=TA_JUSTIFY)
    head = ParagraphStyle("head", fontName=font, fontSize=2 * size, leading=2.4 * size)
    column = (WIDTH - 2 * MARGIN - gutter) / 2
    top = HEIGHT - top_margin
    title_height = 6 * size if title else 0.0  # room for two lines of the title (2.4 size leading)
    frames = []
    if title:
        frames.append(Frame(MARGIN, top - title_height, WIDTH - 2 * MARGIN, title_height, id="title", showBoundary=0))
    for n in range(2):
        x = MARGIN + n * (column + gutter)
        frames.append(Frame(x, MARGIN, column, top - title_height - MARGIN, id=f"c{n}", leftPadding=0, rightPadding=0))
    doc = BaseDocTemplate(str(path), pagesize=(WIDTH, HEIGHT), pageTemplates=[PageTemplate("two", frames)])
    left, right = _sentences("L", count), _sentences("R", count)
    story: list[Any] = []
    if title:
        story += [Paragraph(title, head), FrameBreak()]
    story.append(Paragraph(" ".join(left), body))
    if caption:
        story += [Spacer(1, 2 * size), Paragraph(caption, body)]
    story += [FrameBreak(), Paragraph(" ".join(right), body)]
    doc.build(story)
    return left, right


def _text(layout: PageLayout) -> str:
    return " ".join(" ".join(b.text for b in layout.blocks).split())


def _assert_read_in_order(text: str, expected: list[str]) -> None:
    """Every sentence whole, each after the one before it."""
    at = -1
    for sentence in expected:
        found = text.find(sentence)
        assert found >= 0, f"not whole: {sentence!r} in {text[:300]!r}..."
        assert found > at, f"out of order: {sentence!r}"
        at = found


@pytest.mark.parametrize(
    ("gutter", "font", "size"),
    [
        (10.0, "Times-Roman", 10.0),  # LaTeX's narrowest \columnsep beside its type: one em
        (12.0, "Helvetica", 10.0),  # the handbook of issue 34: 1.2 em
        (18.0, "Times-Roman", 9.0),  # two ems of small type
        (36.0, "Helvetica", 11.0),  # Word's half inch
    ],
)
def test_two_columns_sharing_baselines_read_column_by_column(
    tmp_path: Path, gutter: float, font: str, size: float
) -> None:
    left, right = _two_columns(tmp_path / "two.pdf", gutter, font, size)
    _assert_read_in_order(_text(first_page_layout(tmp_path / "two.pdf")), left + right)


def test_a_title_across_both_columns_is_read_first_and_stays_whole(tmp_path: Path) -> None:
    title = "Quarterly report of the northern region"
    left, right = _two_columns(tmp_path / "titled.pdf", 14.0, "Helvetica", 10.0, title=title)
    layout = first_page_layout(tmp_path / "titled.pdf")
    text = _text(layout)
    assert text.startswith(title)
    _assert_read_in_order(text, left + right)


def test_a_caption_at_the_foot_of_the_left_column_is_read_before_the_right_column(tmp_path: Path) -> None:
    caption = "Figure 1. A caption set under the left column text, in its column."
    left, right = _two_columns(tmp_path / "caption.pdf", 14.0, "Times-Roman", 10.0, caption=caption, count=9)
    text = _text(first_page_layout(tmp_path / "caption.pdf"))
    _assert_read_in_order(text, [*left, caption, *right])


def test_columns_that_start_inside_the_top_margin_zone_keep_their_first_lines(tmp_path: Path) -> None:
    """A handbook sets its text block 40 points from the top (issue 34's amt_handbook_sample: 44): each column's
    first line is in the zone where running heads stand, but it is set at the column's own line spacing, so it is
    the column's, not a margin line read before the whole page."""
    left, right = _two_columns(tmp_path / "high.pdf", 12.0, "Times-Roman", 10.0, top_margin=40.0)
    _assert_read_in_order(_text(first_page_layout(tmp_path / "high.pdf")), left + right)


def _survey(path: Path, *, ruled_table_right: bool = False, wide_table_above: bool = False) -> list[str]:
    """A two-column survey page: numbered questions that wrap to a short last line, each followed by a short line of
    answer boxes; a ruled table at the top of the right column, or an unruled table across the page above both
    columns. Returns the questions' text (without their numbers) in reading order."""
    from reportlab.lib import colors
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.platypus import (
        BaseDocTemplate,
        Frame,
        FrameBreak,
        PageTemplate,
        Paragraph,
        Spacer,
        Table,
        TableStyle,
    )

    body = ParagraphStyle("body", fontName="Helvetica", fontSize=9, leading=11)
    question = ParagraphStyle("question", parent=body, leftIndent=18, firstLineIndent=-18)
    gutter, margin = 14.0, 54.0
    column = (WIDTH - 2 * margin - gutter) / 2
    band = 100.0 if wide_table_above else 0.0
    frames = [Frame(margin, HEIGHT - margin - band, WIDTH - 2 * margin, band, id="band")] if band else []
    for n in range(2):
        x = margin + n * (column + gutter)
        frames.append(Frame(x, margin, column, HEIGHT - 2 * margin - band, leftPadding=0, rightPadding=0, id=f"c{n}"))
    doc = BaseDocTemplate(str(path), pagesize=(WIDTH, HEIGHT), pageTemplates=[PageTemplate("survey", frames)])
    story: list[Any] = []
    if wide_table_above:
        rows = [["Ministry", "Role in drafting", "Year", "Budget share", "Staff"]]
        rows += [[f"Ministry {i}", "Lead author", "2019", "12 percent", "40"] for i in range(3)]
        story += [Table(rows), FrameBreak()]
    texts = []
    for n in range(23, 29):
        text = (
            f"If your country has a national plan for question {n}, which of the ministries listed below took part"
            " in drafting it during the last reporting period?"
        )
        texts.append(text)
        story += [Paragraph(f"{n}. {text}", question), Paragraph("[ ] Yes &nbsp; [ ] No &nbsp; [ ] Do not know", body)]
        story.append(Spacer(1, 6))
        if n == 25:
            story.append(FrameBreak())
            if ruled_table_right:
                table = Table([["Ministry", "Role", "Year"], ["Health", "Lead", "2019"], ["Finance", "Budget", "2020"]])
                table.setStyle(TableStyle([("GRID", (0, 0), (-1, -1), 0.5, colors.black)]))
                story += [table, Spacer(1, 8)]
    doc.build(story)
    return texts


@pytest.mark.parametrize(("ruled_table_right", "wide_table_above"), [(False, False), (True, False), (False, True)])
def test_a_survey_page_of_short_lines_reads_column_by_column(
    tmp_path: Path, ruled_table_right: bool, wide_table_above: bool
) -> None:
    """Its columns do not fill their width (answer boxes, wrapped questions' last lines), which is how a table's
    columns look to the order finder; the gutter found down the page's rows is what says they are columns."""
    path = tmp_path / "survey.pdf"
    questions = _survey(path, ruled_table_right=ruled_table_right, wide_table_above=wide_table_above)
    _assert_read_in_order(_text(first_page_layout(path)), questions)


def test_justified_single_column_text_and_a_list_have_no_gutter(tmp_path: Path) -> None:
    """A stretched word space never lines up down several lines, and a list marker's tab stop belongs to its line:
    neither is a gutter, so neither cuts a line."""
    from reportlab.lib.enums import TA_JUSTIFY
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.platypus import ListFlowable, Paragraph, SimpleDocTemplate

    body = ParagraphStyle("body", fontName="Times-Roman", fontSize=10, leading=12, alignment=TA_JUSTIFY)
    text = " ".join(_sentences("S", 20))
    items = [Paragraph(s, body) for s in _sentences("I", 8)]
    path = tmp_path / "single.pdf"
    SimpleDocTemplate(str(path), pagesize=(WIDTH, HEIGHT)).build(
        [Paragraph(text, body), ListFlowable(items, bulletType="1", leftIndent=24)]
    )
    document = pdfium.PdfDocument(str(path))
    try:
        content = read_text_layer(document, 0)
    finally:
        document.close()
    assert gutters(content.words, document_style([content]).body_size) == []
    _assert_read_in_order(_text(first_page_layout(path)), _sentences("S", 20) + _sentences("I", 8))
