"""The ocr backend: the document engine's pixel path (modelhost.docengine.pixels) as a vision model answering a page
image with DocTags, or Markdown when asked.

Importing this package does not import rapidocr (the registry reads entry points on every command); the load does.

Modules: `backend` (finding and loading the models), `model` (the TextModel: streaming, formats, the contract).
"""

from modelhost.backends.ocr.backend import OcrBackend

__all__ = ["OcrBackend"]
