"""Address checks for the web resource (SSRF guard) and streaming body decoding with a size cap.

Plain functions, no Dagster: the web resource and the yt-dlp bridge share them.
"""

import email.utils
import ipaddress
import time
import zlib
from dataclasses import dataclass, field
from urllib.parse import urlsplit

ALLOWED_SCHEMES = frozenset({"http", "https"})
DEFAULT_PORTS = {"http": 80, "https": 443}
# Cloud metadata endpoints that are not covered by the link-local range.
METADATA_ADDRESSES = frozenset({ipaddress.ip_address("fd00:ec2::254"), ipaddress.ip_address("100.100.100.200")})

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def is_blocked_ip(ip: IPAddress) -> bool:
    """Loopback, private, link-local (incl. 169.254.169.254), metadata, reserved or otherwise non-global."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return (
        ip in METADATA_ADDRESSES
        or ip.is_loopback
        or ip.is_private
        or ip.is_link_local
        or ip.is_reserved
        or ip.is_multicast
        or ip.is_unspecified
        or not ip.is_global
    )


@dataclass(frozen=True)
class Allowlist:
    """Explicit exceptions to the guard: host names (exact, case-insensitive) and address networks."""

    names: frozenset[str] = frozenset()
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()

    @classmethod
    def parse(cls, entries: list[str]) -> "Allowlist":
        names, networks = set(), []
        for entry in entries:
            entry = entry.strip().lower().strip("[]")
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                names.add(entry)
        return cls(frozenset(names), tuple(networks))

    def name_allowed(self, host: str) -> bool:
        return host.lower().strip("[]") in self.names

    def address_allowed(self, ip: IPAddress) -> bool:
        return any(ip.version == net.version and ip in net for net in self.networks)


def split_target(url: str) -> tuple[str, str, int] | tuple[str, str]:
    """(scheme, host, port) of an http(s) URL, or (error, detail) when it must not be fetched at all."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return "bad_url", str(exc)
    scheme = parts.scheme.lower()
    if scheme not in ALLOWED_SCHEMES:
        return "bad_scheme", scheme or "(none)"
    host = (parts.hostname or "").lower()
    if not host:
        return "bad_url", "no host"
    return scheme, host, port or DEFAULT_PORTS[scheme]


def literal_ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def refused_addresses(addresses: list[str], allow: Allowlist) -> list[str]:
    """The resolved addresses the guard refuses (empty: all fine)."""
    out = []
    for raw in addresses:
        ip = literal_ip(raw)
        if ip is None or (is_blocked_ip(ip) and not allow.address_allowed(ip)):
            out.append(raw)
    return out


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Retry-After as seconds from now: delta-seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass
class StreamDecoder:
    """Undoes gzip/deflate chunk by chunk and stops at `cap` decoded bytes, so a bomb never inflates in memory."""

    encoding: str
    cap: int
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    exceeded: bool = False
    failed: str = ""

    def __post_init__(self):
        self.encoding = (self.encoding or "").strip().lower()
        # 32 + MAX_WBITS: zlib detects gzip or zlib framing itself; raw deflate is retried below.
        self._z = zlib.decompressobj(32 + zlib.MAX_WBITS) if self.encoding in ("gzip", "x-gzip", "deflate") else None
        self._raw_deflate_tried = False

    @property
    def streaming(self) -> bool:
        """False for identity and for encodings decoded afterwards (br, zstd)."""
        return self._z is not None or not self.encoding or self.encoding == "identity"

    def feed(self, data: bytes) -> bool:
        """Add wire bytes; True once the decoded size passed the cap (the caller stops reading)."""
        if self.exceeded or self.failed:
            return self.exceeded
        if self._z is None:
            if self.streaming:
                self._keep(data)
            return self.exceeded
        while data and not self.exceeded:
            room = self.cap + 1 - self.size
            try:
                out = self._z.decompress(data, room)
            except zlib.error as exc:
                if self.encoding == "deflate" and not self._raw_deflate_tried and self.size == 0:
                    # some servers send raw deflate without the zlib header
                    self._raw_deflate_tried = True
                    self._z = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                self.failed = f"bad {self.encoding} stream: {exc}"
                return False
            self._keep(out)
            data = self._z.unconsumed_tail
            if self._z.eof:
                # a second gzip member follows (concatenated gzip is legal)
                rest = self._z.unused_data
                if not rest:
                    break
                self._z = zlib.decompressobj(32 + zlib.MAX_WBITS)
                data = rest
        return self.exceeded

    def _keep(self, out: bytes) -> None:
        if not out:
            return
        room = self.cap - self.size
        if len(out) > room:
            self.exceeded = True
            out = out[: max(room, 0)]
        self.chunks.append(out)
        self.size += len(out)

    def result(self) -> bytes:
        return b"".join(self.chunks)
