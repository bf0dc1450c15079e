"""A page read from its pixels goes into the document model (documents/model.py) from its DocTags: Markdown and
DocTags are written from it without a DoclingDocument, byte for byte what docling-core wrote from one; JSON and HTML
still come from docling's document, which needs the page's part, kept only when the caller asks for it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from modelhost.documents import ConvertSettings, PageAnswer, assemble, convert
from modelhost.testing.pages import Page, write_pdf

#: What the `ocr` model writes for a page (docengine.emit): a heading, text with an escape docling needs, a table with
#: a spanning header, both kinds of list, a caption and its picture, furniture.
OCR_PAGE = (
    "<doctag><page_header><loc_10><loc_5><loc_200><loc_12>Running head</page_header>\n"
    "<section_header_level_1><loc_10><loc_20><loc_300><loc_30>1 Results_and more</section_header_level_1>\n"
    "<text><loc_10><loc_40><loc_480><loc_60>If a < b then x > y & z.</text>\n"
    "<otsl><loc_10><loc_70><loc_480><loc_150><ched>Name<ched>Q1<lcel><nl><fcel>a<fcel>1<fcel>2.5<nl></otsl>\n"
    "<unordered_list><list_item><loc_10><loc_160><loc_480><loc_170>one</list_item>\n"
    "<list_item><loc_10><loc_170><loc_480><loc_180>two</list_item></unordered_list>\n"
    "<ordered_list><list_item><loc_10><loc_190><loc_480><loc_200>23. numbered as printed</list_item></ordered_list>\n"
    "<caption><loc_10><loc_210><loc_480><loc_220>Figure 1: a chart</caption>\n"
    "<picture><loc_10><loc_230><loc_480><loc_400></picture>\n"
    "<page_footer><loc_240><loc_490><loc_260><loc_498>7</page_footer>\n</doctag>"
)
#: A VLM's page with what our reader leaves to docling's parser: a chart with its data.
CHART_PAGE = (
    "<doctag><text><loc_10><loc_10><loc_400><loc_30>Sales by year</text>"
    "<chart><loc_10><loc_40><loc_480><loc_300><bar_chart><fcel>year<fcel>sales<nl><fcel>2024<fcel>10<nl></chart>"
    "</doctag>"
)


class _Answers:
    """A page reader that answers each page with the DocTags it was given (a stand-in for a DocTags model)."""

    name = "answers"

    def __init__(self, doctags: str) -> None:
        self.doctags = doctags

    async def read(self, image: Any, *, max_tokens: int) -> PageAnswer:
        return PageAnswer(self.doctags, "stop")


@pytest.fixture(scope="module")
def scan(tmp_path_factory: pytest.TempPathFactory, page: Page) -> Path:
    return write_pdf([page], tmp_path_factory.mktemp("scan") / "scan.pdf")


def _doclings_markdown(doctags: str, scan: Path) -> str:
    from modelhost.docengine.source import Source

    with Source(scan) as source:
        image = source.render(1, ConvertSettings().dpi).image
    return assemble.render(assemble.build("scan", [doctags], [image]), "md")


@pytest.mark.parametrize("doctags", [OCR_PAGE, CHART_PAGE], ids=["ocr page", "chart page"])
def test_a_read_page_is_written_as_docling_wrote_it_with_or_without_docling(doctags: str, scan: Path) -> None:
    without = asyncio.run(convert(scan, _Answers(doctags), docling=False))
    kept = asyncio.run(convert(scan, _Answers(doctags)))
    expected = _doclings_markdown(doctags, scan)
    assert without.render("md") == kept.render("md") == expected
    assert without.render("doctags") == kept.render("doctags") == assemble.render(None, "doctags", [doctags])
    assert kept.render("json") == assemble.render(kept.document, "json")
    assert ("Sales by year" if doctags is CHART_PAGE else "| a ") in expected


def test_json_of_a_read_page_needs_its_part_kept(scan: Path) -> None:
    without = asyncio.run(convert(scan, _Answers(OCR_PAGE), docling=False))
    assert without.content.pages[0].layout is not None  # read by our reader: no docling part was made
    with pytest.raises(ValueError, match="page 1 was read from its pixels"):
        without.render("json")


def test_a_read_page_is_read_from_its_doctags_once(scan: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without docling, the page's elements read back from its DocTags to see whether a part is needed are the ones
    the document is made of: the reader runs once a page, not again at assembly."""
    from modelhost.documents import doctags, pipeline

    calls: list[int] = []

    def counted(text: str, number: int, width: float, height: float) -> Any:
        calls.append(number)
        return doctags.read(text, number, width, height)

    monkeypatch.setattr(pipeline, "read_page", lambda page: counted(page.doctags, page.number, *page.size))
    conversion = asyncio.run(convert(scan, _Answers(OCR_PAGE), docling=False))
    assert calls == [1]
    assert "| a " in conversion.render("md")
