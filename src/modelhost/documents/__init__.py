"""Documents: PDFs and images to DocTags, Markdown, JSON and HTML through any model that reads pages.

    from modelhost.documents import HostReader, convert
    conversion = await convert("scan.pdf", HostReader(host), dpi=150)
    markdown = conversion.render("md")

The engine (`modelhost.docengine.engine`) reads each PDF page from its text layer when that layer is usable, and
renders the others (pdfium, in the sandbox's bounded child processes) for a model to read through the host or the
inferd socket (`readers`); `pipeline` turns each page into its part of one DoclingDocument as it comes (docling-core,
`assemble`) and joins them. The `ocr` model (RapidOCR, offline) is the default reader of `modelhost convert`; a VLM
that writes DocTags (granite-docling, SmolDocling) reads pages through the same path.
"""

from modelhost.docengine.source import DocumentError, Source, parse_pages
from modelhost.documents.assemble import FORMATS, repair
from modelhost.documents.pipeline import DEFAULT_DPI, Conversion, PageResult, convert, summary
from modelhost.documents.readers import PROMPT, HostReader, PageAnswer, PageReader, WireReader

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
