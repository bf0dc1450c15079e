"""The page at / in a real browser: Debian's chromium, headless, driven by Playwright for Python, against one real
`modelhost serve --model default --model ocr --http --docling ocr --api-key KEY` for the whole file.

What a person relies on: the page asks for the key and shows nothing without it; a chat answer streams (its text
grows before it ends) and Stop cancels it on the server (the slot frees, counted as cancelled); the State view
shows a request running while one runs; a PDF dropped on the page shows each page with the engine's regions drawn
(as many as the engine found) and its Markdown, and the download is `modelhost convert`'s own Markdown. Each view is
saved as a screenshot under build/ui-screenshots/ (the README's images come from there).
"""

from __future__ import annotations

import asyncio
import base64
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from modelhost.testing.serving import Served, start_serving
from modelhost.testing.waiting import STATE_WAIT_SECONDS

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the test extra) is not installed")
pytest.importorskip("docling_core", reason="the documents extra is not installed")
pytest.importorskip("rapidocr", reason="the documents extra is not installed")
pytest.importorskip("llama_cpp", reason="llama-cpp-python (the embedded default model's engine) is not installed")

#: A served host's start (two models) counts in its first test, and a loaded CI machine ran that start and a test in
#: 230 s (159 + 71, at load 20): the suite's 300 s default would leave no room.
pytestmark = pytest.mark.timeout(900)

#: Debian's chromium (`make test` installs it where missing); Playwright's own browser download is not reachable.
CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.is_file():
    pytest.skip(
        f"no browser at {CHROMIUM}: `apt-get install chromium` (make test does it as root)", allow_module_level=True
    )

#: A headless browser that reaches nothing but the page: no first-run tasks, component updates, sync or QUIC.
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
KEY = "browser-test-key"
ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "build" / "ui-screenshots"
#: Five born-digital pages with headings, text and lists: read from the text layer, so the conversion takes seconds.
PDF = ROOT / "tests" / "corpus" / "documents" / "pdf" / "multi_page.pdf"
#: Playwright's waits, in milliseconds: a model's answer and a document's pages on a loaded 2-core machine.
WAIT_MS = STATE_WAIT_SECONDS * 1000


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    state = tmp_path_factory.mktemp("ui-state")
    args = ["--model", "default", "--model", "ocr", "--no-socket", "--http", "127.0.0.1:0", "--docling", "ocr",
            "--state", str(state), "--api-key", KEY]  # fmt: skip
    server = start_serving(args)
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One chromium for the file, with a new empty profile."""
    with sync_api.sync_playwright() as playwright, tempfile.TemporaryDirectory() as profile:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 800}, accept_downloads=True,
        )  # fmt: skip
        try:
            yield context
        finally:
            context.close()


def open_page(browser: Any, served: Served, view: str = "chat", *, key: str | None = KEY) -> Any:
    """A new tab (its own sessionStorage) on the page, the key given when asked for."""
    page = browser.new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(f"{served.url('http')}/#{view}")
    if key is not None:
        page.wait_for_selector("#key-dialog[open]")
        page.fill("#key-input", key)
        page.click("#key-form button")
        page.wait_for_function("document.querySelector('#connection').textContent.startsWith('connected')")
    return page


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))


def host_state(served: Served) -> dict[str, Any]:
    response = httpx.get(f"{served.url('http')}/ui/api/state", headers={"Authorization": f"Bearer {KEY}"}, timeout=10)
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    return body


def chat_model(served: Served) -> dict[str, Any]:
    return next(m for m in host_state(served)["models"] if "default" in m["aliases"])


def test_the_page_asks_for_the_key_and_shows_nothing_without_it(browser: Any, served: Served) -> None:
    page = open_page(browser, served, key=None)
    page.wait_for_selector("#key-dialog[open]")
    page.wait_for_function("document.querySelector('#connection').textContent.startsWith('refused')")
    assert page.locator("#models tbody tr").count() == 0, "no state is shown without the key"
    page.fill("#key-input", "not-the-key")
    page.click("#key-form button")
    page.wait_for_function("document.querySelector('#key-message').textContent.includes('refused that key')")
    assert page.locator("#key-dialog").is_visible()
    shot(page, "key")
    page.fill("#key-input", KEY)
    page.click("#key-form button")
    page.wait_for_function("document.querySelector('#connection').textContent.startsWith('connected')")
    assert not page.locator("#key-dialog").is_visible()
    assert page.locator("#chat-model option").count() == 2  # both served models
    page.close()


def engine_regions(pdf: Path) -> tuple[dict[int, int], str]:
    """What the document engine finds in `pdf`, converted here as `modelhost convert` converts it: each page's
    count of placed items (every content layer), and the document's Markdown."""
    from docling_core.types.doc.document import ContentLayer

    from modelhost.documents import convert

    # A born-digital PDF: every page read from its text layer. On a thread of its own: Playwright's sync API runs an
    # event loop on this one.
    with ThreadPoolExecutor(1) as pool:
        conversion = pool.submit(asyncio.run, convert(pdf, None)).result()
    counts: dict[int, int] = {}
    items = conversion.document.iterate_items(traverse_pictures=True, included_content_layers=set(ContentLayer))
    for item, _level in items:
        for prov in getattr(item, "prov", None) or ():
            counts[prov.page_no] = counts.get(prov.page_no, 0) + 1
    return counts, conversion.render("md")


def test_a_dropped_pdf_shows_its_pages_with_the_engines_regions_and_markdown(browser: Any, served: Served) -> None:
    counts, markdown = engine_regions(PDF)
    page = open_page(browser, served, "documents")
    # A real drop: a File in a DataTransfer, dispatched on the drop zone as a browser does for a dragged file.
    page.evaluate(
        """([name, data]) => {
            const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
            const transfer = new DataTransfer();
            transfer.items.add(new File([bytes], name, { type: "application/pdf" }));
            const drop = new DragEvent("drop", { dataTransfer: transfer, bubbles: true });
            document.getElementById("drop").dispatchEvent(drop);
        }""",
        [PDF.name, base64.b64encode(PDF.read_bytes()).decode()],
    )
    page.wait_for_selector(".document[data-state=shown]")
    pages = page.locator(".document section.page")
    assert pages.count() == len(counts) == 5
    for index in range(pages.count()):
        section = pages.nth(index)
        number = int(section.get_attribute("data-page") or 0)
        assert section.locator(".region").count() == counts[number], f"page {number}'s regions"
        pane = section.locator(".pane[data-pane=Markdown] pre").inner_text()
        lines = [line for line in pane.splitlines() if line.strip()]
        assert lines and all(line in markdown for line in lines), f"page {number}'s Markdown is the document's"
    first = pages.nth(0)
    first.locator(".region").nth(2).click()  # a region selects its entry in the region list
    assert first.locator(".region-list li.selected").count() == 1
    assert first.locator(".region-list li").nth(2).get_attribute("class") == "selected"
    page.wait_for_function("document.querySelector('.page-image').naturalWidth > 0")
    shot(page, "documents")
    with page.expect_download() as download:
        page.locator(".downloads button", has_text="Markdown").click()
    assert Path(download.value.path()).read_text(encoding="utf-8") == markdown, "the download is convert's Markdown"
    page.close()


def test_a_chat_streams_shows_as_running_and_stop_cancels_it_on_the_server(browser: Any, served: Served) -> None:
    page = open_page(browser, served)
    cancelled_before = chat_model(served)["finished"]["cancelled"]
    page.select_option("#chat-model", label=chat_model(served)["name"])
    page.fill("#chat-max-tokens", "1000")
    page.fill("#chat-temperature", "0")
    page.fill("#chat-input", "Count from 1 to 500, one number per line.")
    page.press("#chat-input", "Enter")
    answer = page.locator("#chat-log .message.assistant").last
    content = "[...document.querySelectorAll('#chat-log .message.assistant .content')].at(-1)"
    page.wait_for_function(f"({content}?.textContent.length || 0) > 0")
    first = len(answer.locator(".content").inner_text())
    page.wait_for_function(f"{content}.textContent.length > {first}")
    assert answer.get_attribute("data-state") == "streaming", "the text grew while the answer had not ended"
    shot(page, "chat")

    page.click("#tab-state")
    row = page.locator("#models tr[data-model]", has_text="(default)")
    page.wait_for_function(
        "[...document.querySelectorAll('#models tr[data-model]')].some("
        "r => r.textContent.includes('(default)') && /[1-9] of \\d/.test(r.querySelector('td.running').textContent))"
    )
    assert row.locator("td.state").inner_text().startswith("ready")
    shot(page, "state")

    page.click("#tab-chat")
    page.click("#stop")
    page.wait_for_selector("#chat-log .message.assistant[data-state=stopped]")
    assert "stopped" in answer.locator(".stats").inner_text()
    # The server cancelled it: the slot is free and the request counted as cancelled (it would have run on to its
    # 1,000 tokens, finishing as "length" or "stop", had the server not seen the Stop).
    deadline = time.monotonic() + STATE_WAIT_SECONDS
    while (model := chat_model(served))["running"] or model["finished"]["cancelled"] != cancelled_before + 1:
        assert time.monotonic() < deadline, f"the server never cancelled the stopped answer: {model}"
        time.sleep(0.1)
    page.close()
