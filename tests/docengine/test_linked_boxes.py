"""Boxes linked by lines (a UML class diagram) are a diagram, never a ruled table (figures.boxes_apart).

Found in a sweep of real documents (a data model's UML pages): each class is a box ruled into compartments (its name
over its attributes), and the lines linking the classes touch the boxes, so the whole diagram is one group of rules
that the ruled-table finder read as a sparse table of the classes' words. A table's rules close one frame around it
all, or boxes that touch each other (its cells and bands); a diagram's boxes stand a connector's length apart.
Controls: a ruled grid table, and one ruled into two blocks of columns by a double rule, stay tables.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from modelhost.docengine.types import Kind

from .conftest import document_layouts

pytest.importorskip("reportlab")

CLASSES = [
    (90, 700, "Collection", ["NID: UUID", "Feature_ID: UUID", "Scale: Int"]),
    (330, 700, "NamedFeature", ["NID: UUID", "FeatureType: Type", "RelatedNID: UUID"]),
    (90, 520, "Traversal", ["NID: UUID", "geometry: Curve"]),
    (330, 520, "ObjectMetadata", ["nid: UUID", "validity: Date", "provider: Provider"]),
]
WIDTH = 150


def _class_box(c: object, x: float, top: float, name: str, attributes: list[str]) -> tuple[float, float]:
    """A class's box: its name, a rule, its attributes; returns its bottom and its middle."""
    height = 22 + 12 * len(attributes) + 6
    c.rect(x, top - height, WIDTH, height)  # type: ignore[attr-defined]
    c.setFont("Helvetica-Bold", 8)  # type: ignore[attr-defined]
    c.drawCentredString(x + WIDTH / 2, top - 14, name)  # type: ignore[attr-defined]
    c.line(x, top - 20, x + WIDTH, top - 20)  # type: ignore[attr-defined]
    c.setFont("Helvetica", 7)  # type: ignore[attr-defined]
    for k, attribute in enumerate(attributes):
        c.drawString(x + 6, top - 32 - 12 * k, f"- {attribute}")  # type: ignore[attr-defined]
    return top - height, x + WIDTH / 2


def _diagram(tmp_path: Path) -> Path:
    from reportlab.pdfgen import canvas

    path = tmp_path / "uml.pdf"
    c = canvas.Canvas(str(path), pagesize=(595, 842))
    c.setFont("Helvetica-Bold", 12)
    c.drawString(72, 760, "3.1.5 Toponymy (external package)")
    c.setLineWidth(0.6)
    placed = [_class_box(c, x, top, name, attributes) for x, top, name, attributes in CLASSES]
    # links: across between the top boxes and the bottom boxes, and down from each top box to the one under it
    c.line(90 + WIDTH, 680, 330, 680)
    c.line(90 + WIDTH, 500, 330, 500)
    for (bottom, middle), (_, top, _, _) in zip(placed[:2], CLASSES[2:], strict=True):
        c.line(middle, bottom, middle, top)
        c.setFont("Helvetica", 6)
        c.drawString(middle + 4, (bottom + top) / 2, "+is defined by 1..*")
    c.setFont("Helvetica", 6)
    c.drawString(250, 684, "+describes 0..*")
    c.showPage()
    c.save()
    return path


def test_class_boxes_linked_by_lines_are_no_table(tmp_path: Path) -> None:
    (layout,) = document_layouts(_diagram(tmp_path))
    assert [b for b in layout.blocks if b.kind is Kind.TABLE] == []
    text = " ".join(b.text for b in layout.blocks)
    assert "NamedFeature" in text or any(b.kind is Kind.PICTURE for b in layout.blocks)


def _grid(tmp_path: Path, double: bool) -> Path:
    from reportlab.pdfgen import canvas

    path = tmp_path / "grid.pdf"
    c = canvas.Canvas(str(path), pagesize=(595, 842))
    xs = [90, 190, 290, 390, 490]
    rows = [["Station", "Rain", "Days", "Sun"], ["Aberdeen", "812", "164", "1420"], ["Bristol", "804", "148", "1541"]]
    rows += [["Cardiff", "1152", "161", "1518"], ["Durham", "656", "128", "1398"]]
    top = 700
    for k, row in enumerate(rows):
        c.setFont("Helvetica-Bold" if k == 0 else "Helvetica", 9)
        for x, text in zip(xs, row, strict=False):
            c.drawString(x + 4, top - 14 - 18 * k, text)
    for k in range(len(rows) + 1):
        c.line(xs[0], top - 18 * k, xs[-1], top - 18 * k)
    bottom = top - 18 * len(rows)
    for x in xs:
        c.line(x, top, x, bottom)
        if double and x == xs[2]:
            c.line(x + 2, top, x + 2, bottom)
    c.showPage()
    c.save()
    return path


@pytest.mark.parametrize("double", [False, True])
def test_a_ruled_grid_stays_a_table(tmp_path: Path, double: bool) -> None:
    (layout,) = document_layouts(_grid(tmp_path, double))
    tables = [b.table for b in layout.blocks if b.kind is Kind.TABLE]
    assert len(tables) == 1 and tables[0] is not None and tables[0].rows == 5
