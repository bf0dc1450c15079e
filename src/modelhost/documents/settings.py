"""How a document is converted, as one value: every door translates its own request (the CLI's flags, a worker job's
input, docling-serve's options, a Ray actor's orders) into a `ConvertSettings` once, and the pipeline, the page loop
and the Ray actors read that value instead of keyword arguments threaded through each of them.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The DPI pages are rasterized at unless asked: what OCR reads well, and what pdf-spec's CLI sends.
DEFAULT_DPI = 150
#: Tokens a page may take: a dense page of DocTags from a VLM is ~3-6k tokens; the ocr model counts elements.
DEFAULT_PAGE_TOKENS = 8192
#: Whether a text-layer page's pictures are read unless asked: off. Each picture read costs the reader a page's
#: work, and on the corpus (bench/documents_quality.py --rounds 3, born-digital, load 15) reading them took modelhost
#: from 64x pymupdf4llm's pages/s to 1.84x (issue 19's target is 2x) and CER from 0.10 to 0.115 (docling's ground
#: truth leaves a picture's text out), for no word of the ground truth more. A caller whose documents carry scanned
#: inserts turns it on.
PICTURES = False
#: Whether a text-layer page that shows a table has its tables read from the layout model's table regions unless
#: asked: on. The regions find tables the text path's own finders miss on pages nobody tuned on (docengine.regions):
#: held-out tables-rival 4/6 -> 5/6 tables, cells 0.73 -> 0.86, every other group and the dev pages unchanged
#: (bench/documents_quality.py --tools modelhost, 2026-12-07). Only such pages are rendered and asked
#: (engine.find_regions): a page of prose costs what it did; a page asked ~0.3 CPU s, and the first one loads the
#: `ocr` model (a one-page table's `modelhost convert`: 0.66 -> ~3 CPU s).
REGIONS = True


@dataclass(frozen=True, slots=True)
class ConvertSettings:
    """One conversion's settings.

    - `dpi`: the resolution a page is rendered at for its reader (36..600: `convert` refuses others before it opens
      the document, docengine.source.check_dpi).
    - `pages`: which pages, as `1-3,5,8-` (None or "": every page), read against the document's page count when it
      is open (docengine.source.parse_pages; a door checks its syntax first with check_pages).
    - `max_tokens`: what the reader may spend on one page (tokens of a VLM, elements of the ocr model).
    - `text_layer`: a PDF page with a usable text layer is read from it; False sends every page to the reader.
    - `pixels`: pages without a usable text layer are read from their pixels; False names them unread instead (a
      worker job's `pixels: false`, docling's `do_ocr: false`).
    - `pictures`: a text-layer page's pictures that hold text only as pixels are read too (PICTURES says why not by
      default).
    - `regions`: a text-layer page that shows a table is rendered and its layout regions asked of the reader (the
      `ocr` model), its tables read from the model's table regions and the layer's words (REGIONS).
    """

    dpi: int = DEFAULT_DPI
    pages: str | None = None
    max_tokens: int = DEFAULT_PAGE_TOKENS
    text_layer: bool = True
    pixels: bool = True
    pictures: bool = PICTURES
    regions: bool = REGIONS


#: The settings of a conversion nobody tuned (`modelhost convert FILE`): the default of every call that takes them.
DEFAULTS = ConvertSettings()
