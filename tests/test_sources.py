"""Stage 1 sources (assets/ingestion/sources/): streamed DataFeeds, incremental feed URLs, the claims:search client and
ClaimReview page markup, on real records (demo feed, Fact Check Tools excerpt, AFP and CORRECTIV pages).

Every server here is a loopback http.server; nothing leaves 127.0.0.1.
"""

import copy
import gzip
import io
import json
import tracemalloc
from collections import Counter
from datetime import date
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from assets.ingestion import sources
from assets.ingestion.merging import ingest
from assets.ingestion.sources import (
    FactCheckToolsClient,
    FactCheckToolsError,
    FeedFileError,
    claimreviews_from_page,
    datafeed_url,
    feed_url_triples,
    fetch_feed_incremental,
    iter_datafeed,
    iter_factcheck_api,
    load_sources,
    stream_datafeed,
)
from dagster_project.config import load_config
from dagster_project.resources.web import WebResource
from dagster_project.stage_settings import SourceSpec
from tests.loopback_web import ThreadedHTTP
from tests.test_reviews import _malformed_sources

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
DEMO_FEED = ROOT / "demo" / "snapshot" / "feed.json"
DEMO_WARC = ROOT / "demo" / "snapshot" / "pages.warc.gz"
AFP_URL = "https://faktencheck.afp.com/doc.afp.com.B2LA2G3"


def _html(name: str) -> str:
    return gzip.decompress((FIXTURES / name).read_bytes()).decode("utf-8")


class _Server(ThreadedHTTP):
    """A loopback HTTP server around one handler function (path, query) -> (status, headers, body)."""

    def __init__(self, handle):
        outer = self
        self.requests: list[tuple[str, dict]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server naming)
                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                outer.requests.append((parts.path, query))
                status, headers, body = handle(parts.path, query)
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        super().__init__(Handler)


# --- 1. streaming DataFeed ---------------------------------------------------------------------------------------


def test_stream_equals_iter_datafeed_on_demo_feed():
    feed = json.loads(DEMO_FEED.read_text(encoding="utf-8"))
    streamed = list(stream_datafeed(DEMO_FEED, "feed.json"))
    assert streamed == list(iter_datafeed(feed, "feed.json"))
    assert len(streamed) == 22
    # ingest reads a local path by streaming it, with the same result as the parsed dict
    for quarter in ("2020Q2", "2026Q2", None):
        good_s, bad_s, stats_s = ingest([("datafeed", "feed.json", str(DEMO_FEED))], quarter)
        good_d, bad_d, stats_d = ingest([("datafeed", "feed.json", feed)], quarter)
        assert good_s == good_d and bad_s == bad_d
        assert (stats_s.rows_in, dict(stats_s.drops)) == (stats_d.rows_in, dict(stats_d.drops))
    assert (len(good_s), stats_s.rows_in) == (18, 22)


def test_stream_malformed_elements_are_quarantined_not_fatal():
    feeds = [(origin, payload) for kind, origin, payload in _malformed_sources() if kind == "datafeed"]
    for origin, payload in feeds:
        in_memory = list(iter_datafeed(payload, origin))
        streamed = list(stream_datafeed(io.BytesIO(json.dumps(payload).encode("utf-8")), origin))
        assert [reason for _, reason, _ in streamed] == [reason for _, reason, _ in in_memory]
    bad_feed = feeds[0][1]
    streamed = list(stream_datafeed(io.BytesIO(json.dumps(bad_feed).encode("utf-8")), "bad_feed.json"))
    in_memory = list(iter_datafeed(bad_feed, "bad_feed.json"))
    assert len(streamed) == 70
    # the lone surrogate escapes (case-29, case-30) come out as written, as from the parsed feed
    assert streamed == in_memory
    # a bare array is read entry by entry; an object with no feed list and no ClaimReview is refused, by name
    assert [r for _, r, _ in stream_datafeed(io.BytesIO(b"[1, 2, 3]"), "x")] == ["element_without_items"] * 3
    odd = b'{"dataFeedElement": {"item": [{"url": "https://a.org/x", "claimReviewed": "c"}]}, "n": 1}'
    with pytest.raises(FeedFileError, match=r"^x: a JSON object with the members 'dataFeedElement', 'n', not a feed"):
        list(stream_datafeed(io.BytesIO(odd), "x"))
    with pytest.raises(FeedFileError, match="^x: a JSON object with the members 'dataFeedElement', not a feed"):
        list(iter_datafeed({"dataFeedElement": {"item": []}}, "x"))


def _feed_bytes(elements: list) -> tuple[bytes, list[int]]:
    """A DataFeed as bytes and the byte offset just after each element."""
    out = io.BytesIO()
    out.write(b'{"@type": "DataFeed", "dataFeedElement": [')
    ends = []
    for i, element in enumerate(elements):
        out.write((", " if i else "").encode() + json.dumps(element, ensure_ascii=False).encode("utf-8"))
        ends.append(out.tell())
    out.write(b"]}")
    return out.getvalue(), ends


def test_truncated_feed_keeps_everything_before_the_cut(tmp_path):
    feed = json.loads(DEMO_FEED.read_text(encoding="utf-8"))
    elements = feed["dataFeedElement"]
    data, ends = _feed_bytes(elements)
    assert json.loads(data)["dataFeedElement"] == elements
    for k in (0, 3, 11, len(elements) - 1):
        cut = ends[k] - 25  # inside element k
        triples = list(stream_datafeed(io.BytesIO(data[:cut]), "feed.json"))
        expected = list(iter_datafeed({"dataFeedElement": elements[:k]}, "feed.json"))
        assert triples[:-1] == expected
        assert triples[-1][1] == "truncated_feed" and triples[-1][2]["elements_read"] == k
    # cut after the last element but before the closing brackets: everything, then the truncation
    whole = list(stream_datafeed(io.BytesIO(data[: ends[-1]]), "feed.json"))
    assert len(whole) == 23 and whole[-1][1] == "truncated_feed"
    # garbage in the middle is bad JSON, not truncation: quarantined as one record, and the reader resyncs at the next
    # element (issue 51; before, the rest of the feed went as one malformed_feed_json record)
    broken = data[: ends[5]] + b", }{ " + data[ends[5]:]
    triples = list(stream_datafeed(io.BytesIO(broken), "feed.json"))
    assert [reason for _, reason, _ in triples].count("malformed_record_json") == 1
    whole = list(stream_datafeed(io.BytesIO(data), "feed.json"))

    def rows(found):  # the garbage took an element's number: the sources of the elements after it moved by one
        return [{k: v for k, v in row.items() if k != "sources"} for row, _, _ in found if row]

    assert rows(triples) == rows(whole) and len(triples) == len(whole) + 1
    # ingest quarantines the truncation in every partition (it has no date) and keeps the rows before it
    path = tmp_path / "cut.json"
    path.write_bytes(data[: ends[11] - 25])
    good, bad, stats = ingest([("datafeed", "cut.json", str(path))], None)
    # elements 0..10 survive the cut: the null element, an empty one, and 9 distinct dated ClaimReviews
    assert Counter(q.reason for q in bad) == {"truncated_feed": 1, "element_without_items": 1}
    assert len(good) == 9 and stats.rows_in == 11
    _, bad26, _ = ingest([("datafeed", "cut.json", str(path))], "2026Q2")
    assert [q.reason for q in bad26] == ["truncated_feed"]


def test_streaming_memory_stays_flat_on_a_30mb_feed(tmp_path):
    """Measured here: a 31.5 MB file of 7,364 elements peaks at 0.29 MB under tracemalloc while streamed
    (json.load of the same file peaks at 107 MB). The bound below is deliberately loose."""
    feed = json.loads(DEMO_FEED.read_text(encoding="utf-8"))
    template = feed["dataFeedElement"][3]
    body = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 60  # a realistic long reviewBody
    path = tmp_path / "big.json"
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        fh.write('{"@type": "DataFeed", "dataFeedElement": [')
        while fh.tell() < 30 * 1024 * 1024:
            element = copy.deepcopy(template)
            element["item"][0]["url"] = f"https://factcheck.afp.com/generated-{n}"
            element["item"][0]["reviewBody"] = body
            fh.write((", " if n else "") + json.dumps(element))
            n += 1
        fh.write("]}")
    size = path.stat().st_size
    assert size >= 30 * 1024 * 1024
    tracemalloc.start()
    try:
        count = 0
        last = None
        for row, reason, _ in stream_datafeed(path, "big.json"):
            count += 1
            last = row
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == n
    assert last["review_url"] == f"https://factcheck.afp.com/generated-{n - 1}"
    assert peak < size / 4


# --- 2. incremental fetch of a feed URL -----------------------------------------------------------------------------


def test_feed_url_incremental_fetch(tmp_path, monkeypatch):
    served = {"body": DEMO_FEED.read_bytes(), "etag": '"v1"'}
    with _Server(lambda path, q: (200, {"Content-Type": "application/json", "ETag": served["etag"]}, served["body"])) as srv:
        web = WebResource(mode="live", archive_dir=str(tmp_path / "warc"), allow_private_hosts=["127.0.0.1"])
        url = srv.base + "/feeds/feed.json"
        state_dir = tmp_path / "data" / "sources"
        spec = SourceSpec(kind="datafeed", path=url)
        try:
            first = fetch_feed_incremental(web, url, state_dir)
            assert (first.status, first.etag, first.content_length) == ("new", '"v1"', len(served["body"]))
            assert first.path.read_bytes() == served["body"]
            rows_first = list(feed_url_triples(first, "feed.json"))
            assert rows_first == list(stream_datafeed(DEMO_FEED, "feed.json"))
            assert first.rows_cache.exists()

            # the same body again: no re-parse (the streaming reader must not be called), rows from the cache
            monkeypatch.setattr(datafeed_url, "stream_datafeed", lambda *a: pytest.fail("unchanged feed re-parsed"))
            payloads, status = load_sources([spec], web, state_dir)
            assert status == {"feed.json": "unchanged"}
            good, bad, stats = ingest(payloads, "2020Q2")
            assert (len(good), stats.rows_in, sorted(q.reason for q in bad)) == (
                16, 20, ["element_without_items", "missing_review_url"])
            assert good[0].sources[0].startswith("feed:feed.json#")
            monkeypatch.undo()

            # a new version: parsed again, the state file follows
            feed = json.loads(served["body"])
            feed["dataFeedElement"] = feed["dataFeedElement"][:10]
            served.update(body=json.dumps(feed).encode("utf-8"), etag='"v2"')
            payloads, status = load_sources([spec], web, state_dir)
            assert status == {"feed.json": "changed"}
            good, _, stats = ingest(payloads, None)
            # elements 0..9: the null element (quarantined), an empty one, 8 distinct dated ClaimReviews
            assert stats.rows_in == 9 and len(good) == 8
            state = json.loads((state_dir / "feeds.json").read_text())
            assert state[url]["etag"] == '"v2"' and state[url]["content_length"] == len(served["body"])
            assert state[url]["status"] == "changed"
        finally:
            web.close()
    assert len(srv.requests) == 3


# --- 3. Fact Check Tools claims:search client -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def gfc():
    return json.loads((FIXTURES / "gfc_claims_search_ar_excerpt.json").read_text(encoding="utf-8"))


class _FakeClaimsSearch:
    """Pages like the real API: pageSize claims per page, an opaque nextPageToken, one 429 to start with."""

    def __init__(self, claims: list[dict], key: str = "test-key-123", throttle_first: int = 1, today: date | None = None):
        self.claims = claims
        self.key = key
        self.throttle = throttle_first
        self.today = today  # when set, maxAgeDays filters as the API does: by the newer of claim and review date

    def __call__(self, path, query):
        if path != "/v1alpha1/claims:search":
            return 404, {}, b"{}"
        if query.get("key") != [self.key]:
            return 403, {"Content-Type": "application/json"}, b'{"error": {"code": 403}}'
        if self.throttle:
            self.throttle -= 1
            return 429, {"Retry-After": "0"}, b'{"error": {"code": 429}}'
        site = query.get("reviewPublisherSiteFilter", [""])[0]
        claims = [c for c in self.claims if not site or any(
            r.get("publisher", {}).get("site") == site for r in c["claimReview"])]
        if self.today is not None and "maxAgeDays" in query:
            age = int(query["maxAgeDays"][0])
            claims = [c for c in claims if (self.today - _newest(c)).days <= age]
        size = int(query.get("pageSize", ["10"])[0])
        start = int(query.get("pageToken", ["0"])[0].removeprefix("tok"))
        answer = {"claims": claims[start:start + size]}
        if start + size < len(claims):
            answer["nextPageToken"] = f"tok{start + size}"
        return 200, {"Content-Type": "application/json"}, json.dumps(answer).encode("utf-8")


def _newest(claim: dict) -> date:
    days = [claim.get("claimDate")] + [r.get("reviewDate") for r in claim["claimReview"]]
    return max(date.fromisoformat(d[:10]) for d in days if d)


def test_claims_search_age_and_site_filters(gfc):
    fake = _FakeClaimsSearch(gfc, throttle_first=0, today=date(2025, 5, 31))
    with _Server(fake) as srv:
        with FactCheckToolsClient("test-key-123", base_url=srv.base + "/v1alpha1/claims:search") as client:
            counts = {age: len(client.search(query="x", max_age_days=age, page_size=10)) for age in (30, 60, 120, 365)}
            misbar = len(client.search(site="misbar.com", max_age_days=60, page_size=5))
            everything = len(client.search(query="x", page_size=25))
    # counted from the excerpt: the newest of claimDate/reviewDate within the age, seen on 2025-05-31
    assert counts == {30: 0, 60: 18, 120: 42, 365: 58}
    assert (misbar, everything) == (13, 60)
    ages = [q.get("maxAgeDays", [None])[0] for _, q in srv.requests]
    assert ages.count("60") == 2 + 3  # 18 claims in pages of 10, then 13 in pages of 5


def test_claims_search_pages_retries_and_filters(gfc):
    fake = _FakeClaimsSearch(gfc)
    with _Server(fake) as srv:
        base = srv.base + "/v1alpha1/claims:search"
        waits = []
        with FactCheckToolsClient("test-key-123", base_url=base, sleep=waits.append) as client:
            claims = client.search(query="كورونا", page_size=10, max_age_days=120, language_code="ar")
            assert (len(claims), client.pages_fetched, client.retries) == (60, 6, 1)
        assert claims == gfc
        assert waits == [0.0]  # Retry-After: 0 honoured
        assert len(srv.requests) == 7  # the 429, then 6 pages
        page_params = [q for _, q in srv.requests[1:]]
        assert all(q["key"] == ["test-key-123"] and q["maxAgeDays"] == ["120"] and q["languageCode"] == ["ar"]
                   for q in page_params)
        assert [q.get("pageToken", [""])[0] for q in page_params] == ["", "tok10", "tok20", "tok30", "tok40", "tok50"]
        assert len(list(iter_factcheck_api(claims, "live"))) == 74

        with FactCheckToolsClient("test-key-123", base_url=base, sleep=waits.append) as client:
            misbar = client.search(site="misbar.com", page_size=10)
            assert (len(misbar), client.pages_fetched) == (26, 3)
            assert len(list(iter_factcheck_api(misbar, "live"))) == 35
            capped = client.search(site="fatabyyano.net", page_size=5, max_pages=2)
            assert len(capped) == 10  # 13 claims, but only 2 pages of 5 were read
            assert client.pages_fetched == 5

        with FactCheckToolsClient("wrong-key", base_url=base) as client:
            with pytest.raises(FactCheckToolsError) as err:
                client.search(site="misbar.com")
            assert "403" in str(err.value) and "wrong-key" not in str(err.value)

    fake_busy = _FakeClaimsSearch(gfc, throttle_first=10)
    with _Server(fake_busy) as srv:
        with FactCheckToolsClient("test-key-123", base_url=srv.base + "/v1alpha1/claims:search", max_retries=2,
                                  sleep=waits.append) as client:
            with pytest.raises(FactCheckToolsError, match="429"):
                client.search(site="misbar.com")
        assert len(srv.requests) == 3


def test_claims_search_refuses_plain_http_off_loopback():
    with pytest.raises(ValueError, match="https"):
        FactCheckToolsClient("k", base_url="http://factchecktools.googleapis.com/v1alpha1/claims:search")
    with pytest.raises(ValueError, match="API key"):
        FactCheckToolsClient("", base_url="http://127.0.0.1:9/v1alpha1/claims:search")
    with pytest.raises(ValueError, match="query or"):
        next(FactCheckToolsClient("k", base_url="http://127.0.0.1:9/x").iter_pages())


def test_factcheck_api_live_source_through_ingest(gfc, monkeypatch, tmp_path):
    with _Server(_FakeClaimsSearch(gfc)) as srv:
        spec = SourceSpec(kind="factcheck_api_live", site="misbar.com", max_age_days=120, api_key_env="VERITAS_TEST_KEY",
                          base_url=srv.base + "/v1alpha1/claims:search", page_size=10)
        with pytest.raises(RuntimeError, match="VERITAS_TEST_KEY"):
            load_sources([spec], None, tmp_path)
        monkeypatch.setenv("VERITAS_TEST_KEY", "test-key-123")
        payloads, status = load_sources([spec], None, tmp_path)
    assert status == {"factchecktools:misbar.com": "3 pages"}
    good, bad, stats = ingest(payloads, None)
    misbar = [c for c in gfc if any(r["publisher"]["site"] == "misbar.com" for r in c["claimReview"])]
    good_dump, _, stats_dump = ingest([("factcheck_api", "dump", misbar)], None)
    assert stats.rows_in == 35 and len(good) == len(good_dump) and bad == []
    assert good[0].sources[0].startswith("api:factchecktools:misbar.com#")


# --- 4. ClaimReview markup in the page -------------------------------------------------------------------------------


def test_afp_page_markup():
    reviews = claimreviews_from_page(_html("afp_B2LA2G3.html.gz"), AFP_URL)
    assert len(reviews) == 1
    review = reviews[0]
    assert review["claimReviewed"] == "Der Hantavirus-Ausbruch ist eine von Globalisten geplante Pandemie."
    assert review["reviewRating"]["alternateName"] == "Falsch"
    assert review["datePublished"] == "2026-05-13 15:44"
    assert review["itemReviewed"]["datePublished"] == "2026-05-07"
    good, bad, stats = ingest([("page_markup", "pages", [sources.PageMarkup(AFP_URL, reviews)])], "2026Q2")
    assert len(good) == 1 and bad == [] and stats.rows_in == 1
    row = good[0]
    assert (row.review_date, row.claim_date, row.rating_text) == (date(2026, 5, 13), date(2026, 5, 7), "Falsch")
    assert row.sources == [f"page:{AFP_URL}"]
    assert row.appearance_urls == ["https://x.com/RealAlexJones/status/2052459009425252459"]


def test_correctiv_page_has_no_claimreview():
    url = "https://correctiv.org/hybride-kriegsfuehrung/2026/05/21/von-muenchen-bis-aachen-im-netz-der-china-agenten/"
    assert claimreviews_from_page(_html("correctiv_no_claimreview.html.gz"), url) == []


GRAPH_PAGE = """<html><head><script type="application/ld+json">
{"@context": "https://schema.org", "@graph": [
  {"@type": "Organization", "@id": "#org", "name": "Graph Checks", "url": "https://graph.example/"},
  {"@type": "NewsArticle", "headline": "h", "review": {"@type": ["ClaimReview", "Review"], "author": {"@id": "#org"},
   "claimReviewed": "Nested claim.", "datePublished": "2020-05-02", "reviewRating": {"alternateName": "False"}}},
  {"@type": "schema:ClaimReview", "url": "https://graph.example/fc/2", "claimReviewed": "Second claim.",
   "datePublished": "2020-05-04", "author": {"@id": "#org"}}
]}
</script>
<script type="application/ld+json">[{"@type": "WebPage"}, {"@type": "ClaimReview", "claimReviewed": "nested  CLAIM.",
 "datePublished": "2020-05-02"}]</script></head>
<body><div itemscope itemtype="https://schema.org/ClaimReview">
 <meta itemprop="claimReviewed" content="Microdata claim."><meta itemprop="datePublished" content="2020-05-03">
 <div itemprop="author" itemscope itemtype="https://schema.org/Organization"><meta itemprop="name" content="MD Checks"></div>
</div>
<div vocab="https://schema.org/" typeof="ClaimReview">
 <span property="claimReviewed">RDFa claim.</span><meta property="datePublished" content="2020-05-05">
 <div property="author" typeof="Organization"><span property="name">RDFa Checks</span></div>
 <div property="itemReviewed" typeof="Claim"><div property="appearance" typeof="CreativeWork">
   <link property="url" href="https://t.co/rdfa"></div></div>
</div></body></html>"""


def test_graph_lists_typelists_microdata_rdfa():
    page = "https://graph.example/fc/1"
    reviews = claimreviews_from_page(GRAPH_PAGE, page)
    by_claim = {r["claimReviewed"]: r for r in reviews}
    # the second "nested  CLAIM." block is the same review as "Nested claim." (same page URL, same claim text)
    assert sorted(by_claim) == ["Microdata claim.", "Nested claim.", "RDFa claim.", "Second claim."]
    assert by_claim["Nested claim."]["author"]["name"] == "Graph Checks"  # the @id reference resolved
    assert by_claim["Nested claim."]["url"] == page
    assert by_claim["Second claim."]["url"] == "https://graph.example/fc/2"
    assert by_claim["Microdata claim."]["author"]["name"] == "MD Checks"
    rows = list(sources.iter_page_markup([sources.PageMarkup(page, reviews)], "pages"))
    by_text = {row["claim_text"]: row for row, _, _ in rows}
    assert by_text["RDFa claim."]["publisher_name"] == "RDFa Checks"
    assert by_text["RDFa claim."]["appearance_urls"] == ["https://t.co/rdfa"]
    assert by_text["Second claim."]["publisher_site"] == "https://graph.example/"


def test_page_beats_feed_when_merged():
    feed = json.loads(DEMO_FEED.read_text(encoding="utf-8"))
    afp_feed = next(it for el in feed["dataFeedElement"] for it in (el.get("item") or [])
                    if it.get("url") == AFP_URL)
    afp_feed["reviewRating"]["alternateName"] = "Irreführend"  # the feed copy disagrees with the page
    afp_feed["inLanguage"] = "de"  # and knows something the page does not say
    page = sources.PageMarkup(AFP_URL, claimreviews_from_page(_html("afp_B2LA2G3.html.gz"), AFP_URL))
    srcs = [("datafeed", "feed.json", feed), ("page_markup", "pages", [page])]
    good, bad, stats = ingest(srcs, "2026Q2")
    assert len(good) == 2 and stats.rows_in == 3 and dict(stats.drops) == {"duplicate": 1}
    afp = next(r for r in good if r.review_url == AFP_URL)
    assert afp.rating_text == "Falsch"  # the page wins
    assert afp.language == "de"  # filled from the feed
    assert afp.sources == [f"page:{AFP_URL}", "feed:feed.json#21.0"]


def test_page_markup_source_through_replayed_web(tmp_path):
    web = WebResource(mode="replay", warc_paths=[str(DEMO_WARC)])
    missing = "https://faktencheck.afp.com/not-archived"
    correctiv = "https://correctiv.org/hybride-kriegsfuehrung/2026/05/21/von-muenchen-bis-aachen-im-netz-der-china-agenten/"
    spec = SourceSpec(kind="page_markup", urls=[AFP_URL, missing, correctiv])
    payloads, status = load_sources([spec, SourceSpec(kind="datafeed", path=str(DEMO_FEED))], web, tmp_path)
    assert status == {"pages#0": "2/3 fetched", "feed.json": "local"}
    good, bad, stats = ingest(payloads, "2026Q2")
    assert len(good) == 2
    afp = next(r for r in good if r.review_url == AFP_URL)
    assert afp.sources == [f"page:{AFP_URL}", "feed:feed.json#21.0"]
    assert Counter(q.reason for q in bad) == {"page_fetch_failed": 1, "page_without_claimreview": 1}


def test_config_reads_the_new_source_kinds(tmp_path):
    (tmp_path / "feed.json").write_text("{}")
    cfg = tmp_path / "veritas.yaml"
    cfg.write_text(yaml.safe_dump({"sources": [
        {"kind": "datafeed", "path": "feed.json"},
        {"kind": "factcheck_api_live", "site": "misbar.com", "max_age_days": 120, "api_key_env": "FACTCHECK_API_KEY"},
        {"kind": "page_markup", "urls": [AFP_URL]},
    ]}))
    specs = [SourceSpec(**s) for s in load_config(cfg)["stages"]["sources"]]
    assert specs[0].path == str(tmp_path / "feed.json")
    assert (specs[1].site, specs[1].max_age_days, specs[1].api_key_env) == ("misbar.com", 120, "FACTCHECK_API_KEY")
    assert specs[1].base_url == "https://factchecktools.googleapis.com/v1alpha1/claims:search"
    assert specs[2].urls == [AFP_URL] and specs[2].path == ""
