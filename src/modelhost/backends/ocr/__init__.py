"""The ocr backend: RapidOCR's PP-OCR ONNX models read a page image and answer with DocTags.

Importing this package does not import rapidocr (the registry reads entry points on every command); the load does.

Modules: `backend` (finding and loading the models), `model` (the TextModel), `layout` (lines to DocTags).
"""

from modelhost.backends.ocr.backend import OcrBackend

__all__ = ["OcrBackend"]
