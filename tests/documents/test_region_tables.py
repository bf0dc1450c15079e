"""`convert` with the real `ocr` model reads a text-layer page's tables from the layout model's table regions (issue
34: one page model for both paths): a page that shows a table is rendered once and its regions asked of the reader
(docengine.regions), the table the text path alone misses is read from the text layer's words, a page of prose is
never asked, and `regions=False` keeps the text path's own reading."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from modelhost.backends.ocr.model import OcrModel
from modelhost.documents import ConvertSettings, HostReader, convert
from modelhost.host import Host

from .test_convert import _Unclosable

PROSE = (
    "The survey team visited every station of the network during the spring and recorded what each one held. "
    "The notes below list the stations by name, with the person who keeps each one and the town it serves. "
) * 2
STATIONS = ["North ridge", "River mouth", "Old mill", "Quarry gate", "Salt marsh", "Cedar hill", "Long lake"]
KEEPERS = ["Alice Brown", "Carlos Diaz", "Dana Evans", "Farid Ghani", "Grace Hill", "Ivan Jones", "Kara Lund"]
STATIONS += ["Stone bridge", "East field", "Fox hollow", "Mill pond", "West gate"]
KEEPERS += ["Liam Moore", "Nina Ortiz", "Omar Price", "Paula Quinn", "Rosa Smith"]


def _prose(c: Any, y: float) -> float:
    """PROSE set in lines of 11 words from `y` down, 13 points apart; the last line's baseline."""
    words = PROSE.split()
    for k in range(0, len(words), 11):
        c.drawString(72, y, " ".join(words[k : k + 11]))
        y -= 13
    return y + 13


def _page(path: Path, *, table: bool = True) -> Path:
    """A letter page: prose, a table of two columns of words under one rule below its header (no sign of a table the
    text path's finder without rules asks: no figure, one face, two columns; alone it reads the rows across as
    prose), prose, and a small table of figures, which the text path finds (the page shows a table)."""
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=(612, 792))
    c.setFont("Helvetica", 10)
    y = _prose(c, 740) - 30
    if table:
        c.drawString(72, y, "Station")
        c.drawString(220, y, "Keeper")
        c.line(70, y - 4, 340, y - 4)
        y -= 16
        for r, (station, keeper) in enumerate(zip(STATIONS, KEEPERS, strict=True)):
            c.drawString(72, y - 14 * r, station)
            c.drawString(220, y - 14 * r, keeper)
        y -= 14 * len(STATIONS) + 25
    y = _prose(c, y) - 30
    if table:
        for r, row in enumerate([("Year", "Visits", "Hours"), ("2019", "412", "1,250"), ("2020", "398", "1,190")]):
            c.drawString(72, y - 15 * r, row[0])
            c.drawRightString(250, y - 15 * r, row[1])
            c.drawRightString(350, y - 15 * r, row[2])
    c.showPage()
    c.save()
    return path


class _Counting(HostReader):
    def __init__(self, host: Host) -> None:
        super().__init__(host)
        self.asked = 0

    async def regions(self, image: Any) -> Any:
        self.asked += 1
        return await super().regions(image)


def _convert(ocr_model: OcrModel, path: Path, **options: Any) -> tuple[str, int]:
    async def run() -> tuple[str, int]:
        host = Host.from_model(_Unclosable(ocr_model), name="ocr")
        await host.start()
        try:
            reader = _Counting(host)
            conversion = await convert(path, reader, ConvertSettings(**options))
            return str(conversion.render("md")), reader.asked
        finally:
            await host.aclose()

    return asyncio.run(run())


def test_a_table_the_text_path_misses_is_read_from_its_layout_region(ocr_model: OcrModel, tmp_path: Path) -> None:
    path = _page(tmp_path / "stations.pdf")
    markdown, asked = _convert(ocr_model, path)
    assert asked == 1
    rows = [line for line in markdown.splitlines() if line.startswith("|")]
    for station, keeper in zip(STATIONS, KEEPERS, strict=True):
        assert any(station in row and keeper in row and row.index(station) < row.index(keeper) for row in rows)
    assert "Keeper North ridge" not in markdown  # the rows are no longer read across as prose
    # without regions, the text path's own reading: no table of the stations
    plain, asked = _convert(ocr_model, path, regions=False)
    assert asked == 0
    assert not any("North ridge" in line for line in plain.splitlines() if line.startswith("|"))


def test_a_page_of_prose_is_never_asked_for_its_regions(ocr_model: OcrModel, tmp_path: Path) -> None:
    markdown, asked = _convert(ocr_model, _page(tmp_path / "prose.pdf", table=False))
    assert asked == 0
    assert "survey team" in markdown


def test_a_starting_reader_starts_its_model_for_regions_only_when_told(tmp_path: Path) -> None:
    from modelhost.documents.readers import StartingReader

    made: list[str] = []

    def make() -> Any:
        made.append("host")
        raise RuntimeError("no ocr model installed")

    async def run() -> None:
        quiet = StartingReader(make=make)  # a VLM's door: no model is loaded for a page's regions
        assert (await quiet.regions(None)).text == "" and not made
        told = StartingReader(make=make, regions=True)  # convert's `ocr`, not installed: no regions, no failure
        answer = await told.regions(None)
        assert answer.text == "" and made == ["host"]
        assert (await told.regions(None)).text == "" and made == ["host"]  # tried once
        try:  # a page read from its pixels meets the error as it did before
            await told.read(None)
        except RuntimeError as exc:
            assert "no ocr model" in str(exc)
        else:
            raise AssertionError("a page read from pixels must fail when the model does not start")

    asyncio.run(run())


def test_a_pages_regions_load_no_ocr_models_and_a_pixel_page_loads_them_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The regions of a text-layer page need the layout model alone: RapidOCR (its import and its three models, ~0.8
    # CPU s of a one-page convert) is made when a page's pixels are first read, and once.
    from PIL import Image, ImageDraw

    from modelhost.backends.ocr import rapid
    from modelhost.backends.ocr.pixels import PixelReader, models_folder

    made: list[int] = []
    real = rapid.import_rapidocr

    def counted() -> Any:
        made.append(1)
        return real()

    monkeypatch.setattr(rapid, "import_rapidocr", counted)
    model = OcrModel(PixelReader.load(), models_folder(), architecture="pp-ocr")
    try:
        markdown, asked = _convert(model, _page(tmp_path / "stations.pdf"))
        assert asked == 1 and not made
        assert any("North ridge" in line and "Alice Brown" in line for line in markdown.splitlines() if "|" in line)
        image = Image.new("RGB", (850, 1100), "white")
        ImageDraw.Draw(image).text((100, 100), "Stations of the network", fill="black", font_size=28)
        assert "Stations" in model.page_doctags(image)
        assert "Stations" in model.page_doctags(image)
        assert made == [1]
    finally:
        model.close()


class _Answering:
    """A reader whose page regions are a given answer (docengine.regions' format); pages are never read from pixels."""

    name = "regions"

    def __init__(self, answer: str) -> None:
        self.answer = answer

    async def read(self, image: Any, *, max_tokens: int) -> Any:
        raise AssertionError("no page of a text-layer document is read from its pixels")

    async def regions(self, image: Any) -> Any:
        from modelhost.documents.readers import PageAnswer

        return PageAnswer(self.answer, "stop")


def test_regions_without_a_table_leave_the_page_as_it_was_laid_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # analyse reads a page's table regions only: a page whose regions hold none is not laid out again (a page asked
    # costs its render and the layout model, and no second analysis for nothing).
    from modelhost.documents import engine

    calls: list[int] = []
    real = engine.analyse

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "analyse", counted)
    path = _page(tmp_path / "stations.pdf")

    def converted(answer: str) -> tuple[str, int]:
        calls.clear()
        conversion = asyncio.run(convert(path, _Answering(answer), ConvertSettings()))  # type: ignore[arg-type]
        return str(conversion.render("md")), len(calls)

    plain, once = converted("")
    texts, again = converted("<doctag><text><loc_50><loc_50><loc_450><loc_200></text></doctag>")
    assert texts == plain and again == once
    _, more = converted("<doctag><table><loc_50><loc_50><loc_450><loc_450></table></doctag>")
    assert more == once + 1
