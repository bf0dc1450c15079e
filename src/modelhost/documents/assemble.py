"""Per-page DocTags into one DoclingDocument, and that document into Markdown, JSON, HTML or DocTags.

docling-core reads the DocTags (`DocTagsDocument.from_doctags_and_image_pairs` then
`DoclingDocument.load_from_doctags`). docling is given no page image (it would encode each as a PNG only for its
size and the pictures' crops): pages are sized and pictures cropped here, as docling does it given the image, and a
JSON carries no page as a base64 PNG (megabytes per page for nothing the text needs; the page sizes stay).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from typing import Any, Final

from modelhost.documents.engine import pixel_size

#: Output formats `convert` writes, by name.
FORMATS: Final = ("md", "json", "doctags", "html")
#: The formats written from a DoclingDocument (docling's own); Markdown and DocTags are written without one.
DOCLING_FORMATS: Final = ("json", "html")

_TAG = re.compile(r"<(/?)([a-z_0-9]+)>")
#: Tokens that are not containers: locations, table cells, markers; they never need closing.
_VOID = re.compile(r"^(loc_\d+|fcel|ecel|lcel|ucel|xcel|nl|ched|rhed|srow|page_break|_.*_)$")


def repair(doctags: str) -> str:
    """A page's DocTags made whole: a cut tag dropped, open elements closed, wrapped in one `<doctag>`.

    A generation stopped by its token bound ends mid-element, or mid-tag; what it wrote before is kept (pdf-spec's
    rule), and docling then reads it instead of dropping the page.
    """
    text = doctags.strip()
    cut = text.rfind("<")
    if cut >= 0 and text.find(">", cut) < 0:
        text = text[:cut]
    body = text.removeprefix("<doctag>")
    body = body[: -len("</doctag>")] if body.endswith("</doctag>") else body
    stack: list[str] = []
    for m in _TAG.finditer(body):
        closing, name = m.group(1), m.group(2)
        if _VOID.match(name) or name == "doctag":
            continue
        if not closing:
            stack.append(name)
        elif name in stack:
            while stack and stack.pop() != name:
                pass
    return "<doctag>" + body + "".join(f"</{name}>" for name in reversed(stack)) + "</doctag>"


#: A tag-shaped run of a page's DocTags, or a lone angle bracket.
_ANGLED = re.compile(r"<[^<>]*>|[<>]")


@functools.cache
def _docling_tokens() -> frozenset[str]:
    from docling_core.types.doc.tokens import DocumentToken

    return frozenset(DocumentToken.get_special_tokens())


def escape_text(doctags: str) -> str:
    """A page's DocTags with every `<` and `>` that is not one of docling's own tokens written as an entity.

    docling-core strips anything tag-shaped from an element's text ("a <b> c" loses "<b>"), so the text must carry
    them as `&lt;`/`&gt;` when docling parses it; but a door's client (pdf-spec prints DocTags text as it is) wants
    them literal, so models send them literal and only this assembly escapes, and `_unescape` turns them back in
    the document. Text a model already escaped is left as it is. A cut tag at the very end (a generation stopped
    mid-tag) is left for `repair` to drop."""
    tokens = _docling_tokens()
    tail = doctags.rfind("<")
    cut = tail if tail >= 0 and doctags.find(">", tail) < 0 else len(doctags)
    head = _ANGLED.sub(
        lambda m: m.group(0) if m.group(0) in tokens else m.group(0).replace("<", "&lt;").replace(">", "&gt;"),
        doctags[:cut],
    )
    return head + doctags[cut:]


def build(name: str, pages: Sequence[str], images: Sequence[Any]) -> Any:
    """One DoclingDocument from each page's DocTags and pixels (same order; HxWx3 uint8 arrays or PIL images)."""
    from docling_core.types.doc.document import DoclingDocument, DocTagsDocument  # type: ignore[attr-defined]

    repaired = [repair(escape_text(p)) for p in pages]
    # docling reads a chart's data only when it has the page image: such a page (rare) gets it; every other page is
    # sized and has its pictures cropped here (_place)
    charts = ["<chart>" in tags for tags in repaired]
    given: list[Any] = [_pil(image) if chart else None for image, chart in zip(images, charts, strict=True)]
    pairs = DocTagsDocument.from_doctags_and_image_pairs(repaired, given)
    doc = DoclingDocument.load_from_doctags(pairs, document_name=name)
    for number, (image, chart) in enumerate(zip(images, charts, strict=True), 1):
        if not chart:
            _place(doc, number, image)
    for page in doc.pages.values():
        page.image = None
    _unescape(doc)
    _numbers_as_markers(doc)
    return doc


#: An ordered list item's number as the engine writes it at the start of the item's DocTags text (emit.element):
#: "23.", "4)", "(2)", "a.", "iv)".
_NUMBER = re.compile(r"^(\(?(?:\d{1,3}|[a-z]|[ivx]{1,5})[.)])\s+(?=\S)")


def _numbers_as_markers(doc: Any) -> None:
    # docling-core numbers an ordered list from 1 and keeps the item's text whole ("1. 23. If your country..."): an
    # item's printed number becomes its marker, so Markdown shows "23. If your country...".
    from docling_core.types.doc.document import ListItem  # type: ignore[attr-defined]

    for item in doc.texts:
        if isinstance(item, ListItem) and item.enumerated and (match := _NUMBER.match(item.text)):
            item.marker = match.group(1)
            item.text = item.text[match.end() :]


def _place(doc: Any, number: int, image: Any) -> None:
    # docling takes a page's size from its image, and encodes that whole image as a base64 PNG that build() then
    # drops: 0.1-0.6 s and 100-270 MB at its peak for a 6250x6250 page, for nothing but the size and the pictures'
    # crops. Given no image, docling lays the page out on a 1x1 page (its boxes relative); here the page gets its
    # size, every box the scale docling would give it, and each picture its crop, cut as docling cuts it.
    from docling_core.types.doc.base import Size
    from docling_core.types.doc.common.reference import ImageRef

    width, height = pixel_size(image)
    doc.pages[number].size = Size(width=width, height=height)
    for item in [*doc.texts, *doc.tables, *doc.pictures, *doc.key_value_items, *doc.form_items]:  # every layer's
        for prov in item.prov:
            if prov.page_no == number:
                prov.bbox = prov.bbox.resize_by_scale(width, height)
    for table in doc.tables:
        for cell in table.data.table_cells:
            if cell.bbox is not None:
                cell.bbox = cell.bbox.resize_by_scale(width, height)
    for picture in doc.pictures:
        box = next((p.bbox for p in picture.prov if p.page_no == number), None)
        if box is not None and picture.image is None:
            crop = _pil(image, (int(box.l), int(box.t), int(box.r), int(box.b)))
            picture.image = ImageRef.from_pil(image=crop, dpi=72)


def _pil(image: Any, box: tuple[int, int, int, int] | None = None) -> Any:
    # A PIL RGB image of the pixels (or of `box` in them): made only here, for a chart's page or a picture's crop.
    from PIL import Image

    if isinstance(image, Image.Image):
        return image if box is None else image.crop(box)
    import numpy as np

    if box is not None:
        left, top, right, bottom = box
        image = image[max(top, 0) : max(bottom, top + 1), max(left, 0) : max(right, left + 1)]
    return Image.fromarray(np.ascontiguousarray(image))


def join(name: str, parts: Sequence[Any]) -> Any:
    """One DoclingDocument from the documents `build` made of each page, in order (pages renumbered from 1)."""
    from docling_core.types.doc.document import DoclingDocument

    if len(parts) == 1:
        return parts[0]
    document = DoclingDocument.concatenate(list(parts))
    document.name = name
    return document


def _unescape(doc: Any) -> None:
    # `<` and `>` reach docling as entities (escape_text; the ocr model once wrote them so itself); docling keeps
    # them as they are, so they are turned back here, in the text and in every table cell.
    for item in doc.texts:
        item.text = unescape(item.text)
        item.orig = unescape(item.orig)
    for table in doc.tables:
        for cell in table.data.table_cells:
            cell.text = unescape(cell.text)


def unescape(text: str) -> str:
    """`&lt;` and `&gt;` back to `<` and `>` (the ocr model's escapes of recognised text)."""
    return text.replace("&lt;", "<").replace("&gt;", ">")


def render_doctags(pages: Sequence[str]) -> str:
    """Pages' DocTags as one document's: each made whole (`repair`), one `<doctag>` around them, the pages separated
    by `<page_break>`."""
    inner = [repair(p).removeprefix("<doctag>").removesuffix("</doctag>") for p in pages]
    return "<doctag>" + "<page_break>".join(inner) + "</doctag>\n"


def render(doc: Any, fmt: str, pages: Sequence[str] = ()) -> str:
    """The document in `fmt` (see FORMATS). `doctags` is the pages' own DocTags, joined with `<page_break>`."""
    if fmt == "md":
        return str(doc.export_to_markdown()) + "\n"
    if fmt == "json":
        return json.dumps(doc.export_to_dict(), ensure_ascii=False, indent=1) + "\n"
    if fmt == "html":
        return str(doc.export_to_html())
    if fmt == "doctags":
        return render_doctags(pages)
    raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
