"""What a docling request's options mean here: the `Plan` a conversion follows, and what the door says about the
options it does not apply.

Mapped: `to_formats` (md, json, html, text, doctags), `from_formats` (a document of another format is answered
`skipped`, as docling answers a format it is not allowed to read), `page_range`, `do_ocr` (false: pages without a
usable text layer are not read from their pixels; true when the request sends it: the text in a text-layer page's
pictures is read too, see `picture_text`), `force_ocr` (every page read from its pixels, the text layer
ignored), `image_export_mode` (placeholder or embedded), `md_page_break_placeholder` and `md_compact_tables` (the
Markdown is then exported again from the document with them) and `abort_on_error` (a failed document fails the
task).
Refused (422), because the answer could not be what was asked: another output format, `referenced` images.
Everything else is accepted; an option set to something other than docling's default is named in the answer's
`errors` (a note, the status stays `success`), never dropped without a word.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from modelhost.documents.settings import DEFAULTS, ConvertSettings
from modelhost.http.docling.schemas import (
    ALL_PAGES,
    ConvertOptions,
    ImageRefMode,
    InputFormat,
    OutputFormat,
    PdfBackend,
    Pipeline,
    TableMode,
)

#: The formats this door writes, in docling's names.
WRITTEN: Final = ("md", "json", "html", "text", "doctags")

#: docling's defaults of the options this door does not read, so an option sent at its default value (the client
#: and UIs send many) is no news and is not reported.
DOCLING_DEFAULTS: Final[dict[str, Any]] = {
    "ocr_engine": "auto",
    "ocr_preset": "auto",
    "ocr_custom_config": None,
    "table_cell_matching": True,
    "document_timeout": None,
    "do_table_structure": True,
    "do_pdf_heading_hierarchy": False,
    "include_images": True,
    "include_page_images": False,
    "images_scale": 2.0,
    "do_code_enrichment": False,
    "do_formula_enrichment": False,
    "do_picture_classification": False,
    "do_chart_extraction": False,
    "do_picture_description": False,
    "picture_description_area_threshold": 0.05,
    "chunking_options": None,
    "chunking_preset": None,
}

#: Most option notes in one answer: a request of a thousand made-up fields gets a bounded answer, not a thousand lines.
MAX_NOTES = 32
#: Digits of a page number the engine's page ranges take (docengine.source); docling's "to the end" is sys.maxsize.
MAX_PAGE_DIGITS = 9


class OptionRefused(ValueError):
    """An option whose answer this door cannot give: 422 with this message as the detail."""


@dataclass(frozen=True, slots=True)
class Plan:
    """How one conversion goes and what its answer holds. `settings()` is what the job stores (its input's
    `docling` field), `from_settings` reads it back when the answer is made, after a restart too."""

    formats: tuple[str, ...] = ("md",)
    image_mode: str = ImageRefMode.PLACEHOLDER.value
    #: The pipeline's half: which pages, and how each is read (the job's own input fields, not `settings()`).
    convert: ConvertSettings = DEFAULTS
    from_formats: tuple[str, ...] = tuple(f.value for f in InputFormat)
    abort_on_error: bool = False
    page_break: str = ""
    compact_tables: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)

    def settings(self) -> dict[str, Any]:
        """The plan as the JSON the job keeps."""
        return {
            "formats": list(self.formats),
            "image_mode": self.image_mode,
            "from_formats": list(self.from_formats),
            "abort_on_error": self.abort_on_error,
            "page_break": self.page_break,
            "compact_tables": self.compact_tables,
            "notes": list(self.notes),
        }

    @classmethod
    def from_settings(cls, value: Any) -> Plan:
        """The answer's half of a plan from a job's stored `docling` settings (a job from an older version, or one
        edited by hand, gets the defaults for what it lacks)."""
        value = value if isinstance(value, dict) else {}

        def strings(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
            got = value.get(key)
            return tuple(str(v) for v in got) if isinstance(got, list) else default

        return cls(
            formats=strings("formats", ("md",)),
            image_mode=str(value.get("image_mode", ImageRefMode.PLACEHOLDER.value)),
            from_formats=strings("from_formats", tuple(f.value for f in InputFormat)),
            abort_on_error=bool(value.get("abort_on_error", False)),
            page_break=str(value.get("page_break", "")),
            compact_tables=bool(value.get("compact_tables", False)),
            notes=strings("notes", ()),
        )


def plan(options: ConvertOptions, extra_fields: dict[str, Any] | None = None) -> Plan:
    """The plan of `options` (only the fields the request set count as asked). `extra_fields` are request fields
    beside the options that this door does not act on (`callbacks`), to be noted likewise. OptionRefused for an
    answer this door cannot give."""
    asked = options.model_fields_set
    formats = tuple(dict.fromkeys(f.value for f in options.to_formats))
    unwritten = [f for f in formats if f not in WRITTEN]
    if unwritten:
        raise OptionRefused(
            f"to_formats: this server writes {', '.join(WRITTEN)}; it cannot write {', '.join(unwritten)}"
        )
    if options.image_export_mode == ImageRefMode.REFERENCED:
        raise OptionRefused(
            "image_export_mode: `referenced` needs artifact storage, which this server does not have; "
            "use `placeholder` or `embedded`"
        )
    notes: list[str] = []
    if "ocr_lang" in asked and options.ocr_lang:
        notes.append(
            f"ocr_lang {options.ocr_lang!r} is not applied: the served model reads the languages it was trained on"
        )
    defaults: dict[str, Any] = {
        "table_mode": TableMode.ACCURATE,
        "pdf_backend": PdfBackend.DOCLING_PARSE,
        "pipeline": Pipeline.STANDARD,
    }
    for name, default in defaults.items():
        value = getattr(options, name)
        if name in asked and value != default:
            notes.append(f"{name}={value.value!r} is not applied: this server has one {_WHAT[name]}")
    for name, value in {**(options.model_extra or {}), **(extra_fields or {})}.items():
        if name in DOCLING_DEFAULTS and _same(value, DOCLING_DEFAULTS[name]):
            continue
        if value in (None, [], {}, ""):
            continue
        notes.append(f"{name}={_shown(value)} is not applied by this server")
    if len(notes) > MAX_NOTES:
        notes = [*notes[: MAX_NOTES - 1], f"and {len(notes) - MAX_NOTES + 1} more options not applied"]
    return Plan(
        formats=formats,
        image_mode=options.image_export_mode.value,
        convert=ConvertSettings(
            pages=page_spec(options.page_range),
            text_layer=not options.force_ocr,
            pixels=options.do_ocr,
            pictures=picture_text(options),
        ),
        from_formats=tuple(f.value for f in options.from_formats),
        abort_on_error=options.abort_on_error,
        page_break=options.md_page_break_placeholder,
        compact_tables=options.md_compact_tables,
        notes=tuple(notes),
    )


_WHAT: Final = {
    "table_mode": "table method",
    "pdf_backend": "PDF reader (its text layer first, the served model for the rest)",
    "pipeline": "pipeline",
}


def picture_text(options: ConvertOptions) -> bool:
    """Whether the text a text-layer page holds only in its pictures is read (`convert --pictures`): when the request
    itself sends `do_ocr: true`. docling's `do_ocr` means "bitmap content is processed with OCR", pictures included,
    and is true by default; here a picture costs a page's OCR (engine.PICTURES has the figures), so a request that
    leaves `do_ocr` at its default gets text-layer speed, and one that asks for OCR by name gets its pictures read.
    docling's client sends only the options set (`ConvertDocumentsOptions(do_ocr=True)`), curl `-F do_ocr=true`."""
    return options.do_ocr and "do_ocr" in options.model_fields_set and not options.force_ocr


def page_spec(page_range: tuple[int, int]) -> str | None:
    """docling's (first, last) as the engine's page spec (`3-7`, `3-` to the end); None for every page.
    OptionRefused for a range that is not one (docling answers 422 for it too)."""
    first, last = page_range
    if first < 1 or last < first:
        raise OptionRefused(f"page_range {list(page_range)!r}: expected [first, last] with 1 <= first <= last")
    if (first, last) == ALL_PAGES or (first == 1 and len(str(last)) > MAX_PAGE_DIGITS):
        return None
    if len(str(first)) > MAX_PAGE_DIGITS:
        raise OptionRefused(f"page_range {list(page_range)!r}: no document has that many pages")
    return f"{first}-" if len(str(last)) > MAX_PAGE_DIGITS else f"{first}-{last}"


def _same(value: Any, default: Any) -> bool:
    """`value` (JSON, or a form field's text) equal to docling's `default`."""
    if value == default:
        return True
    if isinstance(value, str) and not isinstance(default, str):
        text = value.strip().lower()
        if isinstance(default, bool):
            return text == str(default).lower()
        if isinstance(default, int | float):
            try:
                return float(text) == float(default)
            except ValueError:
                return False
        if default is None:
            return text in ("", "null", "none")
    return False


#: Characters of an option's value shown in a note: a note names the value, it does not echo a megabyte back.
MAX_SHOWN = 60


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


__all__ = ["WRITTEN", "OptionRefused", "OutputFormat", "Plan", "page_spec", "plan"]
