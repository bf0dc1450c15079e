"""Our DocTags reader against docling-core's parser: a page a model read from its pixels gives the same Markdown
either way, and what ours does not model is left to docling's.

The pages are what the `ocr` model writes (docengine.emit's DocTags of a layout: every element kind, tables with
spans, lists of both kinds, text with angle brackets and entities, pages cut short as a token bound cuts them), and
what a DocTags VLM adds (captions inside pictures and tables, charts, picture classes, two lists in a row).
"""

from __future__ import annotations

import random

import pytest

from modelhost.docengine import emit
from modelhost.docengine.types import Block, Cell, Kind, PageLayout, Table
from modelhost.documents import assemble, doctags

pytest.importorskip("docling_core")

from tests.documents.test_markdown_writer import PAGES

WIDTH, HEIGHT = 1275, 825  # a half-letter page's pixels at 150 DPI


def _doclings(tags: str) -> str:
    """The page's Markdown as the pipeline wrote it before: docling's parser (assemble.build), docling's writer."""
    import numpy as np

    page = np.full((HEIGHT, WIDTH, 3), 255, np.uint8)
    return str(assemble.build("page", [tags], [page]).export_to_markdown())


def _ours(tags: str) -> str | None:
    layout = doctags.read(tags, 1, WIDTH, HEIGHT)
    return None if layout is None else emit.markdown_page(layout)


def test_every_token_it_reads_is_one_of_doclings() -> None:
    from docling_core.types.doc.tokens import DocumentToken

    assert set(DocumentToken.get_special_tokens()) >= doctags.KNOWN


@pytest.mark.parametrize("name", PAGES)
def test_the_ocr_models_pages_read_as_doclings_parser_reads_them(name: str) -> None:
    tags = emit.doctags_page(PageLayout(1, 612.0, 792.0, PAGES[name]))
    if name == "headings and text":  # "Level <two>" is tag-shaped, and a level-7 heading no token of docling's
        assert _ours(tags) is None
        blocks = [b for b in PAGES[name] if "<" not in b.text and b.level < 6]
        tags = emit.doctags_page(PageLayout(1, 612.0, 792.0, tuple(blocks)))
    assert _ours(tags) is not None  # the ocr model's DocTags need docling's parser for neither
    assert _ours(tags) == _doclings(tags)


_WORDS = ("alpha", "snake_case", "a < b", "x > y & z", "&lt;kept&gt;", "23.", "(2)", "iv)", "•", "`t`", "a|b", "12")


def _random_page(r: random.Random) -> PageLayout:
    blocks = []
    for _ in range(r.randint(0, 12)):
        kind = r.choice(list(Kind))
        text = " ".join(r.choice(_WORDS) for _ in range(r.randint(0, 5)))
        if kind is Kind.TABLE:
            rows, cols = r.randint(1, 4), r.randint(1, 4)
            taken: set[tuple[int, int]] = set()
            cells = []
            for i in range(rows):
                for j in range(cols):
                    if (i, j) in taken:
                        continue
                    rs = 2 if i + 1 < rows and r.random() < 0.2 else 1
                    cs = 2 if j + 1 < cols and r.random() < 0.2 else 1
                    span = {(a, b) for a in range(i, i + rs) for b in range(j, j + cs)}
                    if span & taken:
                        rs = cs = 1
                        span = {(i, j)}
                    taken |= span
                    cells.append(Cell(i, j, r.choice(["", "1", "2.5", text]), rs, cs, header=i == 0))
            blocks.append(Block(kind, (10.0, 10.0, 300.0, 200.0), table=Table(rows, cols, tuple(cells))))
        else:
            marker = r.choice(["", "•", "1.", "a)"]) if kind is Kind.LIST_ITEM else ""
            level = r.randint(1, 5)
            ordered = r.random() < 0.5
            blocks.append(Block(kind, (10.0, 10.0, 300.0, 20.0), text, level, marker, ordered))
    return PageLayout(1, 612.0, 792.0, tuple(blocks))


def test_random_pages_and_pages_cut_short_read_as_doclings_parser_reads_them() -> None:
    read = 0
    for seed in range(200):
        r = random.Random(seed)
        tags = emit.doctags_page(_random_page(r))
        if seed % 4 == 0:
            tags = tags[: r.randint(0, len(tags))]  # a generation stopped at its token bound
        ours = _ours(tags)
        if ours is not None:
            read += 1
            assert ours == _doclings(tags), seed
    assert read >= 190  # "<...>"-shaped text is rare: nearly every page is read without docling


VLM_PAGES = {
    "caption in a picture": "<doctag><picture><loc_10><loc_10><loc_200><loc_200><caption><loc_10><loc_210>"
    "<loc_200><loc_220>Figure 1: a_b</caption></picture><text><loc_1><loc_1><loc_2><loc_2>after</text></doctag>",
    "caption without a place": "<doctag><picture><loc_10><loc_10><loc_200><loc_200><caption>Figure 2</caption>"
    "</picture></doctag>",
    "picture without a place": "<doctag><picture><caption>Figure 3</caption></picture></doctag>",
    "caption in a table": "<doctag><otsl><loc_1><loc_1><loc_400><loc_100><caption>Table 1</caption><ched>A<ched>B"
    "<nl><fcel>1<lcel><nl><fcel>x<ecel><nl></otsl></doctag>",
    "empty header cell": "<doctag><otsl><loc_1><loc_1><loc_400><loc_100><ched><fcel>1<nl><fcel>2<fcel>3<nl></otsl>"
    "</doctag>",
    "lists of two kinds": "<doctag><unordered_list><list_item><loc_1><loc_1><loc_9><loc_9>one</list_item>"
    "</unordered_list><ordered_list><list_item><loc_1><loc_1><loc_9><loc_9>(a) two</list_item><list_item>three"
    "</list_item></ordered_list></doctag>",
    "unclosed": "<doctag><text><loc_1><loc_1><loc_9><loc_9>kept</text><section_header_level_2><loc_1><loc_1>cut",
}

UNMODELLED = {
    "a chart": "<doctag><chart><loc_10><loc_10><loc_200><loc_200><bar_chart><fcel>a<fcel>1<nl></chart></doctag>",
    "a picture class": "<doctag><picture><loc_10><loc_10><loc_200><loc_200><logo></picture></doctag>",
    "two lists of a kind": "<doctag><unordered_list><list_item>a</list_item></unordered_list><unordered_list>"
    "<list_item>b</list_item></unordered_list></doctag>",
    "a key-value region": "<doctag><key_value_region><loc_1><loc_1><loc_9><loc_9><key_1>k</key_1><value_2>v"
    "</value_2></key_value_region></doctag>",
    "a deep heading": "<doctag><section_header_level_6><loc_1><loc_1><loc_9><loc_9>deep</section_header_level_6>"
    "</doctag>",
    "tag-shaped text": "<doctag><text><loc_1><loc_1><loc_9><loc_9>a <b> c</text></doctag>",
    "a location off the grid": "<doctag><text><loc_1><loc_1><loc_500><loc_9>x</text></doctag>",
}


@pytest.mark.parametrize("name", VLM_PAGES)
def test_a_vlms_pages_read_as_doclings_parser_reads_them(name: str) -> None:
    tags = VLM_PAGES[name]
    assert _ours(tags) is not None
    assert _ours(tags) == _doclings(tags)


@pytest.mark.parametrize("name", UNMODELLED)
def test_what_it_does_not_model_is_left_to_doclings_parser(name: str) -> None:
    assert doctags.read(UNMODELLED[name], 1, WIDTH, HEIGHT) is None
