"""A raw-socket HTTP/1.1 client for tests of what a real client library would never send: trickled headers and
bodies, bytes past Content-Length, many idle connections. Loopback only; every wait is bounded, so a test that
meets a server which never answers fails within seconds instead of hanging.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from modelhost.testing.waiting import POLL_SECONDS


@dataclass
class Answer:
    """One HTTP answer as read off the socket."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    def json(self) -> Any:
        return json.loads(self.body)


def address(url: str) -> tuple[str, int]:
    """(host, port) of a server's base URL such as http://127.0.0.1:8000."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None, url
    return parts.hostname, parts.port


def request(method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None) -> bytes:
    """A whole request's bytes; Content-Length is the body's unless `headers` gives one (to lie about it)."""
    fields = {"host": "test", "content-length": str(len(body)), **(headers or {})}
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n"
    return head.encode("latin-1") + body


class Connection:
    """One TCP connection to a server, with bounded reads."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, url: str) -> Connection:
        reader, writer = await asyncio.open_connection(*address(url))
        return cls(reader, writer)

    async def send(self, data: bytes) -> bool:
        """Write `data`; False once the server has closed the connection."""
        if self.writer.is_closing() or self.reader.at_eof():
            return False
        try:
            self.writer.write(data)
            await self.writer.drain()
        except (ConnectionError, OSError):
            return False
        return True

    async def trickle(self, data: bytes, interval: float) -> int:
        """Send `data` one byte every `interval` seconds until it is all sent or the server closes; the bytes sent."""
        for sent in range(len(data)):
            if not await self.send(data[sent : sent + 1]):
                return sent
            await asyncio.sleep(interval)
        return len(data)

    async def read_all(self, timeout: float) -> bytes:
        """Everything the server sends until it closes the connection, or until `timeout` seconds have passed."""
        out = bytearray()
        try:
            async with asyncio.timeout(timeout):
                while chunk := await self.reader.read(65536):
                    out += chunk
        except (TimeoutError, ConnectionError):
            pass
        return bytes(out)

    async def closed_by_server(self, timeout: float) -> bool:
        """True if the server closes the connection within `timeout` (whatever it sends first is discarded)."""
        try:
            async with asyncio.timeout(timeout):
                while await self.reader.read(65536):
                    pass
        except TimeoutError:
            return False
        except ConnectionError:
            pass
        return True

    async def read_answer(self, timeout: float) -> Answer | None:
        """The next answer (Content-Length framed, as every answer these tests provoke is), or None if none came."""
        try:
            async with asyncio.timeout(timeout):
                head = await self.reader.readuntil(b"\r\n\r\n")
                answer = parse_head(head)
                length = int(answer.headers.get("content-length", "0"))
                answer.body = await self.reader.readexactly(length)
                return answer
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            return None

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()


def parse_head(head: bytes) -> Answer:
    """The status and headers (names lowercased) of an answer's head."""
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return Answer(status, headers)


def parse_answers(raw: bytes) -> list[Answer]:
    """Every Content-Length framed answer in `raw`, in order (what a connection sent before it closed)."""
    answers = []
    while raw:
        end = raw.find(b"\r\n\r\n")
        if end < 0:
            break
        answer = parse_head(raw[: end + 4])
        length = int(answer.headers.get("content-length", "0"))
        answer.body = raw[end + 4 : end + 4 + length]
        answers.append(answer)
        raw = raw[end + 4 + length :]
    return answers


async def refused_until_answered(url: str, path: str, timeout: float) -> int:
    """GET `path`, each time on a connection of its own, until the server answers 200 (a state it reaches by
    itself, such as a connection it has freed); the number of tries that got another answer or none (refusals it
    counted). AssertionError after `timeout` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    refused = 0
    while True:
        conn = await Connection.open(url)
        try:
            await conn.send(request("GET", path))
            answer = await conn.read_answer(timeout=timeout)
        finally:
            await conn.close()
        if answer is not None and answer.status == 200:
            return refused
        assert asyncio.get_running_loop().time() < deadline, f"GET {path} not answered 200 in {timeout:.0f} s: {answer}"
        refused += 1
        await asyncio.sleep(POLL_SECONDS)
