"""A word processor's borderless layout tables and label/value lines on the text path (issue 34, Writer exports).

Letters, invoices and memos set their address blocks side by side, and their "Invoice no.   HLP-2026-0317" lines, in a
table with no border: blocks of text laid out side by side, not data. The text path read such a table as a data
table (each row a line across the blocks: `writer_invoice`'s "Bill to | Ship to | Invoice no. | HLP-2026-0317"),
and a bold label whose ink starts a hair under its value's on the same baseline ("To:" beside "All budget holders")
came out after its value. Pages drawn here, each of the case's class, and the corpus's Writer pages.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from modelhost.docengine.types import Kind, PageLayout

from .conftest import corpus, first_page_layout, table_blocks


def _texts(layout: PageLayout) -> list[str]:
    return [b.text for b in layout.blocks if b.kind is not Kind.TABLE]


def _index(texts: list[str], start: str) -> int:
    return next(i for i, t in enumerate(texts) if t.startswith(start))


def _layout_page(
    path: Path, blocks: list[list[str]], keys: list[tuple[str, str]], *, x_keys: float = 400, under: float = 600
) -> None:
    """Address blocks (a bold label over regular lines) side by side from x=72, 150 points apart, beside a list of
    bold keys with their values a tab away, all at one leading: the layout a borderless table of one row prints."""
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=(595, 842))
    c.setFont("Helvetica-Bold", 16)
    c.drawString(72, 780, "Harbour Lane Press")
    top = 730
    for n, block in enumerate(blocks):
        for k, line in enumerate(block):
            c.setFont("Helvetica-Bold" if k == 0 else "Helvetica", 10)
            c.drawString(72 + 150 * n, top - 13 * k, line)
    for k, (key, value) in enumerate(keys):
        c.setFont("Helvetica-Bold", 10)
        c.drawString(x_keys, top - 13 * k, key)
        c.setFont("Helvetica", 10)
        c.drawString(x_keys + 62, top - 13 * k, value)
    c.setFont("Helvetica", 10)
    c.drawString(72, under, "Payment is due within 30 days of the invoice date. Please quote the invoice number.")
    c.showPage()
    c.save()


ADDRESSES = [
    ["Bill to", "Meridian Field Studies", "Accounts Payable", "2 Orchard Row", "Exeter EX4 3QJ"],
    ["Ship to", "Meridian Field Studies", "Unit 7, Riverside Works", "Exeter EX2 8DP"],
]
KEYS = [("Invoice no.", "HLP-2026-0317"), ("Date", "12 March 2026"), ("Due date", "11 April 2026")]


def test_address_blocks_beside_key_value_lines_are_text_read_block_by_block(tmp_path: Path) -> None:
    path = tmp_path / "invoice.pdf"
    _layout_page(path, ADDRESSES, KEYS)
    layout = first_page_layout(path)
    assert table_blocks(layout) == []
    texts = _texts(layout)
    # each key with its value, on its line, one after another
    for key, value in KEYS:
        assert f"{key} {value}" in texts
    # the blocks one after another, each block's lines in its order: no line of the next block among them
    bill, ship, keys = _index(texts, "Bill to"), _index(texts, "Ship to"), _index(texts, "Invoice no.")
    assert bill < ship < keys
    joined = " ".join(texts[bill:ship])
    assert "Meridian Field Studies Accounts Payable 2 Orchard Row Exeter EX4 3QJ" in joined
    assert "Unit 7" not in joined
    # a block's bold label is no heading of the document
    assert not any(b.kind is Kind.SECTION_HEADER and b.text in ("Bill to", "Ship to") for b in layout.blocks)


def test_a_paragraph_right_under_a_layout_table_is_no_block_of_it(tmp_path: Path) -> None:
    # a block's lines run on under the table's last row (an address longer than the keys beside it), a line across
    # the page just under it does not
    path = tmp_path / "invoice.pdf"
    _layout_page(path, ADDRESSES, KEYS, under=730 - 13 * 5)
    texts = _texts(first_page_layout(path))
    assert "Payment is due within 30 days of the invoice date. Please quote the invoice number." in texts
    assert any(t.startswith("Meridian Field Studies Accounts Payable") for t in texts)


def test_two_key_value_lists_side_by_side_read_one_list_then_the_other(tmp_path: Path) -> None:
    path = tmp_path / "sheet.pdf"
    left = [("Project", "Upland peat restoration"), ("Sponsor", "River Lune Trust"), ("Start", "1 April 2026")]
    right = [("Budget", "GBP 1,240,000"), ("Area", "412 hectares"), ("Status", "On track")]
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=(595, 842))
    for k, ((lk, lv), (rk, rv)) in enumerate(zip(left, right, strict=True)):
        for x, key, value in ((72, lk, lv), (320, rk, rv)):
            c.setFont("Helvetica-Bold", 10)
            c.drawString(x, 730 - 13 * k, key)
            c.setFont("Helvetica", 10)
            c.drawString(x + 55, 730 - 13 * k, value)
    c.showPage()
    c.save()
    layout = first_page_layout(path)
    assert table_blocks(layout) == []
    texts = _texts(layout)
    assert texts == [f"{k} {v}" for k, v in [*left, *right]]


def test_a_borderless_data_table_with_a_bold_header_and_stub_stays_a_table(tmp_path: Path) -> None:
    # The counter-case: a data table set without borders bolds its header row and its first column, never a column
    # of keys further on beside values.
    path = tmp_path / "data.pdf"
    from reportlab.pdfgen import canvas

    rows = [
        ["Block", "Closed from", "Reopens", "Rooms"],
        ["North", "5 October", "16 October", "42"],
        ["East", "19 October", "30 October", "37"],
        ["South", "2 November", "13 November", "51"],
        ["West", "16 November", "27 November", "29"],
    ]
    c = canvas.Canvas(str(path), pagesize=(595, 842))
    for r, row in enumerate(rows):
        for k, cell in enumerate(row):
            c.setFont("Helvetica-Bold" if r == 0 or k == 0 else "Helvetica", 10)
            c.drawString(72 + 110 * k, 730 - 14 * r, cell)
    c.showPage()
    c.save()
    tables = table_blocks(first_page_layout(path))
    assert len(tables) == 1
    assert tables[0].table is not None and tables[0].table.rows == 5


@pytest.mark.parametrize(
    ("name", "first", "then"),
    [
        ("tables_dev/writer_invoice.pdf", "Bill to", "Ship to"),
        ("tables_dev/writer3_purchase_order.pdf", "Supplier", "Deliver to"),
        ("tables_dev/writer3_project_sheet.pdf", "Project Upland peat restoration", "Budget GBP 1,240,000"),
    ],
)
def test_writer_layout_tables_read_as_text(name: str, first: str, then: str) -> None:
    layout = first_page_layout(corpus(name))
    texts = _texts(layout)
    assert _index(texts, first) < _index(texts, then)
    # the one table left on the page, if any, is the line items' grid
    assert all(t.table is not None and t.table.cols == 5 for t in table_blocks(layout))


def test_a_bold_label_reads_before_its_value_on_its_line() -> None:
    # writer_currency_memo: "To:" (bold, its ink 0.3 points under its value's) beside "All budget holders"
    texts = _texts(first_page_layout(corpus("tables_dev/writer_currency_memo.pdf")))
    for label, value in [("To:", "All budget holders"), ("From:", "Treasury Office"), ("Date:", "2 March 2026")]:
        assert _index(texts, label) < _index(texts, value)


def test_a_label_whose_ink_starts_under_its_values_reads_first(tmp_path: Path) -> None:
    # the class: a label set smaller than its value (a memo's 10-point bold labels beside 12-point values) on one
    # baseline: the value's ink starts higher, and the label still reads first
    from reportlab.pdfgen import canvas

    path = tmp_path / "memo.pdf"
    c = canvas.Canvas(str(path), pagesize=(595, 842))
    c.setFont("Times-Bold", 18)
    c.drawString(72, 780, "MEMORANDUM")
    lines = [("To:", "All budget holders"), ("From:", "Treasury Office"), ("Re:", "Building closures")]
    for k, (label, value) in enumerate(lines):
        c.setFont("Helvetica-Bold", 10)
        c.drawString(72, 740 - 16 * k, label)
        c.setFont("Times-Roman", 12)
        c.drawString(144, 740 - 16 * k, value)
    c.showPage()
    c.save()
    texts = _texts(first_page_layout(path))
    for label, value in lines:
        assert _index(texts, label) < _index(texts, value)
