"""The web resource: the only way veritas touches the web.

Two modes share one interface:
- ``live`` fetches over HTTP(S) with httpx and appends every hop (request + response) and every
  failure to a gzip WARC file, so that the run can be replayed byte for byte later;
- ``replay`` serves responses from WARC files only and never opens a socket.

Bodies are stored in the WARC exactly as they came over the wire (still content-encoded); both modes
decode them with warcio's decoder, so live and replay return the same bytes for the same record.
"""

import codecs
import datetime as dt
import io
import ipaddress
import os
import re
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import dagster as dg
import httpx
import pydantic
from pydantic import Field, PrivateAttr
from warcio.archiveiterator import ArchiveIterator
from warcio.bufferedreaders import BufferedReader
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
ALLOWED_SCHEMES = frozenset({"http", "https"})
DEFAULT_PORTS = {"http": 80, "https": 443}
# Our own fields inside failure `metadata` records; the prefix keeps them apart from other tools' metadata.
ERROR_FIELD = "veritas-error"
DETAIL_FIELD = "veritas-error-detail"
# WARC-Truncated reason -> FetchResult.error, so a replayed truncated record reports what the live fetch did.
TRUNCATION_ERRORS = {"length": "too_large", "time": "timeout", "disconnect": "read_error"}
# Hop-by-hop framing that httpx already removed from the body we store, so it must not be recorded either.
DROPPED_RESPONSE_HEADERS = frozenset({"transfer-encoding"})
_META_CHARSET_RE = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_READ_CHUNK = 64 * 1024


class FetchResult(pydantic.BaseModel):
    """What one fetch produced, live or replayed."""

    url: str
    final_url: str
    status: int | None
    headers: dict[str, str] = Field(default_factory=dict)
    content: bytes = b""
    error: str | None = None
    elapsed_s: float = 0.0
    # URLs that answered with a redirect, in order (starts with `url` when any redirect happened).
    redirects: list[str] = Field(default_factory=list)
    # WARC file the final response was written to (live) or served from (replay).
    warc_path: str | None = None

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


def _is_blocked_ip(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return (
        ip.is_loopback
        or ip.is_private
        or ip.is_link_local
        or ip.is_reserved
        or ip.is_multicast
        or ip.is_unspecified
        or not ip.is_global
    )


def _headers_dict(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """Lower-cased keys; repeated headers are joined the way HTTP allows (comma-separated)."""
    out: dict[str, str] = {}
    for key, value in pairs:
        key = key.lower()
        out[key] = f"{out[key]}, {value}" if key in out else value
    return out


def _decode_body(raw: bytes, content_encoding: str | None, max_bytes: int) -> tuple[bytes, bool]:
    """Undo Content-Encoding with warcio's decoder (same one replay uses); cap the decoded size."""
    encoding = (content_encoding or "").strip().lower()
    if encoding not in BufferedReader.get_supported_decompressors():
        stream: Any = io.BytesIO(raw)
    else:
        stream = BufferedReader(io.BytesIO(raw), decomp_type=encoding)
    return _read_capped(stream, max_bytes)


def _read_capped(stream: Any, max_bytes: int) -> tuple[bytes, bool]:
    """Read at most max_bytes; the flag says there was more (a decompression bomb stops here too)."""
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


class _Hop(pydantic.BaseModel):
    """One request/response exchange inside fetch(); internal."""

    status: int | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    content: bytes = b""
    error: str | None = None
    location: str | None = None
    warc_path: str | None = None


class _IndexEntry(pydantic.BaseModel):
    path: str
    offset: int
    kind: str  # "response", "resource" or "failure"


class WebResource(dg.ConfigurableResource):
    """Fetch URLs live (archiving everything to WARC) or replay them from WARC files."""

    mode: str = "replay"
    warc_paths: list[str] = []
    archive_dir: str = ".veritas/warc"
    user_agent: str = "veritas-benchmark/0.1 (fact-checking research; contact: see README)"
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 30.0
    max_bytes: int = 32 * 1024 * 1024
    max_redirects: int = 5
    allow_private_hosts: list[str] = []

    _lock: threading.RLock = PrivateAttr(default_factory=threading.RLock)
    _client: httpx.Client | None = PrivateAttr(default=None)
    _warc_file: Any = PrivateAttr(default=None)
    _warc_writer: WARCWriter | None = PrivateAttr(default=None)
    _warc_path: str | None = PrivateAttr(default=None)
    _index: dict[str, _IndexEntry] | None = PrivateAttr(default=None)
    _log: list[dict] = PrivateAttr(default_factory=list)

    # ---- lifecycle -------------------------------------------------------------------------

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        if self.mode == "replay":
            self._ensure_index()
        elif self.mode == "live":
            self._ensure_client()
        else:
            raise ValueError(f"WebResource.mode must be 'live' or 'replay', not {self.mode!r}")

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        self.close()

    def close(self) -> None:
        """Release the HTTP client and finish the WARC file (safe to call twice)."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
            if self._warc_file is not None:
                self._warc_file.close()
                self._warc_file = None
                self._warc_writer = None

    @property
    def warc_path(self) -> str | None:
        """The WARC file this instance writes in live mode (None until the first record)."""
        return self._warc_path

    def fetch_log(self) -> list[dict]:
        with self._lock:
            return [dict(entry) for entry in self._log]

    # ---- public fetch ----------------------------------------------------------------------

    def fetch(self, url: str) -> FetchResult:
        start = time.monotonic()
        if self.mode == "replay":
            result = self._follow(url, self._replay_hop)
        elif self.mode == "live":
            result = self._follow(url, self._live_hop)
        else:
            raise ValueError(f"WebResource.mode must be 'live' or 'replay', not {self.mode!r}")
        result.elapsed_s = time.monotonic() - start
        with self._lock:
            self._log.append(
                {
                    "url": result.url,
                    "final_url": result.final_url,
                    "status": result.status,
                    "bytes": len(result.content),
                    "elapsed_s": result.elapsed_s,
                    "error": result.error,
                    "mode": self.mode,
                }
            )
        return result

    def _follow(self, url: str, hop_fn) -> FetchResult:
        """Redirect loop shared by both modes, so replay walks the same chain the live run recorded."""
        current = url.split("#", 1)[0]
        seen = {normalize_url(current)}
        redirects: list[str] = []
        while True:
            hop: _Hop = hop_fn(current)
            result = FetchResult(
                url=url,
                final_url=current,
                status=hop.status,
                headers=hop.headers,
                content=hop.content,
                error=hop.error,
                redirects=list(redirects),
                warc_path=hop.warc_path,
            )
            if hop.error is not None or hop.status not in REDIRECT_STATUSES or not hop.location:
                return result
            target = urljoin(current, hop.location.strip()).split("#", 1)[0]
            if normalize_url(target) in seen:
                result.error = "redirect_loop"
                return result
            if len(redirects) >= self.max_redirects:
                result.error = "too_many_redirects"
                return result
            redirects.append(current)
            seen.add(normalize_url(target))
            current = target

    # ---- replay ----------------------------------------------------------------------------

    def _warc_files(self) -> list[Path]:
        files: list[Path] = []
        for entry in self.warc_paths:
            path = Path(entry)
            if path.is_dir():
                files.extend(sorted(p for p in path.iterdir() if p.name.endswith((".warc", ".warc.gz"))))
            else:
                files.append(path)
        return files

    def _ensure_index(self) -> dict[str, _IndexEntry]:
        with self._lock:
            if self._index is None:
                self._index = self._build_index()
            return self._index

    def _build_index(self) -> dict[str, _IndexEntry]:
        index: dict[str, _IndexEntry] = {}
        for path in self._warc_files():
            with open(path, "rb") as handle:
                records = ArchiveIterator(handle)
                for record in records:
                    kind = self._index_kind(record)
                    uri = record.rec_headers.get_header("WARC-Target-URI")
                    if kind is None or not uri:
                        continue
                    key = normalize_url(uri)
                    entry = _IndexEntry(path=str(path), offset=records.get_record_offset(), kind=kind)
                    previous = index.get(key)
                    # A real response beats a recorded failure; otherwise the later capture wins.
                    if previous is None or not (previous.kind != "failure" and kind == "failure"):
                        index[key] = entry
        return index

    @staticmethod
    def _index_kind(record) -> str | None:
        if record.rec_type in ("response", "resource"):
            return record.rec_type
        if record.rec_type == "metadata":
            fields = _parse_warc_fields(record.content_stream().read())
            if ERROR_FIELD in fields:
                return "failure"
        return None

    def _replay_hop(self, url: str) -> _Hop:
        entry = self._ensure_index().get(normalize_url(url))
        if entry is None:
            return _Hop(error="not_archived")
        with open(entry.path, "rb") as handle:
            handle.seek(entry.offset)
            record = next(iter(ArchiveIterator(handle)))
            if entry.kind == "failure":
                fields = _parse_warc_fields(record.content_stream().read())
                return _Hop(error=fields[ERROR_FIELD], warc_path=entry.path)
            content, too_large = _read_capped(record.content_stream(), self.max_bytes)
            if entry.kind == "resource":
                content_type = record.rec_headers.get_header("Content-Type") or "application/octet-stream"
                return _Hop(
                    status=200,
                    headers={"content-type": content_type, "content-length": str(len(content))},
                    content=content,
                    error="too_large" if too_large else None,
                    warc_path=entry.path,
                )
            http = record.http_headers
            status = int(http.get_statuscode()) if http is not None else None
            headers = _headers_dict(list(http.headers)) if http is not None else {}
            truncated = record.rec_headers.get_header("WARC-Truncated")
            error = "too_large" if too_large else None
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

    # ---- live ------------------------------------------------------------------------------

    def _ensure_client(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(
                    follow_redirects=False,
                    timeout=httpx.Timeout(
                        connect=self.connect_timeout_s,
                        read=self.read_timeout_s,
                        write=self.read_timeout_s,
                        pool=self.connect_timeout_s,
                    ),
                    headers={
                        "User-Agent": self.user_agent,
                        "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
                        # Only encodings warcio can decode, so stored raw bodies stay replayable.
                        "Accept-Encoding": ", ".join(
                            e for e in ("gzip", "deflate", "br") if e in BufferedReader.get_supported_decompressors()
                        ),
                    },
                    trust_env=False,  # proxies from the environment would bypass the address checks
                )
            return self._client

    def _check_target(self, url: str) -> tuple[str, str] | None:
        """(error, detail) when the URL must not be fetched, else None."""
        try:
            parts = urlsplit(url)
        except ValueError as exc:
            return "bad_url", str(exc)
        if parts.scheme.lower() not in ALLOWED_SCHEMES:
            return "bad_scheme", parts.scheme or "(none)"
        host = (parts.hostname or "").lower()
        if not host:
            return "bad_url", "no host"
        if host in {h.lower().strip("[]") for h in self.allow_private_hosts}:
            return None
        try:
            addresses = [ipaddress.ip_address(host)]
        except ValueError:
            try:
                infos = socket.getaddrinfo(host, parts.port or DEFAULT_PORTS[parts.scheme.lower()])
            except (OSError, UnicodeError, ValueError) as exc:
                return "connect_error", f"name resolution failed: {exc}"
            addresses = [ipaddress.ip_address(info[4][0].split("%", 1)[0]) for info in infos]
        blocked = [str(ip) for ip in addresses if _is_blocked_ip(ip)]
        if blocked:
            return "blocked_address", f"{host} -> {', '.join(blocked)}"
        return None

    def _live_hop(self, url: str) -> _Hop:
        refusal = self._check_target(url)
        if refusal is not None:
            return self._failure(url, *refusal)
        client = self._ensure_client()
        try:
            request = client.build_request("GET", url)
        except (httpx.InvalidURL, httpx.UnsupportedProtocol, ValueError) as exc:
            return self._failure(url, "bad_url", str(exc))
        try:
            response = client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            return self._failure(url, "timeout", f"{type(exc).__name__}: {exc}")
        except httpx.ConnectError as exc:
            return self._failure(url, f"connect_error: {exc}", str(exc))
        except httpx.HTTPError as exc:
            return self._failure(url, f"http_error: {type(exc).__name__}: {exc}", str(exc))

        try:
            server_ip = _peer_ip(response)
            raw, truncated, error = self._read_raw(response)
        finally:
            response.close()  # also drops the connection when we stopped reading early
        headers = _headers_dict(list(response.headers.multi_items()))
        content, too_large = _decode_body(raw, headers.get("content-encoding"), self.max_bytes)
        if too_large and error is None:
            error = "too_large"
        warc_path = self._write_exchange(response, raw, truncated, server_ip)
        return _Hop(
            status=response.status_code,
            headers=headers,
            content=content,
            error=error,
            location=headers.get("location"),
            warc_path=warc_path,
        )

    def _read_raw(self, response: httpx.Response) -> tuple[bytes, str | None, str | None]:
        """Raw (still content-encoded) body, WARC-Truncated reason, and error."""
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            return b"", "length", "too_large"  # refuse before downloading a body we would discard
        chunks: list[bytes] = []
        total = 0
        try:
            for chunk in response.iter_raw():
                chunks.append(chunk)
                total += len(chunk)
                if total > self.max_bytes:
                    return b"".join(chunks)[: self.max_bytes], "length", "too_large"
        except httpx.TimeoutException:
            return b"".join(chunks), "time", "timeout"
        except httpx.HTTPError as exc:
            return b"".join(chunks), "disconnect", f"read_error: {type(exc).__name__}: {exc}"
        return b"".join(chunks), None, None

    # ---- WARC writing ----------------------------------------------------------------------

    def _writer(self) -> WARCWriter:
        if self._warc_writer is None:
            directory = Path(self.archive_dir)
            directory.mkdir(parents=True, exist_ok=True)
            stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
            # pid + random suffix: several processes and instances may archive into one directory.
            name = f"veritas-{stamp}-{os.getpid()}-{uuid.uuid4().hex[:8]}.warc.gz"
            self._warc_path = str(directory / name)
            self._warc_file = open(self._warc_path, "ab")
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

    def _write_exchange(
        self, response: httpx.Response, raw: bytes, truncated: str | None, server_ip: str | None
    ) -> str | None:
        request = response.request
        target = str(request.url)
        req_target = request.url.raw_path.decode("ascii")
        http_version = response.http_version or "HTTP/1.1"
        req_headers = StatusAndHeaders(
            f"GET {req_target} {http_version}",
            [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw],
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
                target, "request", payload=io.BytesIO(b""), length=0, http_headers=req_headers
            )
            writer.write_request_response_pair(req_record, resp_record)
            self._warc_file.flush()  # each record lands on disk at once, so a crash leaves a usable archive
            return self._warc_path

    def _failure(self, url: str, error: str, detail: str) -> _Hop:
        """Record a fetch that produced no HTTP response, so the archive also explains what is missing."""
        body = f"{ERROR_FIELD}: {_one_line(error)}\r\n{DETAIL_FIELD}: {_one_line(detail)}\r\n".encode("utf-8")
        with self._lock:
            writer = self._writer()
            record = writer.create_warc_record(
                url.split("#", 1)[0],
                "metadata",
                payload=io.BytesIO(body),
                length=len(body),
                warc_content_type="application/warc-fields",
            )
            writer.write_record(record)
            self._warc_file.flush()
            return _Hop(error=error, warc_path=self._warc_path)


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
    """Server address for WARC-IP-Address; httpcore exposes it on the network stream."""
    stream = response.extensions.get("network_stream")
    if stream is None:
        return None
    try:
        address = stream.get_extra_info("server_addr")
    except Exception:  # the extension is best-effort across httpcore backends
        return None
    return str(address[0]) if address else None
