"""The pdfium sandbox on hostile PDFs: each one reported by name, the pool alive and reused afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pypdfium2")

from modelhost.docengine.errors import DocumentError
from modelhost.docengine.sandbox import MAX_PAGE_PIXELS, Limits, PageError, Sandbox, page_ranges
from modelhost.testing import hostile_pdfs


@pytest.fixture(scope="module")
def pdfs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("hostile")
    builders = {
        "text": hostile_pdfs.text_pdf,
        "loop": hostile_pdfs.self_drawing_form,
        "encrypted": hostile_pdfs.encrypted,
        "no_pages": hostile_pdfs.no_pages,
        "declared": hostile_pdfs.declared_pages,
    }
    return {key: hostile_pdfs.write(folder / f"{key}.pdf", build()) for key, build in builders.items()}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    # 1 GiB: the loop PDF reaches it in a few seconds; every real page here needs a tenth of it.
    with Sandbox(2, Limits(memory_bytes=1 << 30, cpu_seconds=120, wall_seconds=600)) as box:
        box.start()
        yield box


def dark_pixels(path: Path, sandbox: Sandbox, index: int = 0) -> int:
    import numpy as np

    image = sandbox.render(path, index, 72).image()
    return int((np.asarray(image.convert("L")) < 128).sum())


def test_the_self_drawing_form_is_reported_by_name_and_the_pool_goes_on(
    pdfs: dict[str, Path], sandbox: Sandbox
) -> None:
    before = dark_pixels(pdfs["text"], sandbox)
    assert before > 100  # the text page really draws its line
    assert sandbox.page_count(pdfs["loop"]) == 1
    pids = set(sandbox.pids())
    with pytest.raises(PageError) as caught:
        sandbox.render(pdfs["loop"], 0, 72, name="my upload.pdf")
    message = str(caught.value)
    assert message.startswith("my upload.pdf: page 1 exhausted its 1024 MiB memory bound"), message
    assert caught.value.killed and caught.value.page == 1 and str(pdfs["loop"].parent) not in message
    # a fresh child took the dead one's place; the other documents read as before
    assert dark_pixels(pdfs["text"], sandbox) == before
    assert len(pids - set(sandbox.pids())) == 1


def test_the_text_layer_is_read_in_the_sandbox(pdfs: dict[str, Path], sandbox: Sandbox) -> None:
    pytest.importorskip("modelhost.docengine.textlayer")
    content = sandbox.text_layer(pdfs["text"], 0)
    assert " ".join(word.text for word in content.words) == "Hello from a text layer"
    # the text layer walks the same content stream as rendering: bounded the same way
    with pytest.raises(PageError, match=r"loop\.pdf: page 1 exhausted"):
        sandbox.text_layer(pdfs["loop"], 0)


def test_cpu_and_wall_bounds_each_stop_the_loop(pdfs: dict[str, Path]) -> None:
    # Memory high enough that the CPU bound comes first (pdfium grows ~130 MB a CPU second on this PDF).
    with Sandbox(1, Limits(memory_bytes=8 << 30, cpu_seconds=1, wall_seconds=600)) as box:
        with pytest.raises(PageError, match=r"loop\.pdf: page 1 used more than 1 s of CPU") as caught:
            box.render(pdfs["loop"], 0, 72)
        assert caught.value.killed
        assert box.page_count(pdfs["text"]) == 1
    # The wall bound also covers the next job's fresh child starting Python and pdfium, which takes seconds on a
    # loaded machine: 1 s failed there ("text.pdf: opening it took longer than 1 s"), so 10.
    with Sandbox(1, Limits(memory_bytes=8 << 30, cpu_seconds=3600, wall_seconds=10)) as box:
        with pytest.raises(PageError, match=r"loop\.pdf: page 1 took longer than 10 s"):
            box.render(pdfs["loop"], 0, 72)
        assert box.page_count(pdfs["text"]) == 1


def test_pdfiums_last_error_does_not_leak_from_one_document_to_the_next(
    pdfs: dict[str, Path], sandbox: Sandbox
) -> None:
    for _ in range(2):  # the same child may take both: the order is what once made the second say "encrypted"
        with pytest.raises(DocumentError, match=r"^encrypted\.pdf: the PDF is encrypted"):
            sandbox.page_count(pdfs["encrypted"])
        with pytest.raises(DocumentError) as caught:
            sandbox.page_count(pdfs["no_pages"])
        assert str(caught.value).startswith("no_pages.pdf: not a readable PDF")
        assert "password" not in str(caught.value) and "encrypted" not in str(caught.value)
    with pytest.raises(DocumentError, match=r"^gone\.pdf: cannot read it"):
        sandbox.page_count(pdfs["text"].parent / "gone.pdf")


def test_a_pdf_that_declares_ten_thousand_pages_gives_its_one_page(pdfs: dict[str, Path], sandbox: Sandbox) -> None:
    assert sandbox.page_count(pdfs["declared"]) == 10_000
    assert dark_pixels(pdfs["declared"], sandbox) > 100
    with pytest.raises(PageError, match=r"declared\.pdf: page 2 cannot be loaded") as caught:
        sandbox.render(pdfs["declared"], 1, 72)
    assert not caught.value.killed and caught.value.page == 2
    with pytest.raises(PageError, match=r"no page 10001 \(it has 10000\)"):
        sandbox.render(pdfs["declared"], 10_000, 72)


def test_children_are_started_once_and_reused(pdfs: dict[str, Path], sandbox: Sandbox) -> None:
    pids = sorted(sandbox.pids())
    for _ in range(6):
        sandbox.render(pdfs["text"], 0, 72)
    assert sorted(sandbox.pids()) == pids


def test_jobs_one_after_another_stay_on_one_child(pdfs: dict[str, Path]) -> None:
    # A one-page convert asks for the page count, then the page's text layer: one child serves both (a second
    # child's Python start-up was a third of such a convert's CPU), and the child keeps the document open.
    with Sandbox(2, Limits(memory_bytes=1 << 30, cpu_seconds=120, wall_seconds=600)) as box:
        assert box.page_count(pdfs["text"]) == 1
        box.text_layer(pdfs["text"], 0)
        dark_pixels(pdfs["text"], box)
        assert len(box.pids()) == 1


def test_a_huge_declared_page_is_rendered_within_the_pixel_bound(tmp_path: Path, sandbox: Sandbox) -> None:
    import pypdfium2 as pdfium

    # A 200 x 200 inch page (PDF's largest): at 300 DPI, 3.6 gigapixels if rendered as asked.
    pdf = pdfium.PdfDocument.new()
    pdf.new_page(14_400, 14_400)
    path = tmp_path / "poster.pdf"
    pdf.save(path)
    pdf.close()
    pixels = sandbox.render(path, 0, 300)
    assert 0 < pixels.width * pixels.height <= MAX_PAGE_PIXELS and pixels.width == pixels.height


def test_page_ranges_name_many_pages_in_one_line() -> None:
    assert page_ranges([5, 2, 3, 4, 9, 11, 10]) == "2-5, 9-11"
    assert page_ranges([]) == ""


def test_children_outlive_the_thread_that_started_them(pdfs: dict[str, Path]) -> None:
    # PR_SET_PDEATHSIG follows the starting thread: children started from an asyncio.to_thread worker died when it
    # did (the next asyncio.run's first document failed with "opening it stopped its reader (SIGKILL)").
    import threading

    with Sandbox(1, Limits(memory_bytes=1 << 30, cpu_seconds=120, wall_seconds=600)) as box:
        # a first job from that thread: the child has answered, so it has armed its death signal by then
        starter = threading.Thread(target=box.page_count, args=(pdfs["text"],))
        starter.start()
        starter.join()
        pids = box.pids()
        assert len(pids) == 1
        # the thread is gone from the kernel (its exit, and any death signal it sends, has happened)
        native = Path(f"/proc/self/task/{starter.native_id}")
        for _ in range(6000):
            if not native.exists():
                break
            threading.Event().wait(0.05)
        assert not native.exists()
        assert box.page_count(pdfs["text"]) == 1
        assert box.pids() == pids  # the same child answered: it was not killed and replaced


def test_images_are_decoded_in_the_sandbox_and_a_decoder_bomb_kills_a_child_not_the_host(tmp_path: Path) -> None:
    # A 6000x6000 PNG is 120 KB of file and ~250 MB to decode (Pillow's RGB is 4 bytes a pixel, and the rows sent
    # back 3 more): under a 256 MiB bound its decoding fails in the child, which is reported and replaced, and the
    # host (this process) decodes nothing itself.
    import numpy as np
    from PIL import Image

    from modelhost.docengine.source import Source

    small = tmp_path / "small.png"
    pixels = np.zeros((40, 60, 3), np.uint8)
    pixels[:, :30] = (200, 10, 10)
    Image.fromarray(pixels).save(small)
    bomb = tmp_path / "bomb.png"
    Image.new("RGB", (6000, 6000), "white").save(bomb)
    with Sandbox(1, Limits(memory_bytes=256 << 20)) as box:
        with Source(small, box) as source:
            assert not source.is_pdf and source.count == 1
            page = source.render(1, 150).image
            assert page.shape == (40, 60, 3) and np.array_equal(page, pixels)
        with Source(bomb, box, name="upload.png") as source:
            assert source.count == 1  # its header is within MAX_PAGE_PIXELS: only decoding it costs
            pids = set(box.pids())
            with pytest.raises(PageError) as caught:
                source.render(1, 150)
        assert caught.value.killed and caught.value.page == 1
        assert str(caught.value) == "upload.png: page 1 exhausted its 256 MiB memory bound (an allocation failed)"
        with Source(small, box) as source:  # a fresh child decodes the next image
            assert np.array_equal(source.render(1, 150).image, pixels)
        assert not pids & set(box.pids())


def test_an_image_too_big_or_no_image_at_all_is_refused_by_name_from_the_sandbox(tmp_path: Path) -> None:
    from PIL import Image

    from modelhost.docengine.source import Source

    huge = tmp_path / "huge.png"
    Image.new("1", (12_000, 12_000)).save(huge)  # 18 KB; 432 MB as RGB
    junk = tmp_path / "notes.txt"
    junk.write_text("not an image")
    with Sandbox(1) as box:
        with pytest.raises(DocumentError, match=r"^scan\.png: a 12000x12000 image is over \d+ pixels$"):
            Source(huge, box, name="scan.png")
        with pytest.raises(DocumentError, match=r"^notes\.txt: neither a PDF nor a PNG, JPEG or TIFF image"):
            Source(junk, box)
