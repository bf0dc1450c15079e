"""The document engine: a PDF page's text layer (or OCR's words) to a laid-out page, then to DocTags or docling.

A leaf library: it imports nothing of modelhost but `modelhost.errors`, so the `ocr` backend and every door can use
it. The stages, each a plain function of plain data (see `types`):

    read_text_layer(pdf, index) -> PageContent      textlayer.py: words, rules, images, the layer's verdict
    analyse(content, style) -> PageLayout            analyse.py: reading order, paragraphs, tables, kinds
    mark_furniture(layouts) -> layouts               furniture.py: repeated headers, footers, page numbers
    doctags_elements(layout) -> Iterator[str]        emit.py: one DocTags element at a time, for streaming
    markdown(layouts) -> str                         emit.py: Markdown as docling-core writes it, without docling-core
    to_docling(name, layouts) -> DoclingDocument     emit.py: for JSON and HTML
"""

from typing import TYPE_CHECKING

from modelhost._lazy import exports

# `analyse` is also its module's name: importing modelhost.docengine.analyse (textlayer does) binds the package's
# attribute to that module, and a lazy `analyse` would never be asked for again (`docengine.analyse(content)` raised
# "'module' object is not callable"). The function is bound here; its module imports no more than the standard library.
from modelhost.docengine.analyse import analyse

if TYPE_CHECKING:
    from modelhost.docengine.analyse import Style, document_style
    from modelhost.docengine.emit import doctags_elements, doctags_page, markdown, to_docling
    from modelhost.docengine.furniture import mark_furniture
    from modelhost.docengine.textlayer import read_text_layer
    from modelhost.docengine.types import (
        BBox,
        Block,
        Cell,
        ImageRegion,
        Kind,
        PageContent,
        PageLayout,
        Region,
        Segment,
        Table,
        Usability,
        Word,
    )

__all__ = [
    "BBox",
    "Block",
    "Cell",
    "ImageRegion",
    "Kind",
    "PageContent",
    "PageLayout",
    "Region",
    "Segment",
    "Style",
    "Table",
    "Usability",
    "Word",
    "analyse",
    "doctags_elements",
    "doctags_page",
    "document_style",
    "mark_furniture",
    "markdown",
    "read_text_layer",
    "to_docling",
]

# Imported at first use (modelhost._lazy): the OCR model needs the pixel path, not the text layer's pypdfium2.
__getattr__ = exports(
    __name__,
    {
        "Style": "modelhost.docengine.analyse",
        "document_style": "modelhost.docengine.analyse",
        "doctags_elements": "modelhost.docengine.emit",
        "doctags_page": "modelhost.docengine.emit",
        "markdown": "modelhost.docengine.emit",
        "to_docling": "modelhost.docengine.emit",
        "mark_furniture": "modelhost.docengine.furniture",
        "read_text_layer": "modelhost.docengine.textlayer",
        "BBox": "modelhost.docengine.types",
        "Block": "modelhost.docengine.types",
        "Cell": "modelhost.docengine.types",
        "ImageRegion": "modelhost.docengine.types",
        "Kind": "modelhost.docengine.types",
        "PageContent": "modelhost.docengine.types",
        "PageLayout": "modelhost.docengine.types",
        "Region": "modelhost.docengine.types",
        "Segment": "modelhost.docengine.types",
        "Table": "modelhost.docengine.types",
        "Usability": "modelhost.docengine.types",
        "Word": "modelhost.docengine.types",
    },
)
