"""Regenerate the binary example files the README names (page.png, scan.pdf) with Pillow, so they are reproducible.

    .venv/bin/python examples/make_examples.py

The page is a short printed letter in a large, plain font: big enough for the offline `ocr` model to read exactly,
small enough (a few KB) to keep in the repository. scan.pdf is the same kind of page as a PDF with no text layer (an
image only), as a scanner writes it, so `modelhost convert` must read its pixels with a model.
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

HERE = Path(__file__).parent

PAGE = [
    "Invoice 1042",
    "Ada Lovelace, 12 St James's Square, London",
    "Three analytical engines: 450 pounds",
    "Payment due within 30 days.",
]
SCAN = [
    "Meeting notes",
    "The model host loads a model once.",
    "Every door shares one scheduler.",
    "Next meeting: Tuesday at ten.",
]


def page(lines: list[str]) -> Image.Image:
    """A white page with black lines of text, as a 200 DPI scan of a short letter would look."""
    image = Image.new("RGB", (1100, 160 + 90 * len(lines)), "white")
    draw = ImageDraw.Draw(image)
    title = ImageFont.load_default(size=56)
    body = ImageFont.load_default(size=40)
    for i, line in enumerate(lines):
        draw.text((80, 70 + 90 * i), line, fill="black", font=title if i == 0 else body)
    return image


if __name__ == "__main__":
    page(PAGE).save(HERE / "page.png", optimize=True)
    page(SCAN).convert("L").save(HERE / "scan.pdf", resolution=200.0)
