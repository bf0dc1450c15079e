"""Documents: PDFs and images to DocTags, Markdown, JSON and HTML through any model that reads pages.

    from modelhost.documents import ConvertSettings, HostReader, convert
    conversion = await convert("scan.pdf", HostReader(host), ConvertSettings(dpi=150))
    markdown = conversion.render("md")

One pipeline, cut by stage: `settings` (one ConvertSettings value each door translates its request into), `engine`
(the page loop: each PDF page read from its text layer when that layer is usable, the others rendered by pdfium in
the sandbox's bounded child processes, its stages one explicit list), `pictures` (the text a text-layer page holds
only in its pictures), `readers` (one PageReader protocol: a model through the host, or the inferd socket),
`assemble` (a page's DocTags into its part of one DoclingDocument, docling-core) and `pipeline` (`convert`: the pages
as they come, each into its part, joined at the end; `batch` converts several files). The `ocr` model (RapidOCR,
offline) is the default reader of `modelhost convert`; a VLM that writes DocTags (granite-docling, SmolDocling)
reads pages through the same path.
"""

from modelhost.docengine.source import DocumentError, Source, parse_pages
from modelhost.documents.assemble import FORMATS, repair
from modelhost.documents.engine import PageResult
from modelhost.documents.pipeline import Conversion, convert, summary
from modelhost.documents.readers import PROMPT, HostReader, PageAnswer, PageReader, WireReader
from modelhost.documents.settings import DEFAULT_DPI, ConvertSettings

__all__ = [
    "DEFAULT_DPI",
    "FORMATS",
    "PROMPT",
    "Conversion",
    "ConvertSettings",
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
