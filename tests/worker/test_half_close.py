"""A client that sends fewer body bytes than its Content-Length and then shuts its writing side (a half-close) gets a
400 on both HTTP doors, real servers over a raw loopback socket (issue 35 item 6): it was closed without an answer.
(A whole request followed by a FIN still closes as before: a FIN cannot tell a half-close from a hang-up, and the
close is how a waiting request learns its client left.)"""

from __future__ import annotations

import asyncio
from pathlib import Path

from modelhost.http import HttpServer
from modelhost.testing.waiting import STATE_WAIT_SECONDS

from .helpers import paced_host, start_server


async def _half_closed(url: str, head: bytes, body: bytes) -> bytes:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(head + body)
    await writer.drain()
    writer.write_eof()  # shutdown(SHUT_WR): no more bytes will come, but the answer can still be read
    answer = await asyncio.wait_for(reader.read(), STATE_WAIT_SECONDS)
    writer.close()
    return answer


def _post(path: str, declared: int) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {declared}\r\n\r\n"
    ).encode()


def test_a_short_body_then_a_half_close_is_answered_400_on_both_doors(tmp_path: Path) -> None:
    async def main() -> None:
        host = await paced_host()
        worker = await start_server(host, tmp_path / "state")
        http = HttpServer(host, port=0)
        await http.start()
        try:
            for url, path in ((worker.url, "/v1/jobs"), (http.url, "/v1/chat/completions")):
                answer = await _half_closed(url, _post(path, 100), b'{"operation": "te')
                assert answer.startswith(b"HTTP/1.1 400"), (path, answer[:300])
                assert b"ended before its Content-Length" in answer, answer[:300]
        finally:
            await http.aclose()
            await worker.aclose()
            await host.aclose()

    asyncio.run(main())
