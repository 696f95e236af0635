"""Issue 3: a DataFeed URL seen before is fetched incrementally, with HTTP Range for its head and its new tail.

A loopback server serves the real records as a feed that grows between fetches (new elements at the end and a new
dateModified at the head), then one that is rewritten, then one from a server that ignores Range."""

import csv
import json
import re
from http.server import BaseHTTPRequestHandler

import pytest
from warcio.archiveiterator import ArchiveIterator

from assets.ingestion.merging import ingest
from assets.ingestion.sources import (
    feed_url_triples,
    fetch_feed_incremental,
    load_sources,
    stream_datafeed,
)
from dagster_project.stage_settings import SourceSpec
from dagster_project.resources.web import WebResource
from tests.ingest_shapes import FIXTURES, gfc_feed_items, ifcn_feed_items
from tests.loopback_web import ThreadedHTTP


def _feed_bytes(items: list[dict], modified: str) -> bytes:
    elements = ",\n".join(json.dumps({"@type": "DataFeedItem", "item": [it]}, ensure_ascii=False) for it in items)
    return (f'{{"@context": "https://schema.org", "@type": "DataFeed", "dateModified": "{modified}", '
            f'"dataFeedElement": [\n{elements}\n]}}\n').encode()


@pytest.fixture(scope="module")
def items():
    claims = json.loads((FIXTURES / "gfc_claims_search_ar_excerpt.json").read_text(encoding="utf-8"))
    with open(FIXTURES / "ifcn_excerpt.csv", newline="", encoding="utf-8") as fh:
        return gfc_feed_items(claims) + ifcn_feed_items(list(csv.DictReader(fh)))  # 153 real ClaimReviews


class RangeServer(ThreadedHTTP):
    """Serves ``self.body`` with single byte ranges (RFC 9110 'bytes=a-b' and 'bytes=a-') unless ``ranges`` is off."""

    def __init__(self):
        self.body = b""
        self.ranges = True
        self.requests: list[str | None] = []  # the Range header of each request
        self.sent = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # http.server names it so
                wanted = self.headers.get("Range")
                outer.requests.append(wanted)
                body, status, extra = outer.body, 200, {}
                match = re.fullmatch(r"bytes=(\d+)-(\d*)", wanted or "") if outer.ranges else None
                if match:
                    first = int(match.group(1))
                    last = min(int(match.group(2) or len(body) - 1), len(body) - 1)
                    if first >= len(body):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(body)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    status, body = 206, body[first:last + 1]
                    extra["Content-Range"] = f"bytes {first}-{last}/{len(outer.body)}"
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Accept-Ranges", "bytes")
                for key, value in extra.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                outer.sent += len(body)

            def log_message(self, *args):
                pass

        super().__init__(Handler)


def test_growing_feed_is_fetched_by_range(items, tmp_path):
    v1 = _feed_bytes(items[:120], "2026-01-05T10:00:00Z")
    v2 = _feed_bytes(items, "2026-02-01T08:30:00.123Z")  # 33 more elements and a longer dateModified
    assert len(v1) > 100_000
    state = tmp_path / "sources"
    with RangeServer() as srv:
        url = f"{srv.base}/feed.json"
        web = WebResource(mode="live", archive_dir=str(tmp_path / "warc"), allow_private_hosts=["127.0.0.1"])
        try:
            srv.body = v1
            first = fetch_feed_incremental(web, url, state)
            assert (first.status, first.method, first.bytes_fetched) == ("new", "full", len(v1))
            assert srv.requests == [None]

            srv.body, srv.sent = v2, 0
            second = fetch_feed_incremental(web, url, state)
            assert (second.status, second.method) == ("changed", "range")
            assert second.path.read_bytes() == v2  # rebuilt byte for byte
            assert srv.requests[1].startswith("bytes=0-") and srv.requests[2].startswith("bytes=")
            assert srv.sent == second.bytes_fetched < len(v2) / 2  # the head and the new tail only
            rows = list(feed_url_triples(second, "feed.json"))
            assert rows == list(stream_datafeed(v2_path(tmp_path, v2), "feed.json"))
            assert sum(r is not None for r, _, _ in rows) == 153

            third = fetch_feed_incremental(web, url, state)  # nothing new: still two small range requests
            assert (third.status, third.method) == ("unchanged", "range")

            # a rewritten feed (an old element edited) fails the overlap check and is fetched whole
            edited = items[:]
            edited[130] = {**edited[130], "claimReviewed": "edited claim"}
            srv.body = _feed_bytes(edited, "2026-02-02T00:00:00Z")
            fourth = fetch_feed_incremental(web, url, state)
            assert (fourth.status, fourth.method) == ("changed", "full") and fourth.path.read_bytes() == srv.body
            assert srv.requests[-1] is None

            # a server that ignores Range answers 200: the body is used whole
            srv.ranges = False
            srv.body = v2
            fifth = fetch_feed_incremental(web, url, state)
            assert (fifth.status, fifth.method) == ("changed", "full") and fifth.path.read_bytes() == v2
        finally:
            web.close()
    saved = json.loads((state / "feeds.json").read_text())[url]
    assert saved["method"] == "full" and saved["content_length"] == len(v2)


def test_a_replay_sees_the_feed_the_incremental_live_runs_saw(items, tmp_path):
    """Range answers are partial and never stand in for the URL; the whole body a live run rebuilt from them is
    archived as a resource record, so replaying the archive gives the feed that run saw."""
    v1 = _feed_bytes(items[:120], "2026-01-05T10:00:00Z")
    v2 = _feed_bytes(items, "2026-02-01T08:30:00.123Z")
    archive = tmp_path / "warc"
    with RangeServer() as srv:
        url = f"{srv.base}/feed.json"
        web = WebResource(mode="live", archive_dir=str(archive), allow_private_hosts=["127.0.0.1"])
        try:
            srv.body = v1
            assert fetch_feed_incremental(web, url, tmp_path / "live").method == "full"
            srv.body = v2
            assert fetch_feed_incremental(web, url, tmp_path / "live").method == "range"
            assert fetch_feed_incremental(web, url, tmp_path / "live").status == "unchanged"  # nothing archived
        finally:
            web.close()
    (warc,) = archive.glob("*.warc.gz")
    with open(warc, "rb") as fh:
        whole = [r for r in ArchiveIterator(fh) if r.rec_type == "resource"]
    assert len(whole) == 1  # the rebuilt v2, once: the unchanged third run added no copy

    replay = WebResource(mode="replay", warc_paths=[str(archive)])
    first = fetch_feed_incremental(replay, url, tmp_path / "replay")
    assert (first.status, first.path.read_bytes()) == ("new", v2)
    again = fetch_feed_incremental(replay, url, tmp_path / "replay")  # its Range requests get the whole copy
    assert (again.status, again.method) == ("unchanged", "full")


def v2_path(tmp_path, body: bytes):
    path = tmp_path / "direct.json"
    path.write_bytes(body)
    return path


def test_range_fetched_feed_through_the_stage(items, tmp_path):
    v1 = _feed_bytes(items[:120], "2026-01-05T10:00:00Z")
    v2 = _feed_bytes(items, "2026-01-06T10:00:00Z")
    with RangeServer() as srv:
        url = f"{srv.base}/feed.json"
        web = WebResource(mode="live", archive_dir=str(tmp_path / "warc"), allow_private_hosts=["127.0.0.1"])
        try:
            srv.body = v1
            load_sources([SourceSpec(kind="datafeed", path=url)], web, tmp_path / "sources")
            srv.body = v2
            payloads, status = load_sources([SourceSpec(kind="datafeed", path=url)], web, tmp_path / "sources")
            assert status == {"feed.json": "changed"}
            good, bad, _ = ingest(payloads, None)
        finally:
            web.close()
    direct = tmp_path / "direct.json"
    direct.write_bytes(v2)
    expected, _, _ = ingest([("datafeed", "feed.json", str(direct))], None)
    assert good == expected and len(good) == 48 + 79 and bad == []
