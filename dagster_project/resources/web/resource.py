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

This module holds ``WebResource`` itself: its configuration, its private state, its lifecycle, the public
``fetch`` / ``fetch_many`` and the fetch log; the mixins it inherits hold the rest (``redirects``, ``replay``,
``warc_writer``, ``politeness`` and ``transport`` in this package).
"""

import asyncio
import threading
import time
from concurrent.futures import Future
from typing import Any

import dagster as dg
import httpx
from pydantic import PrivateAttr
from warcio.warcwriter import WARCWriter

from dagster_project.resources.web.politeness import (
    ROBOTS_AGENT,
    PolitenessMixin,
    _HostState,
)
from dagster_project.resources.web.records import FetchResult
from dagster_project.resources.web.redirects import RedirectMixin
from dagster_project.resources.web.replay import ReplayMixin, _IndexEntry
from dagster_project.resources.web.transport import TransportMixin
from dagster_project.resources.web.warc_writer import WarcWriterMixin


class WebResource(
    RedirectMixin, ReplayMixin, WarcWriterMixin, PolitenessMixin, TransportMixin, dg.ConfigurableResource
):
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
