"""The ocr backend: the pixel path (a page image read by OCR and laid out by the document engine) as a vision model
answering a page image with DocTags, or Markdown when asked.

Importing this package does not import rapidocr (the registry reads entry points on every command); the load does.

Modules: `backend` (finding and loading the models), `model` (the TextModel: streaming, formats, the contract), and
the pixel path itself, the `ocr` model's work, on the document engine's leaf library (`modelhost.docengine`: types,
`analyse`, reading order, tables, emitters):

    rapid.py         RapidOCR's and rapid-layout's names this backend uses, and only those (one version-bound place)
    pixels.py        PixelReader: detection, orientation, recognition, a page image to PageContent
    orientation.py   the page's rotation voted from its detected lines
    scripts.py       Tesseract's models for the scripts RapidOCR's recogniser cannot read, and the page's choice
    layoutmodel.py   the CDLA layout model's regions
    pixelrules.py    ruling lines found in pixels
    scantable.py     tables from OCR'd words' positions (the reader: docengine.wordtable, the text path's too)
    scanpage.py      a scanned page's blocks in reading order, each recognised when asked for
"""

from modelhost.backends.ocr.backend import OcrBackend

__all__ = ["OcrBackend"]
