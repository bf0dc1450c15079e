"""A table set in blocks under one header, read from pixels (pixels._one_table_blocks): test_dotted_grids' page drawn
with reportlab, rasterised as a scan is (200 DPI, read at 150) and read by the real detector, layout model and
recogniser.

Found on a scan of an Italian ministry's table of municipalities (scan/scan_tablesdev_dotted_gridlines): each
province's block of rows is ruled on its own, a blank band under the block above, all under the one header. The
text path joins such blocks into one table (tables._blocks); from pixels each block's rules made a frame of its own,
read apart, so the header stayed with the first block only, and a block whose label column's box spans only its first
row, no full grid, inside the figure the layout model boxed over the page, came out as loose lines.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rapidocr")
pytest.importorskip("rapid_layout")
pytest.importorskip("reportlab")

import pypdfium2 as pdfium

from modelhost.backends.ocr import scanpage
from modelhost.backends.ocr.pixels import PixelReader
from modelhost.docengine.types import Table

from .conftest import drawn_page
from .test_dotted_grids import BLOCK_A, BLOCK_B, COLUMNS, ROW, _dotted, _header, _rows
from .test_scan_tables import READ_DPI, SCAN_DPI, scanned


def _tables(reader: PixelReader, path: Path) -> list[Table]:
    # The drawn page scanned (made at SCAN_DPI, resampled to READ_DPI) and read from its pixels alone: its tables
    doc = pdfium.PdfDocument(str(path))
    try:
        image = scanned(np.asarray(doc[0].render(scale=SCAN_DPI / 72).to_pil().convert("RGB")))
    finally:
        doc.close()
    found = scanpage.blocks(reader, reader.detect(image, READ_DPI))
    return [b.table for b in found if b.table is not None]


def test_scanned_blocks_of_one_table_under_one_header_are_one_table(reader: PixelReader, tmp_path: Path) -> None:
    """test_dotted_grids' province blocks, ruled solid (the second's name in a first row spanning two columns, so
    the other columns' rules start a row lower), under the one header, a blank band apart: one table from the pixels
    too, as from the text layer."""

    def page(c: object) -> None:
        bottom = _rows(c, _header(c, 760), [*BLOCK_A, ("", "Total", "3", "1.833", "2.786")], solid=True)
        top = bottom - 9.4
        c.drawString(COLUMNS[1] + 3, top - ROW + 3, "TERAMO")  # type: ignore[attr-defined]
        _dotted(c, COLUMNS[1], top, COLUMNS[3], top, solid=True)
        _dotted(c, COLUMNS[1], top - ROW, COLUMNS[3], top - ROW, solid=True)
        _dotted(c, COLUMNS[1], top - ROW, COLUMNS[1], top, solid=True)
        _dotted(c, COLUMNS[3], top - ROW, COLUMNS[3], top, solid=True)
        _rows(c, top - ROW, [*BLOCK_B, ("", "Total", "3", "12.631", "12.480")], solid=True)

    path = tmp_path / "blocks.pdf"
    drawn_page(path, page)
    tables = _tables(reader, path)
    assert len(tables) == 1
    assert {"PROVINCE", "Corvara", "TERAMO", "Atri", "12.631"} <= {cell.text for cell in tables[0].cells if cell.text}
