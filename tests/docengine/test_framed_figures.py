"""Figures whose own ink rules "cells" (docengine/figures.drawn_within): a diagram in a frame, a circuit whose wires
close into loops, a plot in a framed panel. Their rules make a grid with labels in it, which the ruled-table finder
reads as a table; the curves and slanted paths drawn among the labels make it a figure (a picture whose labels are
its own). A ruled table holding a drawn symbol in some cells stays a table.

Found in a sweep of real documents (a journal template's framed diagram panel, an exam's circuit diagrams, a
manual's framed plot: each read as a table). Each page is drawn here with reportlab and read through the text path.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest

from modelhost.docengine.types import Kind, PageLayout

from .conftest import document_layouts, wrapped_prose

pytest.importorskip("reportlab")

PROSE = (
    "The circuit and the region shown here are described in the text that follows, where each label of the drawing "
    "is named again and its value given, so that the reader can follow the derivation step by step. "
)


def _page(tmp_path: Path, draw: Callable[[object], None]) -> list[PageLayout]:
    """A page of prose, a heading and two paragraphs, with `draw`'s drawing between them (x 150-450, y 420-600)."""
    from reportlab.pdfgen import canvas

    path = tmp_path / "page.pdf"
    c = canvas.Canvas(str(path), pagesize=(595, 842))
    c.setFont("Times-Bold", 14)
    c.drawString(72, 780, "3 The model")
    c.setFont("Times-Roman", 10)
    for top in (760, 380):
        wrapped_prose(c, PROSE * 3, top)
    draw(c)
    c.showPage()
    c.save()
    return document_layouts(path)


def _labels(c: object, places: list[tuple[float, float, str]]) -> None:
    c.setFont("Times-Italic", 10)  # type: ignore[attr-defined]
    for x, y, text in places:
        c.drawString(x, y, text)  # type: ignore[attr-defined]


def _framed_diagram(c: object) -> None:
    """A framed panel: a region bounded by curves, its boundary's parts and points labelled around it."""
    c.setLineWidth(0.5)  # type: ignore[attr-defined]
    c.rect(150, 420, 300, 180)  # type: ignore[attr-defined]
    c.setFillColorRGB(0.7, 0.8, 1.0)  # type: ignore[attr-defined]
    path = c.beginPath()  # type: ignore[attr-defined]
    path.moveTo(220, 450)
    path.curveTo(180, 500, 200, 580, 280, 570)
    path.curveTo(360, 560, 400, 520, 340, 460)
    path.curveTo(300, 430, 250, 430, 220, 450)
    c.drawPath(path, fill=1, stroke=1)  # type: ignore[attr-defined]
    c.setFillColorRGB(0, 0, 0)  # type: ignore[attr-defined]
    c.circle(300, 510, 2, fill=1)  # type: ignore[attr-defined]
    _labels(
        c,
        [
            (160, 580, "s"),
            (300, 585, "Γ1"),
            (410, 585, "Re"),
            (160, 540, "θ = 1"),
            (300, 540, "n"),
            (160, 500, "Γh"),
            (310, 505, "x"),
            (410, 470, "C"),
            (160, 460, "ξ"),
            (300, 440, "θ = −1"),
        ],
    )


def _resistor(c: object, x: float, y: float) -> None:
    """A resistor's zigzag, 24 points long, on a horizontal wire at height `y` from `x`."""
    path = c.beginPath()  # type: ignore[attr-defined]
    path.moveTo(x, y)
    for k in range(6):
        path.lineTo(x + 2 + 4 * k, y + (5 if k % 2 == 0 else -5))
    path.lineTo(x + 24, y)
    c.drawPath(path)  # type: ignore[attr-defined]


def _circuit(c: object) -> None:
    """Two loops of wire (rules) sharing a middle branch, a resistor on each top wire, a source drawn as a circle."""
    c.setLineWidth(0.6)  # type: ignore[attr-defined]
    for x0, x1 in ((150, 190), (214, 290), (314, 370)):  # the top wire, broken by the two resistors
        c.line(x0, 580, x1, 580)  # type: ignore[attr-defined]
    c.line(150, 470, 370, 470)  # type: ignore[attr-defined]
    for x in (150, 260, 370):
        c.line(x, 470, x, 580)  # type: ignore[attr-defined]
    _resistor(c, 190, 580)
    _resistor(c, 290, 580)
    c.setFillColorRGB(1, 1, 1)  # type: ignore[attr-defined]
    c.circle(150, 525, 12, fill=1)  # type: ignore[attr-defined]
    c.setFillColorRGB(0, 0, 0)  # type: ignore[attr-defined]
    _labels(
        c,
        [
            (195, 590, "R1"),
            (295, 590, "R2"),
            (165, 520, "VG"),
            (235, 520, "I1"),
            (320, 520, "I2"),
            (200, 480, "A"),
            (300, 480, "B"),
        ],
    )


def _framed_plot(c: object) -> None:
    """A framed panel holding a scatter plot's points and its margins' labels (a graphics manual's figure)."""
    c.setLineWidth(0.5)  # type: ignore[attr-defined]
    c.rect(150, 420, 300, 180)  # type: ignore[attr-defined]
    c.line(150, 480, 450, 480)  # type: ignore[attr-defined]
    c.line(230, 420, 230, 600)  # type: ignore[attr-defined]
    for k in range(30):
        c.circle(280 + 5 * k * math.cos(k), 530 + 2 * k * math.sin(k), 2.4)  # type: ignore[attr-defined]
    _labels(
        c,
        [
            (160, 585, "mar[3]"),
            (250, 585, "Plot region"),
            (160, 530, "mai[2]"),
            (250, 440, "mai[1]"),
            (380, 440, "Margin"),
            (160, 440, "x"),
            (400, 585, "y"),
        ],
    )


@pytest.mark.parametrize("draw", [_framed_diagram, _circuit, _framed_plot], ids=["diagram", "circuit", "plot"])
def test_a_figure_whose_ink_rules_cells_is_a_picture_not_a_table(
    tmp_path: Path, draw: Callable[[object], None]
) -> None:
    (layout,) = _page(tmp_path, draw)
    kinds = [b.kind for b in layout.blocks]
    assert Kind.TABLE not in kinds, [b.table for b in layout.blocks if b.table]
    assert Kind.PICTURE in kinds
    text = " ".join(b.text for b in layout.blocks)
    assert "follows, where each label" in text  # the prose is read around it


def test_a_ruled_table_with_drawn_symbols_in_its_cells_stays_a_table(tmp_path: Path) -> None:
    """A feature matrix: a ruled grid whose cells hold names and a drawn circle for "yes", one to a cell."""

    def draw(c: object) -> None:
        c.setLineWidth(0.5)  # type: ignore[attr-defined]
        xs, ys = (150, 270, 330, 390, 450), (600, 580, 560, 540, 520, 500)
        for y in ys:
            c.line(xs[0], y, xs[-1], y)  # type: ignore[attr-defined]
        for x in xs:
            c.line(x, ys[-1], x, ys[0])  # type: ignore[attr-defined]
        c.setFont("Times-Bold", 10)  # type: ignore[attr-defined]
        for x, name in zip(xs, ("Feature", "A", "B", "C"), strict=False):
            c.drawString(x + 4, 586, name)  # type: ignore[attr-defined]
        c.setFont("Times-Roman", 10)  # type: ignore[attr-defined]
        for r, (y, name) in enumerate(zip(ys[1:], ("Tables", "Figures", "Formulas", "Lists"), strict=False)):
            c.drawString(154, y - 14, name)  # type: ignore[attr-defined]
            for k, x in enumerate(xs[1:-1]):
                if (r + k) % 2 == 0:
                    c.circle(x + 30, y - 10, 3, fill=1)  # type: ignore[attr-defined]
                else:
                    c.drawString(x + 26, y - 14, "no")  # type: ignore[attr-defined]

    (layout,) = _page(tmp_path, draw)
    tables = [b.table for b in layout.blocks if b.kind is Kind.TABLE]
    assert len(tables) == 1 and tables[0] is not None and tables[0].rows == 5


def test_a_ruled_table_holding_a_chart_in_a_cell_stays_a_table(tmp_path: Path) -> None:
    """A report's ruled grid of prices with a line chart drawn in its last column's cell: hundreds of words to the
    chart's few paths, so a table (its figures read), however long the chart's curve."""

    def draw(c: object) -> None:
        c.setLineWidth(0.5)  # type: ignore[attr-defined]
        xs, ys = (72, 200, 260, 320, 520), [610 - 14 * k for k in range(13)]
        for y in ys:
            c.line(xs[0], y, xs[-1], y)  # type: ignore[attr-defined]
        for x in xs:
            c.line(x, ys[-1], x, ys[0])  # type: ignore[attr-defined]
        c.setFont("Times-Bold", 9)  # type: ignore[attr-defined]
        for x, head in zip(xs, ("Product", "Week", "Month", "Trend"), strict=False):
            c.drawString(x + 3, ys[0] - 11, head)  # type: ignore[attr-defined]
        c.setFont("Times-Roman", 9)  # type: ignore[attr-defined]
        for k, y in enumerate(ys[1:-1]):
            c.drawString(75, y - 11, f"Grade {k + 1} wheat ($/bu)")  # type: ignore[attr-defined]
            c.drawRightString(255, y - 11, f"{5 + k * 0.13:.2f}")  # type: ignore[attr-defined]
            c.drawRightString(315, y - 11, f"{5.2 + k * 0.11:.2f}")  # type: ignore[attr-defined]
        path = c.beginPath()  # type: ignore[attr-defined]
        path.moveTo(330, 500)
        for k in range(1, 30):
            path.lineTo(330 + 6 * k, 500 + 30 * math.sin(k / 3))
        c.drawPath(path)  # type: ignore[attr-defined]

    (layout,) = _page(tmp_path, draw)
    tables = [b.table for b in layout.blocks if b.kind is Kind.TABLE]
    assert len(tables) == 1 and tables[0] is not None
    assert any(cell.text == "5.13" for cell in tables[0].cells)
