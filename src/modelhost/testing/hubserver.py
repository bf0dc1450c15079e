"""A tiny Hugging Face hub on loopback: the API shape and file layout that huggingface_hub's download code speaks.

Tests point `HF_ENDPOINT` at it and run the real client code against real sockets: `GET /api/models/{repo}` (the
listing with sizes, git blob ids and LFS sha256, as `model_info(files_metadata=True)` asks), `HEAD` and `GET
/{repo}/resolve/{revision}/{path}` (X-Repo-Commit, ETag, Content-Length; an LFS file redirected to a "CDN" on
another port with its X-Linked-Etag and X-Linked-Size, as the hub does), Range requests answered 206, and the hub's
error headers (`X-Error-Code: RepoNotFound | EntryNotFound | RevisionNotFound`).

Faults are what the tests exist for, so they are built in: `drop_after` hangs up a file's first GET after so many
bytes (a connection lost midway), `broken` hangs up every GET of a file halfway, `corrupt` serves a file with one
byte flipped while the listing and ETag still name the true hash (a bad mirror or disk), and `requests` records
every request with its Range header.

stdlib `http.server` rather than an ASGI app because a fault needs byte-level control of the socket: write half a
body under a full Content-Length, then shut the connection down.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import socket
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlsplit

# Files the hub stores in LFS (so lists with an sha256 and serves with an sha256 ETag), as a repo's .gitattributes
# usually says; the rest are plain git blobs identified by their git sha1.
_LFS_SUFFIXES = (".gguf", ".safetensors", ".bin", ".onnx")
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")
_CDN = re.compile(r"^/cdn/(?P<repo>[^/]+/[^/]+)/(?P<path>.+)$")
_API = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/revision/(?P<rev>[^/]+))?$")
_RANGE = re.compile(r"^bytes=(\d+)-$")
_CHUNK = 64 * 1024


def git_blob_id(data: bytes) -> str:
    """The git object id of a blob (what the hub lists as `blobId` and serves as ETag for non-LFS files)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Request:
    """One request the server saw."""

    method: str
    path: str
    range: str | None


@dataclass
class HubServer:
    """A loopback hub serving `repos` (repo id -> {repository path: bytes}); use as a context manager."""

    repos: Mapping[str, Mapping[str, bytes]]
    #: (repo, path) -> bytes after which the first GET of that file is cut off.
    drop_after: dict[tuple[str, str], int] = field(default_factory=dict)
    #: (repo, path) pairs whose every GET is cut off halfway (a link that keeps failing).
    broken: set[tuple[str, str]] = field(default_factory=set)
    #: (repo, path) pairs served with one byte flipped (listing and ETag still give the true hash).
    corrupt: set[tuple[str, str]] = field(default_factory=set)
    #: List files by name only, as the hub's listing does without `blobs=true` (no sizes, no hashes to check).
    hide_sizes: bool = False
    requests: list[Request] = field(default_factory=list)
    _connections: set[socket.socket] = field(default_factory=set)
    _servers: list[_Server] = field(default_factory=list)
    _threads: list[threading.Thread] = field(default_factory=list)

    def commit(self, repo: str) -> str:
        """The repository's commit id: a hash of its files, so changing a file makes a new commit."""
        h = hashlib.sha1()
        for path, data in sorted(self.repos[repo].items()):
            h.update(f"{path}\0{git_blob_id(data)}\0".encode())
        return h.hexdigest()

    _url: str = ""
    _cdn_url: str = ""

    @property
    def url(self) -> str:
        """The endpoint to put in HF_ENDPOINT (kept after `stop`, to point at a hub that is gone)."""
        assert self._url, "start the server first"
        return self._url

    @property
    def cdn_url(self) -> str:
        """Where LFS files are redirected to: another origin, as the hub's CDN is, so the client does not follow
        the HEAD's redirect but reads the file's metadata from it (X-Linked-Etag, X-Linked-Size)."""
        assert self._cdn_url, "start the server first"
        return self._cdn_url

    def __enter__(self) -> HubServer:
        hub = self

        class Handler(_Handler):
            server_hub = hub

        urls = []
        for _ in ("hub", "cdn"):
            server = _Server(("127.0.0.1", 0), Handler)
            host, port = server.server_address[:2]
            urls.append(f"http://{host!s}:{port}")
            thread = threading.Thread(target=server.serve_forever, name="hubserver", daemon=True)
            thread.start()
            self._servers.append(server)
            self._threads.append(thread)
        self._url, self._cdn_url = urls
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def stop(self) -> None:
        """Close the ports and every open connection (the hub goes offline: clients holding a keep-alive
        connection see it drop, new ones are refused); idempotent."""
        for server in self._servers:
            server.shutdown()
            server.server_close()
        for conn in list(self._connections):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join()
        self._servers.clear()
        self._threads.clear()

    def listing(self, repo: str) -> dict[str, Any]:
        """The JSON of `GET /api/models/{repo}?blobs=true`."""
        siblings = []
        for path, data in sorted(self.repos[repo].items()):
            if self.hide_sizes:
                siblings.append({"rfilename": path})
                continue
            entry: dict[str, Any] = {"rfilename": path, "size": len(data), "blobId": git_blob_id(data)}
            if path.endswith(_LFS_SUFFIXES):
                entry["lfs"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "pointerSize": 134}
            siblings.append(entry)
        return {"id": repo, "modelId": repo, "sha": self.commit(repo), "private": False, "siblings": siblings}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-body (a test abandoning a pull) is expected here, not worth a traceback.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server_hub: HubServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.server_hub._connections.add(self.connection)

    def finish(self) -> None:
        self.server_hub._connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:  # quiet: pytest shows failures, not access logs
        pass

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _error(self, status: int, code: str, commit: str | None = None) -> None:
        payload = json.dumps({"error": code}).encode()
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        if commit is not None:
            self.send_header("X-Repo-Commit", commit)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _answer(self, *, body: bool) -> None:
        hub = self.server_hub
        path = unquote(urlsplit(self.path).path)
        hub.requests.append(Request(self.command, path, self.headers.get("Range")))
        api = _API.match(path)
        if api is not None:
            repo = api["repo"]
            if repo not in hub.repos:
                return self._error(404, "RepoNotFound")
            if api["rev"] not in (None, "main", hub.commit(repo)):
                return self._error(404, "RevisionNotFound")
            payload = json.dumps(hub.listing(repo)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if body:
                self.wfile.write(payload)
            return None
        cdn = _CDN.match(path)
        if cdn is not None and cdn["path"] in hub.repos.get(cdn["repo"], {}):
            repo, rel = cdn["repo"], cdn["path"]
            return self._file(repo, rel, hub.repos[repo][rel], hub.commit(repo), body=body)
        resolve = _RESOLVE.match(path)
        if resolve is None or resolve["repo"] not in hub.repos:
            return self._error(404, "RepoNotFound")
        repo, rel = resolve["repo"], resolve["path"]
        commit = hub.commit(repo)
        if resolve["rev"] not in ("main", commit):
            return self._error(404, "RevisionNotFound")
        if rel not in hub.repos[repo]:
            return self._error(404, "EntryNotFound", commit)
        if rel.endswith(_LFS_SUFFIXES):
            return self._redirect(repo, rel, hub.repos[repo][rel], commit)
        return self._file(repo, rel, hub.repos[repo][rel], commit, body=body)

    def _redirect(self, repo: str, rel: str, data: bytes, commit: str) -> None:
        """An LFS file, as the hub answers it: 302 to the CDN, the file's own ETag and size in X-Linked-* headers."""
        self.send_response(302)
        self.send_header("Location", f"{self.server_hub.cdn_url}/cdn/{repo}/{rel}")
        self.send_header("X-Repo-Commit", commit)
        self.send_header("X-Linked-Etag", f'"{hashlib.sha256(data).hexdigest()}"')
        self.send_header("X-Linked-Size", str(len(data)))
        self.send_header("ETag", f'"{git_blob_id(data)}"')  # the pointer file's, as on the hub
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _file(self, repo: str, rel: str, data: bytes, commit: str, *, body: bool) -> None:
        hub = self.server_hub
        lfs = rel.endswith(_LFS_SUFFIXES)
        etag = hashlib.sha256(data).hexdigest() if lfs else git_blob_id(data)
        if (repo, rel) in hub.corrupt:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        start = 0
        wanted = _RANGE.match(self.headers.get("Range") or "")
        if wanted is not None and body:
            start = min(int(wanted.group(1)), len(data))
        self.send_response(206 if start else 200)
        self.send_header("X-Repo-Commit", commit)
        self.send_header("ETag", f'"{etag}"')
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(data) - start))
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.end_headers()
        if not body:
            return
        cut = hub.drop_after.pop((repo, rel), None)
        if (repo, rel) in hub.broken:
            cut = (len(data) - start) // 2
        end = len(data) if cut is None else min(len(data), start + cut)
        for offset in range(start, end, _CHUNK):
            self.wfile.write(data[offset : min(offset + _CHUNK, end)])
        self.wfile.flush()
        if cut is not None:
            # The connection is lost midway: the client holds `cut` bytes of a body it was promised in full.
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)


def repo_files(folder: Path) -> dict[str, bytes]:
    """A model folder (or one file) as a hub repository's {path: bytes}, for HubServer."""
    if folder.is_file():
        return {folder.name: folder.read_bytes()}
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
