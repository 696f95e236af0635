"""URL, header and body helpers of the web resource, shared by the live and the replay side: ``normalize_url`` (the
replay key), the request key that tells a POST or another non-plain GET apart in the archive, whether request headers
make an answer partial or conditional, header lists to a dict, the capped Content-Encoding decoder, and the charset
lookup behind ``FetchResult.text``. Pure functions without any state of the resource.
"""

import codecs
import hashlib
import io
import re
from typing import Any

import httpx
from warcio.bufferedreaders import BufferedReader

from dagster_project.resources.crawl_guard import DEFAULT_PORTS, StreamDecoder

_META_CHARSET_RE = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_READ_CHUNK = 64 * 1024


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


def _variant(method: str, data: bytes | None) -> str:
    """How a request other than a plain GET is told apart in the archive: its method and its body's digest."""
    if method.upper() == "GET" and not data:
        return ""
    return f"{method.upper()} sha1:{hashlib.sha1(data or b'').hexdigest()}"


def _request_key(url: str, method: str = "GET", data: bytes | None = None) -> str:
    variant = _variant(method, data)
    return normalize_url(url) + (f" {variant}" if variant else "")


def _varies(headers: dict | None) -> bool:
    """Request headers that make the answer partial or conditional, so it cannot stand for the URL."""
    return any(k.lower() in ("range", "if-none-match", "if-modified-since", "if-range") for k in (headers or {}))
