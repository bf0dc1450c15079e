"""Two raylets on one machine (the head on 127.0.0.2, a second node on 127.0.0.3): `convert --ray`'s actors land
on both, and the conversion survives the second node's loss mid-run with the same document a plain conversion
writes.

Four pages of the corpus's Redbook read from their pixels by the `ocr` model (--no-text-layer): one page per piece,
each piece seconds of work, so the second node is lost while pieces are still being read there.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from modelhost.documents import batch
from modelhost.documents.readers import StartingReader
from modelhost.documents.settings import ConvertSettings
from modelhost.host import Host
from modelhost.inference import catalogue, registry
from modelhost.testing import raynodes
from modelhost.testing.waiting import wait_until

DOCUMENT = Path(__file__).resolve().parents[1] / "corpus" / "documents" / "pdf" / "redp5110_sampled.pdf"
PAGES = "1-4"
#: Those pages, every one read from its pixels (the text layer left aside), as pdf-spec's pages arrive.
ONLY_PIXELS = ConvertSettings(pages=PAGES, text_layer=False)


def plain(output: Path) -> list[Any]:
    """The document as a plain `convert` writes it: one engine, the `ocr` model in this process."""
    path = catalogue.resolve("ocr")

    async def run() -> list[Any]:
        host = Host(lambda: registry.load_model(path, None), name="ocr")
        try:
            reader = StartingReader(host)
            return await batch.convert_files([DOCUMENT], reader, output=output, fmt="json", settings=ONLY_PIXELS)
        finally:
            await host.aclose()

    return asyncio.run(run())


#: A node's start, two model loads, 4 pages read twice (here and over Ray) and a recovery, on 2 loaded cores.
TEST_SECONDS = 900


@pytest.mark.slow
@pytest.mark.timeout(TEST_SECONDS)
def test_work_lands_on_both_nodes_and_survives_the_second_nodes_loss(
    ray_head: raynodes.RayNode, ray_driver: Any, ray_env: dict[str, str], short_tmp: Path, tmp_path: Path
) -> None:
    from modelhost.ray import documents

    second = raynodes.RayNode.start(raynodes.SECOND_IP, short_tmp / "n2", ray_env, head=ray_head.address, num_cpus=1)
    try:

        def joined() -> bool:
            return sum(1 for node in ray_driver.nodes() if node["Alive"]) == 2

        wait_until(joined, what="the second node joined")
        nodes: list[str] = []
        lost = threading.Event()

        def on_piece(path: Path, node: str, count: int) -> None:
            nodes.append(node)
            if node == raynodes.SECOND_IP and not lost.is_set():
                lost.set()
                second.kill()  # every process of the node, at once: a machine that dies

        settings = documents.ReadSettings("ocr", "ocr", convert=ONLY_PIXELS)
        outcomes = documents.convert_files(
            ray_head.address,
            [DOCUMENT],
            settings,
            actors=2,
            output=tmp_path / "ray.json",
            fmt="json",
            on_piece=on_piece,
        )
    finally:
        second.stop()
    assert lost.is_set(), f"no piece was read on the second node: {nodes}"
    assert raynodes.HEAD_IP in nodes, nodes
    (outcome,) = outcomes
    assert not outcome.error and outcome.conversion is not None, outcome.error
    assert outcome.conversion.unread == {}, outcome.conversion.unread
    assert [p.number for p in outcome.conversion.pages] == list(range(1, 5))
    # The document is the one a single engine writes, the second node's pieces read again on the head.
    (reference,) = plain(tmp_path / "plain.json")
    assert not reference.error, reference.error
    assert (tmp_path / "ray.json").read_text(encoding="utf-8") == (tmp_path / "plain.json").read_text(encoding="utf-8")
