"""The WARC replay index of the web resource: which WARC files make up the archive, the index of their records
(kept next to each WARC as ``<file>.index.json`` and rebuilt when the WARC changed), the rule that picks one record
per request key, and reading one indexed record back as a hop, with its body decoded under a cap and a record cut
short by a crash reported as damaged. ``ReplayMixin`` holds these methods of ``WebResource``.
"""

import json
import logging
from pathlib import Path
from typing import NamedTuple

from warcio.archiveiterator import ArchiveIterator

from dagster_project.core.atomic_files import atomic_write
from dagster_project.resources.web.http_helpers import (
    _decode_body,
    _headers_dict,
    _read_capped,
    _request_key,
    normalize_url,
)
from dagster_project.resources.web.records import (
    DETAIL_FIELD,
    ERROR_FIELD,
    RANK_FAILURE,
    RANK_FINAL,
    TRUNCATION_ERRORS,
    VARIANT_FIELD,
    _Hop,
    _status_rank,
)

# The logger keeps the name it had when the resource was one module, so log records and logging settings stay as
# they were.
_LOG = logging.getLogger("dagster_project.resources.web")


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


class ReplayMixin:
    """The replay side of ``WebResource``: the archive's files, its index and reading one record.

    Reads the fields ``mode``, ``warc_paths``, ``archive_dir``, ``reuse_archive`` and ``max_bytes``, and the private
    attributes ``_lock`` and ``_index`` (built here on first use).
    """

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


def _cut_short(record, got: int) -> bool:
    """The WARC ends inside this record: fewer payload bytes than its Content-Length promised, or none promised."""
    payload = getattr(record, "payload_length", -1)
    expected = payload if record.http_headers is not None and isinstance(payload, int) and payload >= 0 else record.length
    return not isinstance(expected, int) or got < expected


def _parse_warc_fields(payload: bytes) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in payload.decode("utf-8", errors="replace").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip().lower()] = value.strip()
    return fields
