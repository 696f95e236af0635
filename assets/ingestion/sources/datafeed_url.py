"""A ``datafeed`` source given as a URL: ``fetch_feed_incremental`` keeps a local copy of the feed under the state
folder and re-fetches only its head and new tail with HTTP Range when the feed just grew (status
new/changed/unchanged), and ``FeedRows`` (``feed_url_triples``) reads that copy into triples, from its row cache
when the feed is unchanged, else parsed with ``stream_datafeed`` and cached.
"""

import hashlib
import json
import os
import re
import typing
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from assets.ingestion.sources.claimreview import Triple
from assets.ingestion.sources.datafeed import stream_datafeed
from dagster_project.core.atomic_files import atomic_write

if typing.TYPE_CHECKING:  # Dagster is not imported here: a process that reads a feed range starts without it
    from dagster_project.resources.web import WebResource

# ---- incremental fetch of a feed URL --------------------------------------------------------------------------


@dataclass
class FeedCopy:
    """The local copy of a feed URL after a (re-)fetch."""

    url: str
    path: Path  # the last fetched body
    status: str  # "new" | "changed" | "unchanged"
    sha256: str
    etag: str
    content_length: int
    rows_cache: Path  # triples parsed from this very body, JSON lines; first line names the body's sha256
    method: str = "full"  # "range": only the head and the new tail came over the wire
    bytes_fetched: int = 0


def _url_stem(url: str) -> str:
    return hashlib.sha256(url.encode("utf-8")).hexdigest()[:20]


def _read_state(state_file: Path) -> dict:
    try:
        state = json.loads(state_file.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return state if isinstance(state, dict) else {}


RANGE_OVERLAP = 16 * 1024  # bytes of the old copy that the new tail must repeat, proof that the feed only grew
_HEAD_SLACK = 4096  # the head may grow a little (dateModified written with more digits)
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


def _feed_frame(body: bytes) -> tuple[int, int] | None:
    """(end of the head: just after the '[' of dataFeedElement, end of the last element) of a feed body."""
    key = body.find(b'"dataFeedElement"')
    head_end = body.find(b"[", key) + 1 if key >= 0 else 0
    close = body.rstrip().rstrip(b"}").rstrip().rfind(b"]") if head_end else -1
    last = len(body[:close].rstrip()) if close > 0 else -1  # appended elements follow it after a comma
    return (head_end, last) if 0 < head_end <= last else None


def _range_body(web: "WebResource", url: str, old: bytes) -> tuple[str, bytes, dict, int] | None:
    """(method, body, headers, bytes fetched): the new feed body rebuilt from a fresh head, the old middle and the
    new tail (two Range requests); or the whole body when the server answered the first Range with all of it; or
    None when the feed did not just grow at its end (then it is fetched whole)."""
    frame = _feed_frame(old)
    if frame is None or frame[1] <= RANGE_OVERLAP:
        return None
    head_end, close = frame
    head = web.fetch(url, headers={"Range": f"bytes=0-{head_end + _HEAD_SLACK - 1}"})
    if head.ok and head.status == 200:
        return "full", head.content, head.headers, len(head.content)  # Range ignored: this is the whole feed
    if not head.ok or head.status != 206:
        return None
    new_head_frame = _feed_frame(head.content + b"]}")
    if new_head_frame is None:
        return None
    new_head = head.content[: new_head_frame[0]]
    shift = len(new_head) - head_end  # where the old bytes sit in the new file
    start = close - RANGE_OVERLAP
    tail = web.fetch(url, headers={"Range": f"bytes={start + shift}-"})
    match = _CONTENT_RANGE.fullmatch(tail.headers.get("content-range", "").strip())
    if not tail.ok or tail.status != 206 or not match or int(match.group(1)) != start + shift:
        return None
    if tail.content[: close - start] != old[start:close]:
        return None  # rewritten, not appended to
    body = new_head + old[head_end:start] + tail.content
    if match.group(3) != "*" and len(body) != int(match.group(3)):
        return None
    return "range", body, tail.headers, len(head.content) + len(tail.content)


def fetch_feed_incremental(web: "WebResource", url: str, state_dir: str | os.PathLike) -> FeedCopy:
    """Fetch a feed URL and compare it with the last fetched copy kept under ``state_dir``.

    When a copy exists, only the head (it carries dateModified) and the part from just before the old end are
    requested with HTTP Range, and the new body is the new head + the old middle + the new tail; the tail must
    repeat the old copy's last bytes, so a feed that was rewritten rather than extended is fetched whole, as is one
    from a server that ignores Range. The feed is "unchanged" when its sha256 (and ETag, if both have one) match."""
    state_dir = Path(state_dir)
    state_file = state_dir / "feeds.json"
    stem = _url_stem(url)
    copy_path, cache_path = state_dir / f"{stem}.json", state_dir / f"{stem}.rows.jsonl"
    state = _read_state(state_file)
    previous = state.get(url) if isinstance(state.get(url), dict) else None
    ranged = None
    if previous and copy_path.exists():
        ranged = _range_body(web, url, copy_path.read_bytes())
    if ranged is not None:
        method, body, headers, fetched = ranged
    else:
        result = web.fetch(url)
        if not result.ok:
            raise RuntimeError(f"could not fetch source {url}: {result.error or result.status}")
        body, headers, fetched, method = result.content, result.headers, len(result.content), "full"
    sha = hashlib.sha256(body).hexdigest()
    etag = headers.get("etag", "")
    length = len(body)
    same_etag = not (previous and previous.get("etag") and etag) or previous.get("etag") == etag
    if previous and previous.get("sha256") == sha and (same_etag or method == "range") and copy_path.exists():
        status = "unchanged"
    else:
        status = "changed" if previous else "new"
        atomic_write(copy_path, body)
        if method == "range":  # the archive holds only the parts: keep the rebuilt whole, so a replay sees it
            web.archive_whole(url, body, headers.get("content-type", "application/json"), "Range requests")
    state[url] = {
        "etag": etag,
        "content_length": length,
        "sha256": sha,
        "copy": copy_path.name,
        "fetched_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "status": status,
        "method": method,
        "bytes_fetched": fetched,
    }
    atomic_write(state_file, json.dumps(state, indent=1, sort_keys=True).encode("utf-8"))
    return FeedCopy(url, copy_path, status, sha, etag, length, cache_path, method, fetched)


def _cached_triples(cache: Path, sha: str) -> Iterator[Triple] | None:
    """The cached triples of the body with this sha256, or None when the cache is missing or stale."""
    try:
        with open(cache, encoding="utf-8") as fh:
            header = json.loads(fh.readline() or "{}")
    except (OSError, json.JSONDecodeError):
        return None
    if header.get("sha256") != sha:
        return None

    def read() -> Iterator[Triple]:
        with open(cache, encoding="utf-8") as fh:
            fh.readline()
            for line in fh:
                row, reason, raw = json.loads(line)
                yield row, reason, raw

    return read()


def _parse_and_cache(copy: FeedCopy, origin: str) -> Iterator[Triple]:
    """Stream-parse the local copy, writing the triples to the row cache once the whole feed was read."""
    tmp = copy.rows_cache.with_name(f".tmp-{os.getpid()}-{copy.rows_cache.name}")
    done = False
    try:
        with open(tmp, "w", encoding="utf-8") as out:
            out.write(json.dumps({"sha256": copy.sha256, "origin": origin}) + "\n")
            for triple in stream_datafeed(copy.path, origin):
                out.write(json.dumps(list(triple)) + "\n")  # ASCII escapes keep lone surrogates round-trippable
                yield triple
        done = True
        os.replace(tmp, copy.rows_cache)
    finally:
        if not done:
            tmp.unlink(missing_ok=True)


class FeedRows:
    """The triples of a fetched feed body: an unchanged feed is read from its row cache (no re-parse), a new or
    changed one is parsed and cached. Iterable; ``sha256`` names the body without reading it."""

    def __init__(self, copy: FeedCopy, origin: str) -> None:
        self.copy, self.origin, self.sha256 = copy, origin, copy.sha256

    def __iter__(self) -> Iterator[Triple]:
        if self.copy.status == "unchanged":
            cached = _cached_triples(self.copy.rows_cache, self.copy.sha256)
            if cached is not None:
                return cached
        return _parse_and_cache(self.copy, self.origin)


def feed_url_triples(copy: FeedCopy, origin: str) -> FeedRows:
    return FeedRows(copy, origin)
