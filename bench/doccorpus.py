"""The document corpus (tests/corpus/documents/, see its README) and each file's ground truth as a `docmetrics.Parsed`.

Three groups, scored separately because they test different things:

- `born-digital`: docling's test PDFs (ground truth: their DoclingDocument JSON, exported to Markdown by docling-core)
  and pages 1-3 of a two-column arXiv paper (ground truth: docling's Markdown of the whole paper from its LaTeX
  source, cut where page 3 ends: `ARXIV_CUT`).
- `pdfspec`: pdf-spec's test pages and the Markdown it expects (`*.gold.md`); `scanned.pdf` with its text.
- `ocr`: docling's image-only OCR sheet, upright and rotated 90/180/270, all against `ocr_test.md`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import docmetrics

#: The corpus, in the repository (copied from the project's shared corpus so nothing cites an outside path).
CORPUS = Path(__file__).resolve().parent.parent / "tests" / "corpus" / "documents"

#: The arXiv PDF holds pages 1-3; its ground truth is the whole paper. Page 3 ends inside section 4.1, just before
#: Figure 3 ("Image: equations.pdf" in docling's Markdown), so the ground truth is cut there: sentences of later pages
#: are not expected from any tool, and would otherwise count as misses for all of them.
ARXIV_CUT = "Image: equations.pdf"

GROUPS = ("born-digital", "pdfspec", "ocr")


@dataclass(frozen=True, slots=True)
class Entry:
    """One PDF of the corpus: its name in reports, its group, its path, and where its ground truth comes from."""

    name: str
    group: str
    pdf: Path
    truth: Path

    def reference(self) -> docmetrics.Parsed:
        """The ground truth, parsed (cached: docling-core's JSON load costs ~0.5 s on the Redbook)."""
        return _reference(self.truth, self.name.startswith("arxiv"))


@cache
def _reference(truth: Path, arxiv: bool) -> docmetrics.Parsed:
    if truth.suffix == ".json":
        from docling_core.types.doc.document import DoclingDocument

        markdown = DoclingDocument.load_from_json(truth).export_to_markdown()
    else:
        markdown = truth.read_text(encoding="utf-8")
    if arxiv:
        cut = markdown.find(ARXIV_CUT)
        if cut < 0:
            raise ValueError(f"{truth}: the cut marker {ARXIV_CUT!r} is gone; was the ground truth changed?")
        markdown = markdown[:cut]
    return docmetrics.parse_markdown(markdown)


def entries(root: Path = CORPUS) -> list[Entry]:
    """Every scored PDF of the corpus, born-digital first, then pdf-spec's, then the OCR sheets."""
    out: list[Entry] = []
    gt = root / "gt"
    for pdf in sorted((root / "pdf").glob("*.pdf")):
        if pdf.stem.startswith("arxiv_2501.00089"):
            out.append(Entry(pdf.stem, "born-digital", pdf, gt / "arxiv_2501.00089.md"))
        else:
            out.append(Entry(pdf.stem, "born-digital", pdf, gt / f"{pdf.stem}.json"))
    spec = root / "pdfspec"
    for stem in ("headings", "paragraphs", "table"):
        out.append(Entry(f"pdfspec/{stem}", "pdfspec", spec / f"{stem}.pdf", spec / f"{stem}.gold.md"))
    out.append(Entry("pdfspec/scanned", "pdfspec", spec / "scanned.pdf", spec / "ocr-ed.txt"))
    for pdf in sorted((root / "ocr").glob("*.pdf")):
        out.append(Entry(f"ocr/{pdf.stem}", "ocr", pdf, root / "ocr" / "ocr_test.md"))
    return out


def page_count(pdf: Path) -> int:
    """Pages in the PDF (pypdfium2, already a dependency of modelhost's documents extra)."""
    import pypdfium2

    document = pypdfium2.PdfDocument(pdf)
    try:
        return len(document)
    finally:
        document.close()
