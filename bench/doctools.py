"""The converters the document benchmark runs side by side: modelhost and the baselines a user would pick instead.

Each tool turns one PDF into Markdown (or plain text) through its own public entry point, with its own defaults:

- `modelhost`: `modelhost.documents.convert` with the host held for the whole run, exactly what `modelhost convert`
  calls (its model is loaded once, before timing, as a served host does); the result rendered as Markdown.
- `modelhost-cli`: the `modelhost convert` command, one process per file, so its start-up is in its time.
- `docengine`: `modelhost.docengine`'s stages called directly on the text layer (no OCR, no doors).
- `pymupdf4llm`: `pymupdf4llm.to_markdown` (PyMuPDF 2.x with its layout model).
- `pdftotext`: poppler-utils' command (Debian's `poppler-utils`), default reading-order mode, UTF-8.
- `rapidocr`: RapidOCR's own default pipeline (detection, angle classifier, recognition) on each page rendered by
  pypdfium2 at modelhost's default DPI; its lines joined in the order it returns them.

A tool whose package or program is missing is reported as unavailable with the reason, never silently skipped.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Protocol

#: Pages are rasterised for RapidOCR at the DPI `modelhost convert` uses, so the two OCR paths see the same pixels.
OCR_DPI = 150

#: A converter that hangs on one file must not hang the benchmark: a page takes seconds, a file well under this.
TOOL_TIMEOUT_S = 900


class Tool(Protocol):
    """A converter: `convert` one PDF to Markdown text; `close` releases what `start` took."""

    name: str

    def start(self) -> None: ...

    def convert(self, pdf: Path) -> str: ...

    def close(self) -> None: ...


class Unavailable(RuntimeError):
    """The tool cannot run here (its package or program is missing); the message says what to install."""


class Modelhost:
    """modelhost's document conversion in this process, through the same calls as `modelhost convert`."""

    name = "modelhost"
    #: False reads every page from its pixels (what pdf-spec sends over the socket), never from its text layer.
    text_layer = True

    def __init__(self, model: str = "ocr") -> None:
        self.model = model
        self._runner: asyncio.Runner | None = None
        self._host: Any = None

    def start(self) -> None:
        from modelhost.host import Host
        from modelhost.inference import catalogue, registry

        self._runner = asyncio.Runner()
        path = catalogue.resolve(self.model)
        self._host = Host(lambda: registry.load_model(path), name=self.model)
        self._runner.run(self._host.start())

    def convert(self, pdf: Path) -> str:
        from modelhost.documents import ConvertSettings, HostReader, convert

        assert self._runner is not None, "start() first"
        settings = ConvertSettings(text_layer=self.text_layer)
        conversion = self._runner.run(convert(pdf, HostReader(self._host), settings))
        return str(conversion.render("md"))

    def close(self) -> None:
        if self._runner is not None:
            if self._host is not None:
                self._runner.run(self._host.aclose())
            self._runner.close()
            self._runner = None


class ModelhostPixels(Modelhost):
    """modelhost's conversion with every page rendered and read by the `ocr` model, as pdf-spec's pages arrive over
    the socket: the pixel path on born-digital pages, scored against the same ground truth."""

    name = "modelhost-pixels"
    text_layer = False


class ModelhostCli:
    """The `modelhost convert` command, one process per file: what a user who runs it once per document waits."""

    name = "modelhost-cli"

    def start(self) -> None:
        pass

    def convert(self, pdf: Path) -> str:
        with tempfile.TemporaryDirectory(prefix="docbench-") as folder:
            out = Path(folder) / "out.md"
            command = [sys.executable, "-m", "modelhost.cli", "convert", str(pdf), "-o", str(out), "--to", "md"]
            subprocess.run(command, check=True, capture_output=True, timeout=TOOL_TIMEOUT_S)
            return out.read_text(encoding="utf-8")

    def close(self) -> None:
        pass


class Docengine:
    """modelhost.docengine's stages called directly, text layer only (no OCR, no doors): the engine's own figures
    while it is not yet behind `modelhost convert`, so its stages can be tuned against the same measures."""

    name = "docengine"

    def start(self) -> None:
        try:
            import modelhost.docengine  # noqa: F401
        except ImportError as exc:
            raise Unavailable(f"docengine: {exc}") from exc

    def convert(self, pdf: Path) -> str:
        import pypdfium2

        from modelhost import docengine

        document = pypdfium2.PdfDocument(pdf)
        try:
            contents = [docengine.read_text_layer(document, i) for i in range(len(document))]
        finally:
            document.close()
        style = docengine.document_style(contents)
        layouts = docengine.mark_furniture([docengine.analyse(c, style) for c in contents])
        return str(docengine.to_docling(pdf.stem, layouts).export_to_markdown())

    def close(self) -> None:
        pass


class PyMuPdf4Llm:
    """pymupdf4llm's Markdown (PyMuPDF 2.x; with pymupdf-layout installed it uses its layout model)."""

    name = "pymupdf4llm"

    def start(self) -> None:
        try:
            import pymupdf4llm  # noqa: F401
        except ImportError as exc:
            raise Unavailable(f"pymupdf4llm: {exc} (pip install -e '.[bench]')") from exc

    def convert(self, pdf: Path) -> str:
        import pymupdf4llm

        return str(pymupdf4llm.to_markdown(str(pdf), show_progress=False))

    def close(self) -> None:
        pass


class PdfToText:
    """poppler's pdftotext, default mode (it reorders text into reading order), UTF-8 to standard output."""

    name = "pdftotext"

    def start(self) -> None:
        if shutil.which("pdftotext") is None:
            raise Unavailable("pdftotext: not on PATH (apt-get install poppler-utils)")

    def convert(self, pdf: Path) -> str:
        done = subprocess.run(
            ["pdftotext", "-enc", "UTF-8", str(pdf), "-"], check=True, capture_output=True, timeout=TOOL_TIMEOUT_S
        )
        return done.stdout.decode("utf-8", errors="replace")

    def close(self) -> None:
        pass


class RapidOcr:
    """RapidOCR called directly with its own defaults on pages rendered by pypdfium2."""

    name = "rapidocr"

    def __init__(self) -> None:
        self._engine: Any = None

    def start(self) -> None:
        from rapidocr import RapidOCR

        self._engine = RapidOCR()

    def convert(self, pdf: Path) -> str:
        import numpy as np
        import pypdfium2

        document = pypdfium2.PdfDocument(pdf)
        lines: list[str] = []
        try:
            for index in range(len(document)):
                page = document[index]
                image = page.render(scale=OCR_DPI / 72).to_pil().convert("RGB")
                page.close()
                result = self._engine(np.asarray(image))
                lines.extend(result.txts or ())
                lines.append("")  # a page break ends the paragraph
        finally:
            document.close()
        return "\n".join(lines)

    def close(self) -> None:
        self._engine = None


TOOLS: dict[str, type[Any]] = {
    "modelhost": Modelhost,
    "pymupdf4llm": PyMuPdf4Llm,
    "pdftotext": PdfToText,
    "rapidocr": RapidOcr,
    "modelhost-cli": ModelhostCli,
    "modelhost-pixels": ModelhostPixels,
    "docengine": Docengine,
}

#: What runs without --tools: modelhost and the three baselines (modelhost-cli is the same engine plus start-up).
DEFAULT_TOOLS = ("modelhost", "pymupdf4llm", "pdftotext", "rapidocr")
