"""The converted document as modelhost holds it: its pages, each page's elements and DocTags, written out as Markdown
and DocTags without docling-core.

The elements are the document engine's (`docengine.types`): a page is a `PageLayout`, its `Block`s in reading order,
each of a `Kind` (title, section header with its level, text, list item with its marker and whether it counts,
table with its cells and spans, picture, caption linked to its picture or table, page header and footer, footnote,
formula, code) with its box on the page. A text-layer page's layout is the engine's own; a page read from its pixels
gets one from the DocTags its model wrote (`doctags.read`). One writer per format: Markdown (`docengine.emit
.markdown_page`, byte for byte what docling-core writes for the same document), DocTags (each page's own, as its
reader or the engine wrote it). JSON and HTML are docling's own formats, written from a DoclingDocument built only
when they are asked for (pipeline.Conversion.document).
"""

from __future__ import annotations

from dataclasses import dataclass

from modelhost.docengine.emit import markdown_page
from modelhost.docengine.types import PageLayout
from modelhost.documents.assemble import render_doctags


@dataclass(frozen=True, slots=True)
class Page:
    """One page of the document: its number, its DocTags, its elements (`layout`), and whether it was read from its
    text layer (else from its pixels, by a model). A page whose DocTags hold what `doctags.read` does not model (a
    chart, a key-value region) has no layout but the Markdown docling-core wrote for it (`markdown`)."""

    number: int
    doctags: str
    layout: PageLayout | None = None
    text_layer: bool = False
    markdown: str = ""

    def to_markdown(self) -> str:
        """The page's Markdown: its blocks', one blank line apart ("" for a page with nothing in its body)."""
        return markdown_page(self.layout) if self.layout is not None else self.markdown


@dataclass(frozen=True, slots=True)
class Document:
    """A converted document: its name (the file's stem) and its pages in order."""

    name: str
    pages: tuple[Page, ...]

    def markdown(self) -> str:
        """The document's Markdown, as docling-core's `export_to_markdown()` writes the DoclingDocument of the same
        pages (pipeline.Conversion.document), with a final line break."""
        return "\n\n".join(part for part in (page.to_markdown() for page in self.pages) if part) + "\n"

    def doctags(self) -> str:
        """The document's DocTags: each page's, made whole (`repair`), one `<doctag>` around them, the pages
        separated by `<page_break>`."""
        return render_doctags([page.doctags for page in self.pages])
