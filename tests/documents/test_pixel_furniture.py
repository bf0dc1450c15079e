"""Running heads and feet on pages read from their pixels: the document-level furniture pass (docengine.furniture)
applies to them as to text-layer pages, and a page alone loses a line as furniture only for a page-number pattern
(the layout model's header/footer label alone deletes nothing: a one-page document's title set at the top edge is its
title). Pages drawn with pymupdf, converted with `text_layer=False` (every page rendered and read by the real `ocr`
model, as pdf-spec's pages arrive over the socket) or sent to the `ocr` model as pdf-spec sends them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

pymupdf = pytest.importorskip("pymupdf")
pytest.importorskip("rapidocr")

from modelhost.backends.ocr.model import OcrModel  # noqa: E402
from modelhost.backends.ocr.pixels import PixelReader, models_folder  # noqa: E402
from modelhost.documents import ConvertSettings, HostReader, convert  # noqa: E402
from modelhost.host import Host  # noqa: E402
from modelhost.inference.types import Message  # noqa: E402

#: The running foot every page carries beside its page number, as the Redbook's pages do.
FOOT = "Row and Column Access Control Support in IBM DB2 for i"
TOPICS = ("permissions", "masks", "auditing")


def book(path: Path) -> Path:
    """Three Letter pages, each a paragraph of its own and, at its foot, its page number and FOOT."""
    doc = pymupdf.open()
    for n, topic in enumerate(TOPICS, 1):
        page = doc.new_page(width=612, height=792)
        body = (
            f"Paragraph{n} about {topic}: the database manager checks the rule on every query that reads the table, "
            "so a user sees only the rows the rule lets through. "
        )
        page.insert_textbox(pymupdf.Rect(72, 90, 540, 300), body * 4, fontsize=10, fontname="helv")
        page.insert_text((63, 762), str(2 * n + 14), fontsize=9, fontname="helv")
        page.insert_text((90, 762), FOOT, fontsize=9, fontname="helv")
    doc.save(path)
    doc.close()
    return path


def test_a_running_foot_read_from_pixels_is_furniture_across_the_document(tmp_path: Path) -> None:
    # The Redbook on pixels kept its feet ("© Copyright IBM Corp. 2014...", "Row and Column Access Control Support in
    # IBM DB2 for i", the page numbers) in the text: the layout model's footer boxes missed their lines, and a page
    # alone cannot tell a running foot from a last line. Without the layout model nothing but the repetition across
    # pages tells them, which is the evidence the text path's furniture pass reads.
    model = OcrModel(PixelReader.load(layout=False), models_folder(), architecture="pp-ocr")

    async def main() -> str:
        host = Host.from_model(model, name="ocr")
        await host.start()
        try:
            settings = ConvertSettings(dpi=150, text_layer=False)
            conversion = await convert(book(tmp_path / "book.pdf"), HostReader(host), settings)
        finally:
            await host.aclose()
        assert all("<page_footer>" in p.doctags for p in conversion.pages), [p.doctags for p in conversion.pages]
        return conversion.render("md")

    markdown = asyncio.run(main())
    assert all(f"Paragraph{n} about {topic}" in markdown for n, topic in enumerate(TOPICS, 1)), markdown
    assert FOOT not in markdown and "\n16\n" not in markdown, markdown


#: A title set in the body's type at the top edge of a page, where the layout model boxes a page header.
TITLE = "Quarterly report of the northern region"
#: A running head every page of a report carries at its top edge, in the body's type.
HEAD = "Annual review of the northern waters board"
BODY = (
    "The northern region sold more timber this quarter than in any quarter before, and its mills ran at full "
    "capacity through the winter months while the southern mills stood idle for repairs. "
)


def report(path: Path, pages: int, head: str) -> Path:
    """`pages` Letter pages, each with `head` at its top edge, two paragraphs, and its page number alone at its foot."""
    doc = pymupdf.open()
    for n in range(1, pages + 1):
        page = doc.new_page(width=612, height=792)
        page.insert_text((72, 40), head, fontsize=10, fontname="helv")
        page.insert_textbox(pymupdf.Rect(72, 90, 540, 400), f"Part{n}. " + BODY * 5, fontsize=10, fontname="helv")
        page.insert_textbox(pymupdf.Rect(72, 420, 540, 700), BODY * 4, fontsize=10, fontname="helv")
        page.insert_text((300, 760), str(n + 6), fontsize=10, fontname="helv")
    doc.save(path)
    doc.close()
    return path


def pixels(path: Path, dpi: int = 150) -> np.ndarray:
    """The first page of `path` rendered as pdf-spec renders a page for the socket: RGB pixels, nothing else."""
    with pymupdf.open(path) as doc:
        pix = doc[0].get_pixmap(dpi=dpi)
    return np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.width, pix.n)[:, :, :3].copy()


def test_a_lone_pages_title_at_the_top_edge_is_kept_and_its_page_number_is_furniture(
    ocr_model: OcrModel, tmp_path: Path
) -> None:
    # Issue 34's "title deleted as a page header" on the pixel path: the layout model boxes a body-sized first line
    # at the top edge as a header, and its label alone made it <page_header>, which pdf-spec (and docling's Markdown)
    # leave out: the only copy of the line was lost. A page alone gives one evidence of furniture, a page number.
    image = pixels(report(tmp_path / "report.pdf", 1, TITLE))
    doctags = "".join(t.text for t in ocr_model.chat([Message("user", "Convert this page to docling.", (image,))]))
    assert "<page_header>" not in doctags and f">{TITLE}</text>" in doctags, doctags
    assert "<page_footer>" in doctags and doctags.count("<page_footer>") == 1, doctags
    assert ">7</page_footer>" in doctags, doctags
    markdown = "".join(t.text for t in ocr_model.chat([Message("user", "Convert this page to markdown.", (image,))]))
    assert markdown.startswith(TITLE + "\n"), markdown
    assert not markdown.rstrip().endswith("7"), markdown


def test_a_running_head_read_from_pixels_repeats_and_is_furniture(tmp_path: Path) -> None:
    # With the layout model (which boxes the head as a header on each page), the head is text on each page alone and
    # furniture across the document, where it repeats on every page; the page numbers are furniture on each page.
    model = OcrModel(PixelReader.load(), models_folder(), architecture="pp-ocr")

    async def main() -> str:
        host = Host.from_model(model, name="ocr")
        await host.start()
        try:
            settings = ConvertSettings(dpi=150, text_layer=False)
            conversion = await convert(report(tmp_path / "three.pdf", 3, HEAD), HostReader(host), settings)
        finally:
            await host.aclose()
        heads = [p.doctags for p in conversion.pages if f">{HEAD}</page_header>" not in p.doctags]
        assert not heads, heads
        return conversion.render("md")

    markdown = asyncio.run(main())
    assert all(f"Part{n}." in markdown for n in (1, 2, 3)), markdown
    assert HEAD not in markdown and not any(f"\n{n}\n" in markdown + "\n" for n in (7, 8, 9)), markdown


def test_a_running_foot_read_back_from_doctags_repeats_despite_the_grid() -> None:
    # dmca_summary read from pixels: its foot "December 1998" stands just above the bottom tenth (so only the edge
    # repetition can tell it), and read back from DocTags its three copies are 8, 9 and 10 grid steps tall (1.6 pt
    # each on a Letter page): no two within the text layer's HEIGHT_SLACK, all within a step at each edge.
    from modelhost.docengine.emit import GRID
    from modelhost.docengine.furniture import mark_furniture
    from modelhost.docengine.types import Block, Kind, PageLayout

    step = 792 / GRID
    layouts = [
        PageLayout(
            n,
            612,
            792,
            (
                Block(Kind.TEXT, (72, 100, 540, 300), f"Section {n} of the summary, a paragraph of its own."),
                Block(Kind.TEXT, (72, 320, 540, 600), "Another paragraph under it, of the body."),
                Block(Kind.TEXT, (270, 445 * step, 340, (445 + tall) * step), "December 1998"),
            ),
        )
        for n, tall in ((1, 10), (2, 8), (3, 9))
    ]
    assert all(b.kind is Kind.TEXT for page in mark_furniture(layouts) for b in page.blocks)
    marked = mark_furniture(layouts, 2 * step)
    assert [[b.kind for b in page.blocks][-1] for page in marked] == [Kind.PAGE_FOOTER] * 3
    assert all(b.kind is Kind.TEXT for page in marked for b in page.blocks[:2])


def summary_page(path: Path, under: str | None) -> Path:
    """A Letter page of two paragraphs whose running foot (a title, a date, "Page 2") stands an inch and a quarter up,
    at 0.89 of the page (outside the bottom tenth), with `under` drawn below it near the edge when given."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_textbox(pymupdf.Rect(72, 90, 540, 380), BODY * 5, fontsize=10, fontname="helv")
    page.insert_textbox(pymupdf.Rect(72, 400, 540, 660), BODY * 4, fontsize=10, fontname="helv")
    page.insert_text((110, 715), "Copyright Office Summary", fontsize=10, fontname="helv")
    page.insert_text((270, 715), "December 1998", fontsize=10, fontname="helv")
    page.insert_text((480, 715), "Page 2", fontsize=10, fontname="helv")
    if under is not None:
        page.insert_text((72, 770), under, fontsize=10, fontname="helv")
    doc.save(path)
    doc.close()
    return path


@pytest.mark.parametrize("under", [None, "Footnote 3: the office published the summary in print as well."])
def test_a_page_number_as_the_pages_last_line_above_the_bottom_tenth_is_furniture(
    tmp_path: Path, under: str | None
) -> None:
    # dmca_summary on pixels kept "Page 2" as text: its foot stands at 0.89 of the page, outside the bottom tenth, the
    # layout model labels the line text, and its number differs on every page, so nothing repeats. The text path reads
    # a lone number that is its page's last line in the bottom fifth as the page's number; so does the pixel path now.
    # Where a line stands below it, it is not the page's last and stays text (a list's or a table's lone number).
    from modelhost.backends.ocr import scanpage
    from modelhost.docengine.types import Kind

    reader = PixelReader.load(layout=False)
    try:
        blocks = scanpage.read_layout(reader, pixels(summary_page(tmp_path / "summary.pdf", under)), 150).blocks
    finally:
        reader.close()
    kinds = [b.kind for b in blocks if b.text.strip() == "Page 2"]
    assert kinds == ([Kind.PAGE_FOOTER] if under is None else [Kind.TEXT]), blocks
