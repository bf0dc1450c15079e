"""Documents: PDFs and images to DocTags, Markdown, JSON and HTML through any model that reads pages.

    from modelhost.documents import HostReader, convert
    conversion = await convert("scan.pdf", HostReader(host), dpi=150)
    markdown = conversion.render("md")

Pages are rasterized with pypdfium2 (`sources`), read by a model through the host or the inferd socket
(`readers`), and their DocTags assembled into one DoclingDocument with docling-core (`assemble`); `pipeline` runs
it with pages overlapping. The `ocr` model (RapidOCR, offline) is the default reader of `modelhost convert`; a VLM
that writes DocTags (granite-docling, SmolDocling) reads pages through the same path.
"""

from modelhost.documents.assemble import FORMATS, repair
from modelhost.documents.pipeline import DEFAULT_DPI, Conversion, PageResult, convert, summary
from modelhost.documents.readers import PROMPT, HostReader, PageAnswer, PageReader, WireReader
from modelhost.documents.sources import DocumentError, Source, parse_pages

__all__ = [
    "DEFAULT_DPI",
    "FORMATS",
    "PROMPT",
    "Conversion",
    "DocumentError",
    "HostReader",
    "PageAnswer",
    "PageReader",
    "PageResult",
    "Source",
    "WireReader",
    "convert",
    "parse_pages",
    "repair",
    "summary",
]
