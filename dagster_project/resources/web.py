"""The web resource: the only way veritas touches the web.

Two modes share one interface:
- ``live`` fetches over HTTP(S) with an httpx AsyncClient on the resource's own event loop thread, politely
  (per-host concurrency and delay, robots.txt cached per host, an honest User-Agent, retries with backoff on
  429/5xx honouring Retry-After), behind an SSRF guard, and appends every hop (request + response) and every
  failure to a gzip WARC file, so that the run can be replayed byte for byte later;
- ``replay`` serves responses from WARC files only and never opens a socket (no event loop either).

Bodies are stored in the WARC exactly as they came over the wire (still content-encoded); both modes
decode them with a capped decoder, so live and replay return the same bytes for the same record.
Sync callers use ``fetch`` / ``fetch_many``; both block until the loop thread has the answer.
"""

import asyncio
import codecs
import datetime as dt
import functools
import hashlib
import io
import json
import logging
import os
import re
import socket
import threading
import time
import urllib.robotparser
import uuid
from concurrent.futures import Future
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urljoin, urlsplit

import backoff
import dagster as dg
import httpcore
import httpx
import pydantic
from pydantic import Field, PrivateAttr
from warcio.archiveiterator import ArchiveIterator
from warcio.bufferedreaders import BufferedReader
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from dagster_project.resources.crawl_guard import (
    ALLOWED_SCHEMES,
    DEFAULT_PORTS,
    Allowlist,
    StreamDecoder,
    is_blocked_ip,
    literal_ip,
    refused_addresses,
    retry_after_seconds,
    split_target,
)
from dagster_project.resources.files import atomic_write

_LOG = logging.getLogger(__name__)

__all__ = ["ALLOWED_SCHEMES", "FetchResult", "WebResource", "normalize_url"]

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# Our own fields inside failure `metadata` records; the prefix keeps them apart from other tools' metadata.
ERROR_FIELD = "veritas-error"
DETAIL_FIELD = "veritas-error-detail"
# Extension WARC field on records of requests other than a plain GET: "<METHOD> sha1:<body digest>".
VARIANT_FIELD = "Veritas-Request-Variant"
ASSEMBLED_FIELD = "Veritas-Assembled-From"  # on a resource record: the whole body rebuilt from partial answers
# WARC-Truncated reason -> FetchResult.error, so a replayed truncated record reports what the live fetch did.
TRUNCATION_ERRORS = {"length": "too_large", "time": "timeout", "disconnect": "read_error", "unspecified": "truncated"}
# Hop-by-hop framing that httpx already removed from the body we store, so it must not be recorded either.
DROPPED_RESPONSE_HEADERS = frozenset({"transfer-encoding"})
# Request headers that carry credentials (a paid backend's key): the WARC keeps their name, never their value.
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "cookie"})
REDACTED = "[redacted]"
# Failures worth another attempt; refusals (blocked_address, bad_scheme, robots, too_large) are final.
RETRYABLE_ERRORS = frozenset({"timeout", "connect_error", "read_error", "http_error"})
ROBOTS_AGENT = "veritas-benchmark"
_META_CHARSET_RE = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_READ_CHUNK = 64 * 1024
# Index ranks: a final answer beats a partial or retryable one, which beats a recorded failure.
RANK_FAILURE, RANK_PARTIAL, RANK_FINAL = 0, 1, 2
MAX_IDLE_CLIENTS = 256  # origins whose connections stay open


class FetchResult(pydantic.BaseModel):
    """What one fetch produced, live or replayed."""

    url: str
    final_url: str
    status: int | None
    headers: dict[str, str] = Field(default_factory=dict)
    content: bytes = b""
    error: str | None = None
    error_detail: str = ""
    elapsed_s: float = 0.0
    # URLs that answered with a redirect, in order (starts with `url` when any redirect happened).
    redirects: list[str] = Field(default_factory=list)
    # WARC file the final response was written to (live) or served from (replay).
    warc_path: str | None = None
    attempts: int = 0  # network attempts of the final hop (0: served from the archive or refused before sending)
    from_archive: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and self.status is not None and 200 <= self.status < 300

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()

    def text(self) -> str:
        """Body decoded with the header charset, else an HTML meta charset or BOM, else UTF-8."""
        for candidate in (self._header_charset(), self._meta_charset()):
            codec = _known_codec(candidate)
            if codec:
                return self.content.decode(codec, errors="replace")
        if self.content.startswith(codecs.BOM_UTF8):
            return self.content[len(codecs.BOM_UTF8):].decode("utf-8", errors="replace")
        if self.content.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            return self.content.decode("utf-16", errors="replace")
        return self.content.decode("utf-8", errors="replace")

    def _header_charset(self) -> str | None:
        for param in self.headers.get("content-type", "").split(";")[1:]:
            key, _, value = param.partition("=")
            if key.strip().lower() == "charset":
                return value.strip().strip("\"'")
        return None

    def _meta_charset(self) -> str | None:
        # Browsers only look at the first 1024 bytes; a bit more tolerates long <head>s.
        match = _META_CHARSET_RE.search(self.content[:4096])
        return match.group(1).decode("ascii") if match else None


def _known_codec(name: str | None) -> str | None:
    if not name:
        return None
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def normalize_url(url: str) -> str:
    """Canonical form used as the replay key: lower-case scheme/host, no default port, no fragment, path >= '/'."""
    url = url.strip().strip("<>")  # WARC 1.0 examples wrap target URIs in angle brackets
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        return url.split("#", 1)[0]
    if not parsed.host:
        return str(parsed.copy_with(fragment=None))
    netloc = parsed.netloc.decode("ascii")
    if parsed.port is not None and DEFAULT_PORTS.get(parsed.scheme) == parsed.port:
        netloc = netloc.rsplit(":", 1)[0]
    raw_path = parsed.raw_path.decode("ascii") or "/"
    if raw_path.startswith("?"):
        raw_path = "/" + raw_path
    return f"{parsed.scheme}://{netloc}{raw_path}"


def _headers_dict(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """Lower-cased keys; repeated headers are joined the way HTTP allows (comma-separated)."""
    out: dict[str, str] = {}
    for key, value in pairs:
        key = key.lower()
        out[key] = f"{out[key]}, {value}" if key in out else value
    return out


def _decode_body(raw: bytes, content_encoding: str | None, max_bytes: int) -> tuple[bytes, bool]:
    """Undo Content-Encoding with a cap on the decoded size: gzip/deflate streamed, others via warcio."""
    decoder = StreamDecoder(content_encoding or "", max_bytes)
    if decoder.streaming:
        decoder.feed(raw)
        if not decoder.failed:
            return decoder.result(), decoder.exceeded
        return raw[:max_bytes], len(raw) > max_bytes  # a broken stream is kept as it came
    encoding = (content_encoding or "").strip().lower()
    if encoding not in BufferedReader.get_supported_decompressors():
        return raw[:max_bytes], len(raw) > max_bytes
    return _read_capped(BufferedReader(io.BytesIO(raw), decomp_type=encoding), max_bytes)


def _read_capped(stream: Any, max_bytes: int) -> tuple[bytes, bool]:
    """Read at most max_bytes; the flag says there was more."""
    chunks: list[bytes] = []
    total = 0
    while total <= max_bytes:
        chunk = stream.read(min(_READ_CHUNK, max_bytes + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    data = b"".join(chunks)
    return data[:max_bytes], len(data) > max_bytes


def _status_rank(status: int | None, truncated: str | None) -> int:
    if status is None:
        return RANK_FAILURE
    if truncated or status in (206, 304) or status == 429 or status >= 500:
        return RANK_PARTIAL
    return RANK_FINAL


class _Hop(pydantic.BaseModel):
    """One request/response exchange inside fetch(); internal."""

    status: int | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    content: bytes = b""
    error: str | None = None
    detail: str = ""
    location: str | None = None
    warc_path: str | None = None
    attempts: int = 0
    from_archive: bool = False


class _IndexEntry(NamedTuple):
    path: str
    offset: int
    kind: str  # "response", "resource" or "failure"
    rank: int = RANK_FINAL


# Next to each WARC the index of its records is kept (<file>.index.json), valid while the file's size and mtime
# are unchanged, so a start-up reads each archived file once, not at every run.
INDEX_SUFFIX = ".index.json"
WARC_SUFFIXES = (".warc", ".warc.gz")
INDEX_VERSION = 1
DAMAGED = "damaged_in_archive"  # the WARC ends inside the record (e.g. the crawler was killed while writing)


class _HostState:
    """Per-host politeness, created and used on the loop thread only."""

    def __init__(self, concurrency: int, delay_s: float):
        self.slots = asyncio.Semaphore(max(1, concurrency))
        self.lock = asyncio.Lock()
        self.delay_s = delay_s
        self.next_start = 0.0  # loop time before which no request to this host may start
        self.active = 0  # requests in flight (their client must not be closed)

    async def turn(self) -> None:
        """Wait until this host may get its next request, then book the following slot."""
        loop = asyncio.get_running_loop()
        async with self.lock:
            # re-read after each sleep: an exchange that ended meanwhile may have pushed the slot back
            while (wait := self.next_start - loop.time()) > 0:
                await asyncio.sleep(wait)
            self.next_start = loop.time() + self.delay_s

    def answered(self) -> None:
        """The exchange is over, so the server has read the request: the next one starts a full delay later, and
        however late this request left or was read, the server never sees two closer than the delay."""
        self.next_start = max(self.next_start, asyncio.get_running_loop().time() + self.delay_s)

    def push_back(self, seconds: float) -> None:
        """The server asked the whole host to slow down (429/503 with Retry-After)."""
        self.next_start = max(self.next_start, asyncio.get_running_loop().time() + seconds)


BLOCKED_AT_CONNECT = "veritas: refused at connect:"


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """Resolves, checks and connects to the checked address itself, so a DNS answer that changes between the
    pre-hop check and the connect (rebinding) cannot reach a private address."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend, allow: Allowlist):
        self._inner, self._allow = inner, allow

    async def connect_tcp(self, host: str, port: int, timeout=None, local_address=None, socket_options=None):
        if self._allow.name_allowed(host):
            return await self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        if literal_ip(host) is not None:
            addresses = [str(literal_ip(host))]
        else:
            try:
                infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except (OSError, UnicodeError) as exc:
                raise httpcore.ConnectError(f"name resolution failed: {exc}") from exc
            addresses = list(dict.fromkeys(info[4][0].split("%", 1)[0] for info in infos))
        refused = refused_addresses(addresses, self._allow)
        if refused or not addresses:
            raise httpcore.ConnectError(f"{BLOCKED_AT_CONNECT} {host} -> {', '.join(refused)}")
        error: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:
                error = exc
        raise error

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise httpcore.ConnectError("unix sockets are never used")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class WebResource(dg.ConfigurableResource):
    """Fetch URLs live (politely, archiving everything to WARC) or replay them from WARC files."""

    mode: str = "replay"
    warc_paths: list[str] = []  # noqa: RUF012 - pydantic copies field defaults
    archive_dir: str = ".veritas/warc"
    user_agent: str = (
        f"{ROBOTS_AGENT}/0.1 (research crawler for a fact-checking benchmark; obeys robots.txt; "
        "contact: see the veritas README)"
    )
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 30.0
    # Whole-exchange wall clock per attempt: bounds slow-drip servers that never trip the read timeout.
    max_fetch_s: float = 120.0
    max_bytes: int = 32 * 1024 * 1024  # both on the wire and after decompression
    max_redirects: int = 5
    # Host names or address networks (e.g. "127.0.0.0/8") that may resolve to private addresses: tests only.
    allow_private_hosts: list[str] = []  # noqa: RUF012 - pydantic copies field defaults
    # politeness
    max_concurrency: int = 32
    per_host_concurrency: int = 2
    per_host_delay_s: float = 1.0
    # "public": robots.txt for every host except the explicitly allowlisted private ones; "always"; "never".
    robots: str = "public"
    max_crawl_delay_s: float = 30.0
    # retries on 429 / 5xx / timeouts / resets
    max_retries: int = 3
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0  # a Retry-After longer than this ends the retries instead of waiting
    # live: a URL whose archive (warc_paths + archive_dir) already holds a final answer is served from it when
    # the caller asks (reuse=True), so a re-run fetches only what failed.
    reuse_archive: bool = True

    _lock: threading.RLock = PrivateAttr(default_factory=threading.RLock)
    _loop: asyncio.AbstractEventLoop | None = PrivateAttr(default=None)
    _thread: threading.Thread | None = PrivateAttr(default=None)
    _clients: dict[str, httpx.AsyncClient] = PrivateAttr(default_factory=dict)
    _ssl_context: Any = PrivateAttr(default=None)
    _global_slots: asyncio.Semaphore | None = PrivateAttr(default=None)
    _hosts: dict[str, _HostState] = PrivateAttr(default_factory=dict)
    _robots: dict[str, Any] = PrivateAttr(default_factory=dict)
    _robots_locks: dict[str, asyncio.Lock] = PrivateAttr(default_factory=dict)
    _warc_file: Any = PrivateAttr(default=None)
    _warc_writer: WARCWriter | None = PrivateAttr(default=None)
    _warc_path: str | None = PrivateAttr(default=None)
    _index: dict[str, _IndexEntry] | None = PrivateAttr(default=None)
    _log: list[dict] = PrivateAttr(default_factory=list)

    # ---- lifecycle -------------------------------------------------------------------------

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        if self.mode not in ("live", "replay"):
            raise ValueError(f"WebResource.mode must be 'live' or 'replay', not {self.mode!r}")
        if self.mode == "replay":
            self._ensure_index()

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        self.close()

    def close(self) -> None:
        """Stop the loop thread, release the HTTP client and finish the WARC file (safe to call twice)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None:
            try:
                asyncio.run_coroutine_threadsafe(self._aclose(), loop).result(timeout=10)
            finally:
                loop.call_soon_threadsafe(loop.stop)
                if thread is not None:
                    thread.join(timeout=10)
                loop.close()
        with self._lock:
            self._hosts, self._robots, self._robots_locks = {}, {}, {}
            self._global_slots = None
            if self._warc_file is not None:
                self._warc_file.close()
                self._warc_file = None
                self._warc_writer = None

    async def _aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()

    @property
    def warc_path(self) -> str | None:
        """The WARC file this instance writes in live mode (None until the first record)."""
        return self._warc_path

    def fetch_log(self, since: int = 0) -> list[dict]:
        """One entry per fetch() (url, final_url, status, bytes, elapsed_s, at, error, mode, attempts, from_archive);
        ``since`` skips the entries an earlier stage already read."""
        with self._lock:
            return [dict(entry) for entry in self._log[since:]]

    def fetch_log_size(self) -> int:
        with self._lock:
            return len(self._log)

    def extend_fetch_log(self, entries: list[dict]) -> None:
        """Entries logged by a copy of this resource in a worker process (parallel replay in stage 3)."""
        with self._lock:
            self._log.extend(dict(entry) for entry in entries)

    def load_replay_index(self) -> None:
        """Index the WARC files now (e.g. before forking workers that share it); fetches do it on demand."""
        self._ensure_index()

    # ---- public fetch ----------------------------------------------------------------------

    def fetch(
        self,
        url: str,
        headers: dict[str, str] | None = None,
        *,
        content_types: tuple[str, ...] | None = None,
        max_bytes: int | None = None,
        reuse: bool = False,
        method: str = "GET",
        data: bytes | None = None,
    ) -> FetchResult:
        """GET ``url`` following redirects (each hop checked and archived).

        headers: extra request headers (Range, If-None-Match...); content_types: accepted type prefixes (a 2xx
        of another type is refused as ``bad_content_type`` without reading its body; a missing Content-Type
        passes); max_bytes: a cap for this call (videos); reuse: serve a final answer already in the archive
        instead of fetching again; method/data: a POST with a body (yt-dlp's API calls), archived and replayed
        under the URL plus the method and the body's digest.
        """
        return self.fetch_many(
            [url], headers, content_types=content_types, max_bytes=max_bytes, reuse=reuse, method=method, data=data
        )[0]

    def fetch_many(
        self,
        urls: list[str],
        headers: dict[str, str] | None = None,
        *,
        content_types: tuple[str, ...] | None = None,
        max_bytes: int | None = None,
        reuse: bool = False,
        method: str = "GET",
        data: bytes | None = None,
    ) -> list[FetchResult]:
        """Fetch several URLs concurrently (live; politeness still applies per host), results in input order."""
        if self.mode not in ("live", "replay"):
            raise ValueError(f"WebResource.mode must be 'live' or 'replay', not {self.mode!r}")
        method = method.upper()
        if method not in ("GET", "POST"):
            raise ValueError(f"WebResource fetches with GET or POST, not {method}")
        cap = max_bytes or self.max_bytes
        opts = {
            "headers": dict(headers or {}), "content_types": content_types, "max_bytes": cap, "method": method,
            "data": data,
        }
        if self.mode == "replay":
            results = []
            for url in urls:  # replay is plain file reading: no loop, no socket
                start = time.monotonic()
                result = self._follow_sync(
                    url, lambda u, m, d: self._replay_hop(u, cap, m, d), content_types, method, data
                )
                results.append(self._log_result(result, start))
            return results
        loop = self._ensure_loop()
        if threading.current_thread() is self._thread:
            raise RuntimeError("WebResource.fetch called from its own event loop thread")
        future: Future = asyncio.run_coroutine_threadsafe(
            self._gather(urls, reuse=reuse and self.reuse_archive, **opts), loop
        )
        return future.result()

    async def _gather(self, urls: list[str], **opts) -> list[FetchResult]:
        async def one(url: str) -> FetchResult:
            start = time.monotonic()
            try:
                result = await self._afollow(url, **opts)
            except Exception as exc:  # noqa: BLE001 - one URL must never take the batch down
                result = FetchResult(url=url, final_url=url, status=None, error="internal_error", error_detail=repr(exc))
            return self._log_result(result, start)

        unique = list(dict.fromkeys(urls))  # a URL listed twice is fetched once
        done = dict(zip(unique, await asyncio.gather(*(one(u) for u in unique)), strict=True))
        out, seen = [], set()
        for url in urls:
            out.append(done[url].model_copy(deep=True) if url in seen else done[url])
            seen.add(url)
        return out

    def _log_result(self, result: FetchResult, start: float) -> FetchResult:
        result.elapsed_s = time.monotonic() - start
        with self._lock:
            self._log.append(
                {
                    "url": result.url,
                    "final_url": result.final_url,
                    "status": result.status,
                    "bytes": len(result.content),
                    "elapsed_s": result.elapsed_s,
                    "at": time.time(),  # when the fetch finished (unix seconds)
                    "error": result.error,
                    "mode": self.mode,
                    "attempts": result.attempts,
                    "from_archive": result.from_archive,
                }
            )
        return result

    # ---- redirects (shared by both modes) -------------------------------------------------

    def _start_chain(self, url: str) -> tuple[str, set[str], list[str]]:
        current = url.split("#", 1)[0]
        return current, {normalize_url(current)}, []

    def _step(self, url: str, current: str, hop: _Hop, seen: set[str], redirects: list[str], content_types):
        """(next URL or None, the result so far): the one redirect rule for live and replay."""
        result = FetchResult(
            url=url,
            final_url=current,
            status=hop.status,
            headers=hop.headers,
            content=hop.content,
            error=hop.error,
            error_detail=hop.detail,
            redirects=list(redirects),
            warc_path=hop.warc_path,
            attempts=hop.attempts,
            from_archive=hop.from_archive,
        )
        if (
            hop.error is None
            and hop.status is not None
            and 200 <= hop.status < 300
            and content_types is not None
            and result.content_type  # no Content-Type at all is left to the caller's own sniffing
            and not any(result.content_type.startswith(t) for t in content_types)
        ):
            result.error, result.error_detail, result.content = "bad_content_type", result.content_type, b""
        if hop.error is not None or hop.status not in REDIRECT_STATUSES or not hop.location:
            return None, result
        target = urljoin(current, hop.location.strip()).split("#", 1)[0]
        if normalize_url(target) in seen:
            result.error = "redirect_loop"
            return None, result
        if len(redirects) >= self.max_redirects:
            result.error = "too_many_redirects"
            return None, result
        redirects.append(current)
        seen.add(normalize_url(target))
        return target, result

    def _follow_sync(self, url: str, hop_fn, content_types=None, method="GET", data=None) -> FetchResult:
        current, seen, redirects = self._start_chain(url)
        while True:
            hop = hop_fn(current, method, data)
            target, result = self._step(url, current, hop, seen, redirects, content_types)
            if target is None:
                return result
            current, (method, data) = target, _after_redirect(hop.status, method, data)

    async def _afollow(self, url: str, *, headers, content_types, max_bytes, reuse, method, data) -> FetchResult:
        current, seen, redirects = self._start_chain(url)
        while True:
            hop = await self._ahop(current, headers, content_types, max_bytes, reuse, method=method, data=data)
            target, result = self._step(url, current, hop, seen, redirects, content_types)
            if target is None:
                return result
            current, (method, data) = target, _after_redirect(hop.status, method, data)

    # ---- replay ----------------------------------------------------------------------------

    def _warc_files(self) -> list[Path]:
        files: list[Path] = []
        entries = list(self.warc_paths)
        if self.mode == "live" and self.reuse_archive:
            entries.append(self.archive_dir)  # earlier live runs
        for entry in entries:
            path = Path(entry)
            if path.is_dir():
                files.extend(sorted(p for p in path.iterdir() if p.name.endswith(WARC_SUFFIXES)))
            elif path.exists() or self.mode == "replay":
                files.append(path)
        return list(dict.fromkeys(files))

    def _ensure_index(self) -> dict[str, _IndexEntry]:
        with self._lock:
            if self._index is None:
                self._index = self._build_index()
            return self._index

    def _build_index(self) -> dict[str, _IndexEntry]:
        index: dict[str, _IndexEntry] = {}
        for path in self._warc_files():
            for key, offset, kind, rank in self._file_index(path):
                self._index_put(index, key, _IndexEntry(path=str(path), offset=offset, kind=kind, rank=rank))
        return index

    def _file_index(self, path: Path) -> list[tuple[str, int, str, int]]:
        """(key, offset, kind, rank) of one WARC's records in file order: from its index file when that still
        matches the WARC, else by reading the WARC (and then writing the index file for the next start)."""
        if not path.is_file():
            raise FileNotFoundError(f"WARC file not found: {path} (check web.warc_paths)")
        stat = path.stat()
        sidecar = path.with_name(path.name + INDEX_SUFFIX)
        stamp = {"version": INDEX_VERSION, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        try:
            saved = json.loads(sidecar.read_text(encoding="utf-8"))
            if all(saved.get(k) == v for k, v in stamp.items()):
                return [tuple(e) for e in saved["entries"]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass  # none yet, or unreadable: read the WARC
        entries, complete = [], False
        with open(path, "rb") as handle:
            records = ArchiveIterator(handle)
            try:
                for record in records:
                    kind, rank = self._index_kind(record)
                    uri = record.rec_headers.get_header("WARC-Target-URI")
                    if kind is None or not uri:
                        continue
                    variant = record.rec_headers.get_header(VARIANT_FIELD)
                    entries.append((normalize_url(uri) + (f" {variant}" if variant else ""), records.get_record_offset(),
                                    kind, rank))
                complete = True
            except Exception as exc:  # noqa: BLE001 - a WARC cut short by a crash keeps the records before the cut
                _LOG.warning("WARC %s is damaged after %d indexed records (%s); the rest is ignored", path,
                             len(entries), type(exc).__name__)
        if complete and path.stat().st_size == stat.st_size:  # a file still being written gets no index file
            try:
                atomic_write(sidecar, json.dumps({**stamp, "entries": entries}).encode("utf-8"))
            except OSError:
                pass  # a read-only archive is indexed again next time
        return entries

    @staticmethod
    def _index_put(index: dict[str, _IndexEntry], key: str, entry: _IndexEntry) -> None:
        previous = index.get(key)
        # A final answer beats a partial/retryable one, which beats a failure; within a rank the later one wins.
        if previous is None or entry.rank >= previous.rank:
            index[key] = entry

    @staticmethod
    def _index_kind(record) -> tuple[str | None, int]:
        if record.rec_type == "resource":
            return "resource", RANK_FINAL
        if record.rec_type == "response":
            http = record.http_headers
            status = int(http.get_statuscode()) if http is not None and http.get_statuscode() else None
            return "response", _status_rank(status, record.rec_headers.get_header("WARC-Truncated"))
        if record.rec_type == "metadata":
            fields = _parse_warc_fields(record.content_stream().read())
            if ERROR_FIELD in fields:
                return "failure", RANK_FAILURE
        return None, RANK_FAILURE

    def _replay_hop(
        self, url: str, max_bytes: int | None = None, method: str = "GET", data: bytes | None = None
    ) -> _Hop:
        entry = self._ensure_index().get(_request_key(url, method, data))
        if entry is None:
            return _Hop(error="not_archived")
        return self._read_entry(entry, max_bytes or self.max_bytes)

    def _read_entry(self, entry: _IndexEntry, max_bytes: int) -> _Hop:
        with open(entry.path, "rb") as handle:
            handle.seek(entry.offset)
            record = next(iter(ArchiveIterator(handle)))
            if entry.kind == "failure":
                fields = _parse_warc_fields(record.content_stream().read())
                return _Hop(error=fields[ERROR_FIELD], detail=fields.get(DETAIL_FIELD, ""), warc_path=entry.path)
            if entry.kind == "resource":
                content, too_large = _read_capped(record.raw_stream, max_bytes)
                content_type = record.rec_headers.get_header("Content-Type") or "application/octet-stream"
                short = not too_large and _cut_short(record, len(content))
                return _Hop(
                    status=200,
                    headers={"content-type": content_type, "content-length": str(len(content))},
                    content=b"" if short else content,
                    error="too_large" if too_large else DAMAGED if short else None,
                    warc_path=entry.path,
                )
            http = record.http_headers
            status = int(http.get_statuscode()) if http is not None else None
            headers = _headers_dict(list(http.headers)) if http is not None else {}
            if "chunked" in headers.get("transfer-encoding", "").lower():
                # other crawlers store chunked framing; warcio's content stream undoes it (and the encoding)
                content, too_large = _read_capped(record.content_stream(), max_bytes)
                raw_too_large = False
            else:
                raw, raw_too_large = _read_capped(record.raw_stream, max_bytes)
                if not raw_too_large and _cut_short(record, len(raw)):
                    # the file ends inside this record (a crash while writing): never serve half a body as whole
                    return _Hop(status=status, headers=headers, error=DAMAGED, warc_path=entry.path)
                content, too_large = _decode_body(raw, headers.get("content-encoding"), max_bytes)
            truncated = record.rec_headers.get_header("WARC-Truncated")
            error = "too_large" if (too_large or raw_too_large) else None
            if truncated:
                error = TRUNCATION_ERRORS.get(truncated.strip().lower(), "truncated")
            return _Hop(
                status=status,
                headers=headers,
                content=content,
                error=error,
                location=headers.get("location"),
                warc_path=entry.path,
            )

    # ---- live: the loop thread ------------------------------------------------------------

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                if self.reuse_archive:
                    self._ensure_index()
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="veritas-web", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def _aclient(self, origin: str) -> httpx.AsyncClient:
        """One client (and connection pool) per origin: httpcore scans every pooled connection on each request,
        so one shared pool over hundreds of hosts costs more CPU than the requests themselves."""
        if self._global_slots is None:
            self._global_slots = asyncio.Semaphore(max(1, self.max_concurrency))
        client = self._clients.pop(origin, None)
        if client is None:
            if len(self._clients) >= MAX_IDLE_CLIENTS:  # close the least recently used idle origin's connections
                idle = next((o for o in self._clients if not getattr(self._hosts.get(o), "active", 0)), None)
                if idle is not None:
                    asyncio.get_running_loop().create_task(self._clients.pop(idle).aclose())
            limits = httpx.Limits(max_connections=self.per_host_concurrency, max_keepalive_connections=self.per_host_concurrency)
            if self._ssl_context is None:  # loading the CA bundle costs ~40 ms: once per resource, not per host
                self._ssl_context = httpx.create_ssl_context(trust_env=False)
            transport = httpx.AsyncHTTPTransport(verify=self._ssl_context, limits=limits, trust_env=False, retries=0)
            # httpx has no public hook for the network backend; the pinned 0.28 keeps the pool in `_pool`
            pool = transport._pool
            pool._network_backend = _GuardedBackend(pool._network_backend, self._allowlist())
            client = httpx.AsyncClient(
                transport=transport,
                follow_redirects=False,  # every hop goes through the address check and the archive
                timeout=httpx.Timeout(
                    connect=self.connect_timeout_s,
                    read=self.read_timeout_s,
                    write=self.read_timeout_s,
                    pool=None,  # waiting for a pooled connection is bounded by our own semaphores
                ),
                headers={
                    "User-Agent": self.user_agent,
                    "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
                    # Only encodings the capped stream decoder undoes, so a bomb is stopped while it streams.
                    "Accept-Encoding": "gzip, deflate",
                },
                trust_env=False,  # proxies from the environment would bypass the address checks
            )
        self._clients[origin] = client  # re-inserted last: the dict order is the LRU order
        return client

    def _allowlist(self) -> Allowlist:
        return Allowlist.parse(self.allow_private_hosts)

    async def _check_target(self, url: str) -> tuple[str, str] | None:
        """(error, detail) when the URL must not be fetched, else None."""
        target = split_target(url)
        if len(target) == 2:
            return target  # (error, detail)
        _, host, port = target
        allow = self._allowlist()
        if allow.name_allowed(host):
            return None
        ip = literal_ip(host)
        if ip is not None:
            addresses = [str(ip)]
        else:
            try:
                infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except (OSError, UnicodeError, ValueError) as exc:
                return "connect_error", f"name resolution failed: {exc}"
            addresses = [info[4][0].split("%", 1)[0] for info in infos]
        blocked = refused_addresses(addresses, allow)
        if blocked:
            return "blocked_address", f"{host} -> {', '.join(blocked)}"
        return None

    def _peer_refused(self, host: str, peer: str | None) -> bool:
        """Re-check the address actually connected to: a DNS answer can change between check and connect."""
        allow = self._allowlist()
        if peer is None or allow.name_allowed(host):
            return False
        return bool(refused_addresses([peer], allow))

    def _host_state(self, origin: str, delay_s: float | None = None) -> _HostState:
        state = self._hosts.get(origin)
        if state is None:
            state = self._hosts[origin] = _HostState(self.per_host_concurrency, self.per_host_delay_s)
        if delay_s is not None:
            state.delay_s = max(state.delay_s, delay_s)
        return state

    async def _ahop(
        self, url: str, headers, content_types, max_bytes: int, reuse: bool, robots: bool = True,
        method: str = "GET", data: bytes | None = None,
    ) -> _Hop:
        variant = _variant(method, data)
        if reuse and not _varies(headers):
            entry = self._ensure_index().get(_request_key(url, method, data))
            if entry is not None and entry.rank == RANK_FINAL:
                hop = self._read_entry(entry, max_bytes)
                hop.from_archive = True
                if hop.error != DAMAGED:
                    return hop  # a record cut short in the archive is fetched again
        refusal = await self._check_target(url)
        if refusal is not None:
            return self._failure(url, *refusal, variant=variant)
        parts = urlsplit(url)
        origin = f"{parts.scheme.lower()}://{parts.netloc.lower()}"
        if robots and self._robots_apply(parts.hostname or ""):
            parser = await self._robots_for(origin)
            if parser is not None and not parser.can_fetch(ROBOTS_AGENT, url):
                return self._failure(url, "robots_disallowed", f"{origin}/robots.txt", variant=variant)
        if self._global_slots is None:
            self._global_slots = asyncio.Semaphore(max(1, self.max_concurrency))
        state = self._host_state(origin)
        attempt = 0
        while True:
            attempt += 1
            async with state.slots:
                await state.turn()
                async with self._global_slots:
                    state.active += 1
                    try:
                        hop = await self._attempt(
                            url, origin, parts.hostname or "", headers, content_types, max_bytes, method, data
                        )
                    finally:
                        state.active -= 1
                        state.answered()  # the next request to this host waits a full delay from here
            hop.attempts = attempt
            wait = self._retry_wait(hop, attempt)
            if wait is None:
                return hop
            if hop.status in (429, 503):
                state.push_back(wait)
            await asyncio.sleep(wait)

    def _retry_wait(self, hop: _Hop, attempt: int) -> float | None:
        """Seconds to wait before the next attempt, or None when the hop is final."""
        retryable = (
            (hop.status is not None and (hop.status == 429 or hop.status >= 500) and hop.error is None)
            or (hop.status is None and (hop.error or "") in RETRYABLE_ERRORS)
            or hop.error == "read_error"  # a reset in the middle of the body
        )
        if not retryable or attempt > self.max_retries:
            return None
        asked = retry_after_seconds(hop.headers.get("retry-after"))
        if asked is not None and asked > self.max_backoff_s:
            return None  # the server wants a longer pause than a run should sit through
        jittered = backoff.full_jitter(min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1)))
        return max(asked or 0.0, jittered)

    def _robots_apply(self, host: str) -> bool:
        if self.robots == "never":
            return False
        if self.robots == "always":
            return True
        allow = self._allowlist()
        ip = literal_ip(host)
        return not (allow.name_allowed(host) or (ip is not None and allow.address_allowed(ip)))

    async def _robots_for(self, origin: str):
        """The origin's parsed robots.txt, fetched once per resource (through the same guard and archive)."""
        if origin in self._robots:
            return self._robots[origin]
        lock = self._robots_locks.setdefault(origin, asyncio.Lock())
        async with lock:
            if origin in self._robots:
                return self._robots[origin]
            parser = urllib.robotparser.RobotFileParser(origin + "/robots.txt")
            current, seen, redirects = self._start_chain(origin + "/robots.txt")
            while True:
                hop = await self._ahop(current, {}, None, 512 * 1024, self.reuse_archive, robots=False)
                target, result = self._step(current, current, hop, seen, redirects, None)
                if target is None:
                    break
                current = target
            if result.status is not None and 400 <= result.status < 500:
                parser.allow_all = True  # RFC 9309: no robots.txt means no restriction
            elif not (result.status is not None and 200 <= result.status < 300 and result.error in (None, "too_large")):
                parser.disallow_all = True  # RFC 9309: unreachable robots.txt means full disallow
            else:  # an oversized file is read up to the cap (RFC 9309 asks for at least 500 KiB)
                parser.parse(result.text().splitlines())
                delay = parser.crawl_delay(ROBOTS_AGENT)
                if delay:
                    self._host_state(origin, min(float(delay), self.max_crawl_delay_s))
            self._robots[origin] = parser
            return parser

    async def _attempt(
        self, url: str, origin: str, host: str, headers, content_types, max_bytes: int, method: str = "GET",
        data: bytes | None = None,
    ) -> _Hop:
        client = self._aclient(origin)
        fail = functools.partial(self._failure, url, variant=_variant(method, data))
        try:
            request = client.build_request(method, url, headers=headers or None, content=data)
        except (httpx.InvalidURL, httpx.UnsupportedProtocol, ValueError) as exc:
            return fail("bad_url", str(exc))
        deadline = asyncio.get_running_loop().time() + self.max_fetch_s
        try:
            async with asyncio.timeout_at(deadline):
                response = await client.send(request, stream=True)
        except (TimeoutError, httpx.TimeoutException) as exc:
            return fail("timeout", f"{type(exc).__name__}: {exc}")
        except httpx.ConnectError as exc:
            if str(exc).startswith(BLOCKED_AT_CONNECT):
                return fail("blocked_address", str(exc))
            return fail("connect_error", str(exc))
        except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError) as exc:
            return fail("read_error", f"{type(exc).__name__}: {exc}")  # e.g. a reset
        except (httpx.HTTPError, OSError) as exc:
            return fail("http_error", f"{type(exc).__name__}: {exc}")
        try:
            server_ip = _peer_ip(response)
            if self._peer_refused(host, server_ip):
                return fail("blocked_address", f"connected to {server_ip}")
            headers_out = _headers_dict(list(response.headers.multi_items()))
            ctype = headers_out.get("content-type", "").split(";", 1)[0].strip().lower()
            skip_body = (
                content_types is not None
                and 200 <= response.status_code < 300
                and ctype
                and not any(ctype.startswith(t) for t in content_types)
            )
            if skip_body:
                raw, content, truncated, error = b"", b"", "unspecified", None
            else:
                raw, content, truncated, error = await self._read_body(response, headers_out, max_bytes, deadline)
        finally:
            await response.aclose()  # also drops the connection when we stopped reading early
        warc_path = self._write_exchange(response, raw, truncated, server_ip, data)
        return _Hop(
            status=response.status_code,
            headers=headers_out,
            content=content,
            error=error,
            location=headers_out.get("location"),
            warc_path=warc_path,
        )

    async def _read_body(self, response: httpx.Response, headers: dict, max_bytes: int, deadline: float):
        """(raw wire bytes, decoded bytes, WARC-Truncated reason, error); never holds more than the cap."""
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            return b"", b"", "length", "too_large"  # refuse before downloading a body we would discard
        decoder = StreamDecoder(headers.get("content-encoding", ""), max_bytes)
        chunks: list[bytes] = []
        total = 0
        truncated = error = None
        try:
            async with asyncio.timeout_at(deadline):
                async for chunk in response.aiter_raw():
                    chunks.append(chunk)
                    total += len(chunk)
                    decoded_over = decoder.feed(chunk)
                    if total > max_bytes or decoded_over:
                        truncated, error = "length", "too_large"
                        break
        except (TimeoutError, httpx.TimeoutException):
            truncated, error = "time", "timeout"
        except httpx.HTTPError:
            truncated, error = "disconnect", "read_error"
        raw = b"".join(chunks)[:max_bytes]
        if decoder.streaming and not decoder.failed:
            content = decoder.result()
        else:
            content, too_large = _decode_body(raw, headers.get("content-encoding"), max_bytes)
            if too_large and error is None:
                truncated, error = "length", "too_large"
        return raw, content, truncated, error

    # ---- WARC writing ----------------------------------------------------------------------

    def _writer(self) -> WARCWriter:
        if self._warc_writer is None:
            directory = Path(self.archive_dir)
            directory.mkdir(parents=True, exist_ok=True)
            stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
            # pid + random suffix: several processes and instances may archive into one directory.
            name = f"veritas-{stamp}-{os.getpid()}-{uuid.uuid4().hex[:8]}.warc.gz"
            self._warc_path = str(directory / name)
            self._warc_file = open(self._warc_path, "ab")  # noqa: SIM115 - kept open for the resource's life
            self._warc_writer = WARCWriter(self._warc_file, gzip=True)
            info = self._warc_writer.create_warcinfo_record(
                name,
                {
                    "software": "veritas WebResource (warcio + httpx)",
                    "format": "WARC File Format 1.0",
                    "http-header-user-agent": self.user_agent,
                },
            )
            self._warc_writer.write_record(info)
            self._warc_file.flush()
        return self._warc_writer

    def _remember(self, key: str, offset: int, kind: str, rank: int) -> None:
        """Index what was just written, so a later reuse=True fetch in this run is served from it."""
        if self._index is not None and self._warc_path is not None:
            self._index_put(self._index, key, _IndexEntry(path=self._warc_path, offset=offset, kind=kind, rank=rank))

    def _write_exchange(
        self, response: httpx.Response, raw: bytes, truncated: str | None, server_ip: str | None,
        data: bytes | None = None,
    ) -> str | None:
        request = response.request
        target = str(request.url)
        req_target = request.url.raw_path.decode("ascii")
        http_version = response.http_version or "HTTP/1.1"
        req_headers = StatusAndHeaders(
            f"{request.method} {req_target} {http_version}",
            [(k.decode("latin-1"), REDACTED if k.decode("latin-1").lower() in SECRET_HEADERS else v.decode("latin-1"))
             for k, v in request.headers.raw],
            is_http_request=True,
        )
        resp_headers = StatusAndHeaders(
            f"{response.status_code} {response.reason_phrase}".strip(),
            [
                (k.decode("latin-1"), v.decode("latin-1"))
                for k, v in response.headers.raw
                if k.decode("latin-1").lower() not in DROPPED_RESPONSE_HEADERS
            ],
            protocol=http_version,
        )
        warc_headers = {}
        if truncated:
            warc_headers["WARC-Truncated"] = truncated
        if server_ip:
            warc_headers["WARC-IP-Address"] = server_ip
        variant = _variant(request.method, data)
        if variant:
            warc_headers[VARIANT_FIELD] = variant
        rank = _status_rank(response.status_code, truncated)
        if _varies(dict(request.headers)):
            rank = min(rank, RANK_PARTIAL)  # an answer to a conditional/partial request never stands for the URL
        with self._lock:
            writer = self._writer()
            resp_record = writer.create_warc_record(
                target,
                "response",
                payload=io.BytesIO(raw),
                length=len(raw),
                http_headers=resp_headers,
                warc_headers_dict=warc_headers,
            )
            req_record = writer.create_warc_record(
                target, "request", payload=io.BytesIO(data or b""), length=len(data or b""), http_headers=req_headers
            )
            offset = self._warc_file.tell()
            writer.write_request_response_pair(req_record, resp_record)  # warcio writes the response first
            self._warc_file.flush()  # each record lands on disk at once, so a crash leaves a usable archive
            self._remember(_request_key(target, request.method, data), offset, "response", rank)
            return self._warc_path

    def archive_whole(self, url: str, body: bytes, content_type: str, assembled_from: str) -> None:
        """Archive a whole body that came over the wire in parts (e.g. a feed rebuilt from Range answers), as a
        resource record for the URL: replay and reuse then serve this copy, as the live run saw it. A no-op in
        replay mode."""
        if self.mode != "live":
            return
        with self._lock:
            writer = self._writer()
            record = writer.create_warc_record(
                url.split("#", 1)[0], "resource", payload=io.BytesIO(body), length=len(body),
                warc_content_type=content_type or "application/octet-stream",
                warc_headers_dict={ASSEMBLED_FIELD: assembled_from},
            )
            offset = self._warc_file.tell()
            writer.write_record(record)
            self._warc_file.flush()
            self._remember(normalize_url(url.split("#", 1)[0]), offset, "resource", RANK_FINAL)

    def _failure(self, url: str, error: str, detail: str, variant: str = "") -> _Hop:
        """Record a fetch that produced no HTTP response, so the archive also explains what is missing."""
        body = f"{ERROR_FIELD}: {_one_line(error)}\r\n{DETAIL_FIELD}: {_one_line(detail)}\r\n".encode()
        with self._lock:
            writer = self._writer()
            record = writer.create_warc_record(
                url.split("#", 1)[0],
                "metadata",
                payload=io.BytesIO(body),
                length=len(body),
                warc_content_type="application/warc-fields",
                warc_headers_dict={VARIANT_FIELD: variant} if variant else None,
            )
            offset = self._warc_file.tell()
            writer.write_record(record)
            self._warc_file.flush()
            key = normalize_url(url.split("#", 1)[0]) + (f" {variant}" if variant else "")
            self._remember(key, offset, "failure", RANK_FAILURE)
            return _Hop(error=error, detail=detail, warc_path=self._warc_path)


def _cut_short(record, got: int) -> bool:
    """The WARC ends inside this record: fewer payload bytes than its Content-Length promised, or none promised."""
    payload = getattr(record, "payload_length", -1)
    expected = payload if record.http_headers is not None and isinstance(payload, int) and payload >= 0 else record.length
    return not isinstance(expected, int) or got < expected


def _variant(method: str, data: bytes | None) -> str:
    """How a request other than a plain GET is told apart in the archive: its method and its body's digest."""
    if method.upper() == "GET" and not data:
        return ""
    return f"{method.upper()} sha1:{hashlib.sha1(data or b'').hexdigest()}"


def _request_key(url: str, method: str = "GET", data: bytes | None = None) -> str:
    variant = _variant(method, data)
    return normalize_url(url) + (f" {variant}" if variant else "")


def _after_redirect(status: int | None, method: str, data: bytes | None) -> tuple[str, bytes | None]:
    """301/302/303 turn a POST into a GET without a body (what browsers do); 307/308 repeat it."""
    if status in (301, 302, 303) and method != "GET":
        return "GET", None
    return method, data


def _varies(headers: dict | None) -> bool:
    """Request headers that make the answer partial or conditional, so it cannot stand for the URL."""
    return any(k.lower() in ("range", "if-none-match", "if-modified-since", "if-range") for k in (headers or {}))


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _parse_warc_fields(payload: bytes) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in payload.decode("utf-8", errors="replace").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip().lower()] = value.strip()
    return fields


def _peer_ip(response: httpx.Response) -> str | None:
    """Server address for WARC-IP-Address and the post-connect check; httpcore exposes the network stream."""
    stream = response.extensions.get("network_stream")
    if stream is None:
        return None
    try:
        address = stream.get_extra_info("server_addr")
    except Exception:  # noqa: BLE001 - the extension is best-effort across httpcore backends
        return None
    return str(address[0]) if address else None


def is_blocked_address(ip_text: str) -> bool:
    """Public helper for other modules (e.g. the yt-dlp bridge): would the guard refuse this literal address?"""
    ip = literal_ip(ip_text)
    return ip is None or is_blocked_ip(ip)
