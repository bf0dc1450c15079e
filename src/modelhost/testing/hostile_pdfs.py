"""Small hostile PDFs, built byte by byte, for the tests and the hostile corpus.

Each is a few hundred bytes that a careless reader pays for in gigabytes, minutes or a wrong answer:
- `self_drawing_form`: a Form XObject whose content stream draws itself twice (`/Fm0 Do` inside Fm0): pdfium
  recurses without bound (8 GB in a minute, measured) while rendering or reading its text.
- `encrypted`: a Standard-security PDF whose password is not empty (pdfium refuses it with FPDF_ERR_PASSWORD).
- `declared_pages`: a page tree that declares `/Count N` and holds one page.
- `huge_pages`: N pages of `side` x `side` points, two strokes each, no text (a 1,000-page file is ~90 KB).
"""

from __future__ import annotations

from pathlib import Path


def _pdf(objects: list[bytes], *, trailer_extra: bytes = b"") -> bytes:
    """A PDF of `objects` (object 1 first; object 1 is the catalog) with a correct cross-reference table."""
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R %s>>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, trailer_extra, xref)
    return bytes(out)


def _stream(dictionary: bytes, data: bytes) -> bytes:
    return b"<< " + dictionary + b" /Length %d >>\nstream\n" % len(data) + data + b"\nendstream"


def _text_page(text: bytes, contents: int, font: int, resources: bytes = b"") -> bytes:
    return (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
        b"/Resources << /Font << /F1 %d 0 R >> %s>> >>" % (contents, font, resources)
    )


_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def text_pdf(text: str = "Hello from a text layer") -> bytes:
    """One letter page with one line of real text (a born-digital page)."""
    content = b"BT /F1 24 Tf 72 700 Td (%s) Tj ET" % text.encode("latin-1")
    return _pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            _text_page(text.encode(), 4, 5),
            _stream(b"", content),
            _FONT,
        ]
    )


def self_drawing_form() -> bytes:
    """A page that draws Form XObject Fm0, whose own content draws Fm0 twice: 2^depth draws if nothing stops it."""
    form = _stream(
        b"/Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << /XObject << /Fm0 4 0 R >> >>",
        b"q 0.5 0 0 0.5 0 0 cm /Fm0 Do Q q 0.5 0 0 0.5 306 396 cm /Fm0 Do Q",
    )
    return _pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 5 0 R "
            b"/Resources << /XObject << /Fm0 4 0 R >> >> >>",
            form,
            _stream(b"", b"/Fm0 Do"),
        ]
    )


def encrypted() -> bytes:
    """A PDF under the Standard security handler whose user password is not empty: unreadable without it.

    The /O and /U strings are arbitrary: the empty password does not match /U, which is all pdfium checks before
    refusing the document as FPDF_ERR_PASSWORD."""
    junk = b"<" + b"6b" * 32 + b">"
    return _pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>",
            b"<< /Filter /Standard /V 1 /R 2 /Length 40 /P -4 /O " + junk + b" /U " + junk + b" >>",
        ],
        trailer_extra=b"/Encrypt 4 0 R /ID [<00112233445566778899aabbccddeeff> <00112233445566778899aabbccddeeff>] ",
    )


def no_pages() -> bytes:
    """A well-formed PDF whose page tree is empty."""
    return _pdf([b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [] /Count 0 >>"])


def declared_pages(count: int = 10_000, text: str = "The only real page") -> bytes:
    """A page tree that declares `count` pages and holds one page of text."""
    content = b"BT /F1 24 Tf 72 700 Td (%s) Tj ET" % text.encode("latin-1")
    return _pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count %d >>" % count,
            _text_page(text.encode(), 4, 5),
            _stream(b"", content),
            _FONT,
        ]
    )


def huge_pages(count: int = 1000, side: int = 3000) -> bytes:
    """`count` pages of `side` x `side` points sharing one content stream (two strokes, no text, so every page is
    rendered for a model to read): tiny on disk, each page `side`^2 points of pixels when rendered."""
    content = b"8 w 0 0 m %d %d l S 100 100 %d %d re S" % (side, side, side // 2, side // 4)
    kids = b" ".join(b"%d 0 R" % (4 + i) for i in range(count))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % count,
        _stream(b"", content),
    ]
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Contents 3 0 R >>"
    objects += [page % (side, side)] * count
    return _pdf(objects)


def write(path: Path, data: bytes) -> Path:
    """`data` written to `path`; returns the path."""
    path.write_bytes(data)
    return path
