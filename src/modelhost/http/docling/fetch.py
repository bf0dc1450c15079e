"""URL sources (`{"kind": "http", "url"}`): fetched only when the operator allows it (`serve --allow-fetch`), within
a size and a time bound, from public addresses only unless private ones are allowed too (`--fetch-private`).

A server that fetches what a request names is a way into the networks it can reach (SSRF): a cloud's metadata
address, a database on loopback. So every address a host name resolves to must be public, and the request goes to
the address that was checked (the name stays in the Host header and, for https, in SNI and the certificate check),
so a second DNS answer at connect time cannot pick another peer. Each redirect is checked the same way, and there
are at most MAX_REDIRECTS. Only http and https: a `file://` source is refused whatever the settings.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote

import httpx

#: Whole-fetch bound: connecting, redirects and the body together. A document server answers in seconds; a peer
#: that trickles bytes must not hold a request (and its slot) for longer than a minute.
FETCH_SECONDS: Final = 60.0
#: Connect bound of each hop: an address that does not answer is given up on quickly.
CONNECT_SECONDS: Final = 10.0
#: Redirects followed: a real document link has one or two; a loop must end.
MAX_REDIRECTS: Final = 5
#: Headers a source may ask to send, and the longest value: a token or a cookie, not a way to send megabytes.
MAX_HEADERS: Final = 32
MAX_HEADER_CHARS: Final = 8192
#: Headers a source may not set: they belong to the connection the fetch makes to the checked address.
_RESERVED = frozenset({"host", "content-length", "transfer-encoding", "connection", "upgrade"})
_FILENAME = re.compile(r"""filename\*?=(?:UTF-8'')?"?([^";]+)"?""", re.IGNORECASE)


class FetchRefused(ValueError):
    """A URL this server will not fetch (policy: off, scheme, private address): 422, the message its detail."""


class FetchFailed(ValueError):
    """A fetch that was tried and failed (unreachable, refused by the peer, too large, too slow)."""


@dataclass(frozen=True, slots=True)
class Policy:
    """What may be fetched: nothing unless `allowed`; private and loopback addresses only if `private`."""

    allowed: bool = False
    private: bool = False
    max_bytes: int = 512 << 20
    seconds: float = FETCH_SECONDS


@dataclass(frozen=True, slots=True)
class Fetched:
    """A fetched document, written to `path`: the name it goes by, its content type, its size and its first bytes."""

    filename: str
    content_type: str
    size: int
    head: bytes


def check_headers(headers: dict[str, Any]) -> dict[str, str]:
    """The source's own headers, bounded; FetchRefused for too many, too long or reserved ones."""
    if len(headers) > MAX_HEADERS:
        raise FetchRefused(f"headers: at most {MAX_HEADERS}")
    out: dict[str, str] = {}
    for name, value in headers.items():
        text = str(value)
        if name.lower() in _RESERVED or len(name) + len(text) > MAX_HEADER_CHARS:
            raise FetchRefused(f"headers: {name[:80]!r} cannot be sent")
        out[name] = text
    return out


async def _checked_address(url: httpx.URL, policy: Policy) -> str:
    """The address to connect to for `url`: every address its host resolves to checked against the policy."""
    if url.scheme not in ("http", "https"):
        raise FetchRefused(f"URL scheme {url.scheme!r} is not fetched: only http and https")
    host = url.host
    if not host:
        raise FetchRefused("the URL has no host")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise FetchFailed(f"{host}: cannot resolve it ({exc.strerror or exc})") from exc
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise FetchFailed(f"{host}: no address")
    if not policy.private:
        for address in addresses:
            if not ipaddress.ip_address(address.split("%", 1)[0]).is_global:
                raise FetchRefused(
                    f"{host} resolves to {address}, a private or loopback address; this server fetches only public "
                    "ones (serve --fetch-private allows the others)"
                )
    return addresses[0]


def _filename(response: httpx.Response, url: httpx.URL) -> str:
    match = _FILENAME.search(response.headers.get("content-disposition", ""))
    name = unquote(match.group(1)) if match else unquote(url.path.rsplit("/", 1)[-1])
    name = name.replace("\\", "/").rsplit("/", 1)[-1].strip()
    return name[:200] or "document"


async def fetch(url_text: str, headers: dict[str, Any], path: Path, policy: Policy) -> Fetched:
    """Fetch `url_text` into `path`. FetchRefused when the policy forbids it, FetchFailed when it fails."""
    if not policy.allowed:
        raise FetchRefused("URL sources are off on this server (serve --allow-fetch turns them on)")
    try:
        url = httpx.URL(url_text)
    except (httpx.InvalidURL, TypeError) as exc:
        raise FetchRefused(f"not a URL: {exc}") from exc
    sent = check_headers(headers)
    timeout = httpx.Timeout(policy.seconds, connect=CONNECT_SECONDS)
    try:
        async with asyncio.timeout(policy.seconds), httpx.AsyncClient(timeout=timeout, trust_env=False) as client:
            for _ in range(MAX_REDIRECTS + 1):
                address = await _checked_address(url, policy)
                target = url.copy_with(host=address)
                extensions = {"sni_hostname": url.host} if url.scheme == "https" else {}
                request = client.build_request(
                    "GET", target, headers={**sent, "Host": url.netloc.decode("ascii")}, extensions=extensions
                )
                response = await client.send(request, stream=True)
                try:
                    if response.is_redirect and "location" in response.headers:
                        url = url.join(response.headers["location"])
                        continue
                    if response.status_code >= 400:
                        raise FetchFailed(f"{url_text[:200]}: the server answered {response.status_code}")
                    return await _save(response, url, path, policy.max_bytes)
                finally:
                    await response.aclose()
            raise FetchFailed(f"{url_text[:200]}: more than {MAX_REDIRECTS} redirects")
    except TimeoutError:
        raise FetchFailed(f"{url_text[:200]}: not fetched within {policy.seconds:g} s") from None
    except httpx.HTTPError as exc:
        raise FetchFailed(f"{url_text[:200]}: {type(exc).__name__}: {exc}") from exc


async def _save(response: httpx.Response, url: httpx.URL, path: Path, limit: int) -> Fetched:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise FetchFailed(f"the document is {declared} bytes, over the limit of {limit}")
    size = 0
    head = b""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > limit:
                raise FetchFailed(f"the document is over the limit of {limit} bytes")
            if len(head) < 1024:
                head += chunk[: 1024 - len(head)]
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    content_type = response.headers.get("content-type", "application/octet-stream").split(";", 1)[0].strip()
    return Fetched(_filename(response, url), content_type, size, head)


__all__ = ["FetchFailed", "FetchRefused", "Fetched", "Policy", "fetch"]
