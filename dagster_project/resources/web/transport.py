"""The live transport of the web resource: the event-loop thread, one httpx client (and connection pool) per origin,
the SSRF guard (the target check before a hop, the guarded network backend that connects only to checked addresses,
the re-check of the connected peer), one live hop with its retries and their waits, one network attempt and reading
its body under a size cap and a wall-clock deadline. ``TransportMixin`` holds these methods of ``WebResource``.
"""

import asyncio
import functools
import socket
import threading
from urllib.parse import urlsplit

import backoff
import httpcore
import httpx

from dagster_project.resources.crawl_guard import (
    Allowlist,
    StreamDecoder,
    is_blocked_ip,
    literal_ip,
    refused_addresses,
    retry_after_seconds,
    split_target,
)
from dagster_project.resources.web.http_helpers import (
    _decode_body,
    _headers_dict,
    _request_key,
    _variant,
    _varies,
)
from dagster_project.resources.web.politeness import ROBOTS_AGENT
from dagster_project.resources.web.records import RANK_FINAL, _Hop
from dagster_project.resources.web.replay import DAMAGED

# Failures worth another attempt; refusals (blocked_address, bad_scheme, robots, too_large) are final.
RETRYABLE_ERRORS = frozenset({"timeout", "connect_error", "read_error", "http_error"})
MAX_IDLE_CLIENTS = 256  # origins whose connections stay open

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


class TransportMixin:
    """The live side of ``WebResource``: the loop thread, the clients, the guard, hops, attempts and retries.

    Reads the fields ``reuse_archive``, ``max_concurrency``, ``per_host_concurrency``, ``connect_timeout_s``,
    ``read_timeout_s``, ``max_fetch_s``, ``user_agent``, ``allow_private_hosts``, ``max_retries``, ``backoff_s`` and
    ``max_backoff_s``, and the private attributes ``_lock``, ``_loop``, ``_thread`` (set here), ``_clients``,
    ``_ssl_context``, ``_global_slots`` and ``_hosts``; uses the other mixins' ``_ensure_index``/``_read_entry``,
    ``_robots_apply``/``_robots_for``/``_host_state``, ``_write_exchange`` and ``_failure``.
    """

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
