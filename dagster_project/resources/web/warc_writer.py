"""WARC writing for the web resource's live mode: the gzip WARC file each instance appends to (named per process and
instance under ``archive_dir``), every request/response exchange as it came over the wire (credentials redacted),
whole bodies rebuilt from partial answers as resource records, and fetches that produced no HTTP response as failure
records; each record is flushed at once and entered in the replay index. ``WarcWriterMixin`` holds these methods of
``WebResource``.
"""

import datetime as dt
import io
import os
import uuid
from pathlib import Path

import httpx
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from dagster_project.resources.web.http_helpers import (
    _request_key,
    _variant,
    _varies,
    normalize_url,
)
from dagster_project.resources.web.records import (
    ASSEMBLED_FIELD,
    DETAIL_FIELD,
    ERROR_FIELD,
    RANK_FAILURE,
    RANK_FINAL,
    RANK_PARTIAL,
    VARIANT_FIELD,
    _Hop,
    _status_rank,
)
from dagster_project.resources.web.replay import _IndexEntry

# Hop-by-hop framing that httpx already removed from the body we store, so it must not be recorded either.
DROPPED_RESPONSE_HEADERS = frozenset({"transfer-encoding"})
# Request headers that carry credentials (a paid backend's key): the WARC keeps their name, never their value.
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "cookie"})
REDACTED = "[redacted]"


class WarcWriterMixin:
    """The WARC-writing side of ``WebResource``.

    Reads the fields ``mode``, ``archive_dir`` and ``user_agent``, and the private attributes ``_lock``,
    ``_warc_file``, ``_warc_writer`` and ``_warc_path`` (set here when the first record is written) and ``_index``
    (entered through ``ReplayMixin._index_put``).
    """

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


def _one_line(text: str) -> str:
    return " ".join(str(text).split())
