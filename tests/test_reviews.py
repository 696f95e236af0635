"""Stage 1 (ClaimReview ingestion) on real records: Fact Check Tools excerpt, IFCN rows, the AFP page, the demo feed.

Expected numbers were worked out by reading the fixtures with a separate script, not copied from ingest's output.
"""

import copy
import csv
import gzip
import json
import re
from collections import Counter
from datetime import date
from pathlib import Path

import pytest

from assets.ingestion.cleaning import clean_row, parse_date, review_key
from assets.ingestion.merging import ingest
from assets.ingestion.sources import claimreview_to_row, iter_datafeed, iter_factcheck_api
from tests.ingest_shapes import feed, ifcn_api_claims, ifcn_claim_text, ifcn_feed_items

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"


def _json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def gfc():
    return _json(FIXTURES / "gfc_claims_search_ar_excerpt.json")


@pytest.fixture(scope="module")
def ifcn_rows():
    with open(FIXTURES / "ifcn_excerpt.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def demo_feed():
    return _json(ROOT / "demo" / "snapshot" / "feed.json")


def _afp_claimreview() -> dict:
    html = gzip.decompress((FIXTURES / "afp_B2LA2G3.html.gz").read_bytes()).decode("utf-8")
    blocks = re.findall(r'<script[^>]+application/ld\+json[^>]*>(.*?)</script>', html, re.S)
    items = [node for block in blocks for node in json.loads(block).get("@graph", [])]
    return next(node for node in items if node.get("@type") == "ClaimReview")


def _quarantine_reasons(bad) -> dict:
    return dict(Counter(q.reason for q in bad))


# --- parse_date -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        ("2026-05-13 15:44", date(2026, 5, 13)),  # AFP page's non-ISO datePublished
        ("2025-04-28T19:23:46Z", date(2025, 4, 28)),  # Fact Check Tools claimDate
        ("2025-04-28", date(2025, 4, 28)),
        ("  2020-04-30  ", date(2020, 4, 30)),
        ("2020-05-01T01:30:00+02:00", date(2020, 4, 30)),  # 23:30 UTC the day before
        ("2020-04-30T23:30:00-02:00", date(2020, 5, 1)),  # 01:30 UTC the day after
        ("2020-06-30 23:30 -05:00", date(2020, 7, 1)),  # crosses a quarter boundary too
        ("2026-05-13T15:44:00+02:00", date(2026, 5, 13)),
        (1588291200, date(2020, 5, 1)),  # epoch seconds (2020-05-01T00:00:00Z)
        (1588291200000, date(2020, 5, 1)),  # epoch ms
        ("1588291200", date(2020, 5, 1)),
        ("1588291200000", date(2020, 5, 1)),
        (1588291199, date(2020, 4, 30)),
        ("May 13, 2026", date(2026, 5, 13)),
        # Vishvas News' ClaimReview (tests/fixtures/factcheck_pages/vishvas_galwan.html.gz): a one-digit offset hour
        ("2020-06-22T12:26:08+5:30", date(2020, 6, 22)),
        ("2020-06-22T03:26:08+5:30", date(2020, 6, 21)),  # 21:56 UTC the day before
        (None, None),
        ("", None),
    ],
)
def test_parse_date_real_forms(value, expected):
    assert parse_date(value) == expected


@pytest.mark.parametrize(
    "value",
    ["not a date", "2020-13-45", "2020-02-30", "2026-05-13T25:00", "2020-13-45T12:26:08+5:30",
     "2020-02-30T12:26:08+5:30", "May", "2020", "May 2020", "yesterday",
     True, False, [2020, 5, 1], {"@value": "2020-05-01"}, 1e20, float("nan"), float("inf"), "9" * 40],
)
def test_parse_date_garbage_raises_value_error(value):
    with pytest.raises(ValueError):
        parse_date(value)


# --- Fact Check Tools excerpt (60 claims, 74 reviews) -----------------------------------------------------------


def test_gfc_iterator_yields_every_review(gfc):
    rows = list(iter_factcheck_api(gfc, "gfc"))
    assert len(rows) == 74
    assert all(row is not None and reason == "" for row, reason, _ in rows)
    first = rows[0][0]
    assert first["publisher_name"] == "مسبار"
    assert first["publisher_site"] == "misbar.com"
    assert first["rating_text"] == "excitement"
    assert first["sources"] == ["api:gfc#0.0"]
    # the object form ({"claims": [...]}) is read the same way
    assert len(list(iter_factcheck_api({"claims": gfc}, "gfc"))) == 74


def test_gfc_ingest_all_quarters(gfc):
    good, bad, stats = ingest([("factcheck_api", "gfc.json", gfc)], None)
    # 74 reviews; claim 36 (Annir) has claimDate 2024-09-11 after reviewDate 2024-09-10 -> dropped;
    # the other 73 hold 48 distinct (url, claim text) keys, so 25 are duplicates
    assert stats.rows_in == 74
    assert len(good) == 48
    assert dict(stats.drops) == {"claim_date_after_review_date": 1, "duplicate": 25}
    assert bad == []
    assert len({r.review_id for r in good}) == 48
    assert Counter(r.language for r in good) == {"ar": 45, "en": 2, "my": 1}
    assert Counter(r.quarter for r in good) == {"2025Q1": 20, "2025Q2": 13, "2024Q3": 7, "2024Q4": 6, "2024Q2": 2}
    # no review URL of the excerpt carries two different claim texts: recurring URLs are pure duplicates
    assert len({r.review_url for r in good}) == 48
    assert "https://annir.ly/fact-checks/the-go" not in {r.review_url[:35] for r in good}
    # claimDate is the partition anchor; reviewDate stays the review date
    multi = [r for r in good if len(r.sources) > 1]
    assert sum(len(r.sources) for r in good) == 73
    assert len(multi) == 15


def test_gfc_ingest_one_quarter(gfc):
    good, bad, stats = ingest([("factcheck_api", "gfc.json", gfc)], "2025Q2")
    # 26 reviews have a 2025Q2 claimDate; they are 13 distinct reviews
    assert stats.rows_in == 26
    assert len(good) == 13
    assert dict(stats.drops) == {"duplicate": 13}
    assert bad == []
    assert {r.quarter for r in good} == {"2025Q2"}
    assert Counter(r.language for r in good) == {"ar": 12, "my": 1}
    assert stats.rows_in == len(good) + sum(stats.drops.values())


def test_gfc_claim_date_drop_counts_in_its_own_quarter_only(gfc):
    _, _, q3 = ingest([("factcheck_api", "gfc.json", gfc)], "2024Q3")
    _, _, q1 = ingest([("factcheck_api", "gfc.json", gfc)], "2025Q1")
    assert q3.rows_in == 8 and dict(q3.drops) == {"claim_date_after_review_date": 1, "duplicate": 0}
    assert q1.rows_in == 32 and dict(q1.drops) == {"duplicate": 12}


# --- IFCN rows as a DataFeed and as the API shape ---------------------------------------------------------------


def test_ifcn_feed_and_api_merge(ifcn_rows):
    assert len(ifcn_rows) == 79
    distinct = {(r["fact_check_url"], ifcn_claim_text(r)) for r in ifcn_rows}
    assert len(distinct) == 79  # the Estadão URL appears twice, with two different claims (tea, vitamin C)
    assert len({r["fact_check_url"] for r in ifcn_rows}) == 78
    api_rows = copy.deepcopy(ifcn_rows[:30])
    disagreeing = api_rows[0]["fact_check_url"]  # Maldita.es, 'misleading' in the CSV
    api_rows[0]["final_rating"] = "API says: false"
    sources = [("datafeed", "ifcn_feed.json", feed(ifcn_feed_items(ifcn_rows))), ("factcheck_api", "ifcn_api.json", ifcn_api_claims(api_rows))]
    good, bad, stats = ingest(sources, None)
    assert stats.rows_in == 79 + 30
    assert len(good) == 79
    assert dict(stats.drops) == {"duplicate": 30}
    assert bad == []
    by_url = {}
    for r in good:
        by_url.setdefault(r.review_url, []).append(r)
    merged = by_url[disagreeing][0]
    assert merged.rating_text == "misleading"  # the feed wins over the API
    assert merged.sources == ["feed:ifcn_feed.json#0.0", "api:ifcn_api.json#0.0"]
    assert merged.language == "es"  # missing in the feed, filled from the API ("Spanish" becomes its code)
    assert not merged.language_detected
    assert merged.appearance_urls == ["https://twitter.com/eldiariodedross/status/1231936799406206977?s=08"]
    assert sum(len(r.sources) == 2 for r in good) == 30
    assert sum(len(r.sources) == 1 and r.sources[0].startswith("feed:") for r in good) == 49
    # 76 rows have an http(s) source_url, 3 say 'Unavaliable'
    assert sum(bool(r.appearance_urls) for r in good) == 76
    assert Counter(r.quarter for r in good) == {"2020Q2": 55, "2020Q1": 24}
    # a single quarter keeps the cross-source duplicates together
    q2_rows = [r for r in ifcn_rows if r["date"] >= "2020-04"]
    q2_dups = sum(1 for r in ifcn_rows[:30] if r["date"] >= "2020-04")
    _, _, q2 = ingest(sources, "2020Q2")
    assert q2.rows_in == len(q2_rows) + q2_dups
    assert dict(q2.drops) == {"duplicate": q2_dups}


def test_merge_rows_dates_from_feed_win_and_quarter_follows_merged_dates():
    feed = {"review_url": "https://fullfact.org/a", "claim_text": "X", "claim_date": None,
            "review_date": "2020-07-02", "sources": ["feed:f#0.0"], "rating_text": "False"}
    api = {"review_url": "https://fullfact.org/a", "claim_text": "x ", "claim_date": "2020-06-20T00:00:00Z",
           "review_date": "2020-07-03T00:00:00Z", "sources": ["api:a#0.0"], "rating_text": "Wrong"}
    payload_feed = {"dataFeedElement": [{"item": [{"url": feed["review_url"], "claimReviewed": "X",
                                                    "datePublished": "2020-07-02", "reviewRating": {"alternateName": "False"}}]}]}
    payload_api = [{"text": "x ", "claimDate": "2020-06-20T00:00:00Z",
                    "claimReview": [{"url": feed["review_url"], "reviewDate": "2020-07-03T00:00:00Z", "textualRating": "Wrong"}]}]
    srcs = [("factcheck_api", "a", payload_api), ("datafeed", "f", payload_feed)]
    good, _, stats = ingest(srcs, None)
    assert len(good) == 1 and stats.rows_in == 2 and stats.drops["duplicate"] == 1
    r = good[0]
    assert (r.claim_date, r.review_date, r.rating_text) == (date(2020, 6, 20), date(2020, 7, 2), "False")
    assert r.quarter == "2020Q2"  # the API's claim date anchors the merged review
    _, _, q3 = ingest(srcs, "2020Q3")
    assert q3.rows_in == 0  # the feed row alone would have said 2020Q3; the merged review is not there
    g2, _, q2 = ingest(srcs, "2020Q2")
    assert len(g2) == 1 and q2.rows_in == 2
    # the key ignores case and spacing of the claim text
    assert review_key("https://fullfact.org/a", "X") == review_key("https://fullfact.org/a", " x\n")
    assert clean_row(dict(feed), None)[0]["review_id"] == clean_row(dict(api), None)[0]["review_id"]


# --- the real AFP page's JSON-LD ---------------------------------------------------------------------------------


def test_afp_jsonld_claimreview_to_row():
    row = claimreview_to_row(_afp_claimreview(), "page:afp_B2LA2G3.html#0")
    assert row["claim_text"] == "Der Hantavirus-Ausbruch ist eine von Globalisten geplante Pandemie."
    assert row["rating_text"] == "Falsch"
    assert (row["rating_value"], row["rating_best"], row["rating_worst"]) == ("1", "5", "1")
    assert row["appearance_urls"] == ["https://x.com/RealAlexJones/status/2052459009425252459"]
    assert row["publisher_name"] == "AFP" and row["publisher_site"] == "https://factcheck.afp.com/"
    assert row["claim_author"] == "Alex Jones"
    assert row["title"] == "Angst vor dem Hantavirus lässt Verschwörungserzählungen aus der Corona-Zeit wiederaufleben"
    assert row["language"] == ""  # the page's ClaimReview has no inLanguage
    cleaned, reason = clean_row(row, "2026Q2")
    assert reason == ""
    assert cleaned["review_date"] == date(2026, 5, 13)
    assert cleaned["claim_date"] == date(2026, 5, 7)
    assert cleaned["quarter"] == "2026Q2"
    assert cleaned["review_url"] == "https://faktencheck.afp.com/doc.afp.com.B2LA2G3"
    assert clean_row(claimreview_to_row(_afp_claimreview(), "page:x"), "2026Q1") == (None, "other_quarter")


# --- a feed of malformed records ---------------------------------------------------------------------------------

GOOD = {
    "@type": "ClaimReview",
    "claimReviewed": "5G masts spread the coronavirus.",
    "datePublished": "2020-05-01",
    "author": {"@type": "Organization", "name": "Full Fact", "url": "https://fullfact.org/"},
    "reviewRating": {"@type": "Rating", "alternateName": "False", "ratingValue": 1},
    "itemReviewed": {"@type": "Claim", "datePublished": "2020-04-30", "appearance": [{"url": "https://twitter.com/x/status/1"}]},
    "inLanguage": "en",
}


def _item(n: int, **changes) -> dict:
    item = copy.deepcopy(GOOD)
    item["url"] = f"https://fullfact.org/online/case-{n}/"
    for key, value in changes.items():
        if value is _DELETE:
            item.pop(key, None)
        else:
            item[key] = value
    return item


_DELETE = object()
_SURROGATE = json.loads('"claim \\ud800 text"')  # a lone surrogate, legal as a JSON escape

BAD_ITEMS = [  # (item, stable reason); every item sits in its own element
    (None, "not_an_object"),
    ("a string", "not_an_object"),
    (123, "not_an_object"),
    (12.5, "not_an_object"),
    (True, "not_an_object"),
    ([copy.deepcopy(GOOD)], "not_an_object"),  # a list where an object is expected
    (_item(1, url=_DELETE), "missing_review_url"),
    (_item(2, url=None), "missing_review_url"),
    (_item(3, url=""), "missing_review_url"),
    (_item(4, url="   \t"), "missing_review_url"),
    (_item(5, url=12345), "review_url_not_a_string"),
    (_item(6, url=["https://fullfact.org/x"]), "review_url_not_a_string"),
    (_item(7, url={"@id": "https://fullfact.org/x"}), "review_url_not_a_string"),
    (_item(8, url=True), "review_url_not_a_string"),
    (_item(9, url="javascript:alert(1)"), "non_http_review_url"),
    (_item(10, url="ftp://fullfact.org/x"), "non_http_review_url"),
    (_item(11, url="file:///etc/passwd"), "non_http_review_url"),
    (_item(12, url="data:text/html,<b>hi</b>"), "non_http_review_url"),
    (_item(13, url="fullfact.org/online/x"), "non_http_review_url"),
    (_item(14, url="mailto:someone@fullfact.org"), "non_http_review_url"),
    (_item(15, url="https://"), "malformed_review_url"),
    (_item(16, url="http://full fact.org/x"), "malformed_review_url"),
    (_item(17, url="http://[::1/x"), "malformed_review_url"),
    (_item(18, claimReviewed=_DELETE), "missing_claim_text"),
    (_item(19, claimReviewed=None), "missing_claim_text"),
    (_item(20, claimReviewed=""), "missing_claim_text"),
    (_item(21, claimReviewed=" \n\t "), "missing_claim_text"),
    (_item(22, claimReviewed="\u200b\u200d\ufeff\u00a0"), "missing_claim_text"),  # invisible only
    (_item(23, claimReviewed=42), "claim_text_not_a_string"),
    (_item(24, claimReviewed=["a", "b"]), "claim_text_not_a_string"),
    (_item(25, claimReviewed={"text": "a claim"}), "claim_text_not_a_string"),
    (_item(26, claimReviewed=False), "claim_text_not_a_string"),
    (_item(27, claimReviewed="x" * 1_000_000), "claim_text_too_long"),  # 1 MB
    (_item(28, claimReviewed="y" * 5001), "claim_text_too_long"),
    (_item(29, claimReviewed=_SURROGATE), "invalid_unicode"),
    (_item(30, name=_SURROGATE), "invalid_unicode"),
    (_item(31, datePublished="not a date"), "unparseable_date"),
    (_item(32, datePublished="2020-13-45"), "unparseable_date"),
    (_item(33, datePublished="2020-02-30"), "unparseable_date"),
    (_item(34, datePublished={"@value": "2020-05-01"}), "unparseable_date"),
    (_item(35, datePublished=[2020, 5, 1]), "unparseable_date"),
    (_item(36, datePublished=True), "unparseable_date"),
    (_item(37, datePublished=1e20), "unparseable_date"),
    (_item(38, datePublished="May"), "unparseable_date"),
    (_item(39, itemReviewed={"@type": "Claim", "datePublished": "yesterday"}), "unparseable_date"),
    (_item(40, itemReviewed={"@type": "Claim", "datePublished": -1e300}), "unparseable_date"),
    (_item(41, datePublished=_DELETE, itemReviewed={"@type": "Claim"}), "no_date"),
    (_item(42, datePublished=None, itemReviewed=None), "no_date"),
    (_item(43, datePublished="", itemReviewed={"datePublished": ""}), "no_date"),
    (_item(44, datePublished="2020-05-23", itemReviewed={"datePublished": "2020-06-02"}), "claim_date_after_review_date"),
    # 23:30 at -05:00 is the next day in UTC: after a same-day review
    (_item(45, datePublished="2020-05-01", itemReviewed={"datePublished": "2020-05-01T23:30:00-05:00"}),
     "claim_date_after_review_date"),
    (_item(46, datePublished=1590192000000, itemReviewed={"datePublished": 1591056000}), "claim_date_after_review_date"),
]

ELEMENTS_BAD = [  # (element, reason): problems above the ClaimReview itself
    ({"@type": "DataFeedItem", "item": None}, "element_without_items"),
    ({"@type": "DataFeedItem"}, "element_without_items"),
    (None, "element_without_items"),
    ("element", "element_without_items"),
    (7, "element_without_items"),
    ({"item": "just a string"}, "not_an_object"),  # item neither a list nor an object
]

GOOD_ODDITIES = [  # records with odd but harmless fields: they must survive
    _item(100, author=None, reviewRating=None, itemReviewed={"appearance": None}),
    _item(101, author=[{"name": "Full Fact"}, None]),
    _item(102, author="Full Fact"),
    _item(103, reviewRating="False"),  # a string where an object is expected
    _item(104, itemReviewed=[{"datePublished": "2020-04-30"}]),  # a list where an object is expected
    _item(105, inLanguage=7, name=123),  # numbers where strings are expected
    _item(106, itemReviewed={"appearance": [None, 5, "javascript:alert(1)", {"url": "ftp://x"}, {"url": "https://t.co/a"}]}),
    _item(107, datePublished=1588291200000),
    _item(108, claimReviewed="\u202eشسيب\u202c ✅ Cafe\u0301 — 5G 🦠"),  # bidi marks, combining accent, emoji
    _item(109, url="HTTPS://fullfact.org/online/upper/"),
    _item(110, inLanguage={"@type": "Language", "name": "English"}),
    _item(111, datePublished="2020-05-01 10:00:00 +02:00", itemReviewed={"datePublished": "2020-05-01T07:00:00Z"}),
]


def _malformed_sources():
    elements = [{"@type": "DataFeedItem", "item": [it]} for it, _ in BAD_ITEMS]
    elements += [el for el, _ in ELEMENTS_BAD]
    elements.append({"item": GOOD_ODDITIES})
    elements.append({"item": []})  # nothing in it: nothing to quarantine
    api = [
        None,
        {"text": "no reviews"},
        {"text": "reviews not a list", "claimReview": {"url": "https://misbar.com/a"}},
        {"text": "a review that is a string", "claimReview": ["https://misbar.com/b"]},
        {"text": 5, "claimReview": [{"url": "https://misbar.com/c", "reviewDate": "2020-05-01T00:00:00Z"}]},
        {"text": "ok", "claimDate": "2020-05-02T00:00:00Z",
         "claimReview": [{"url": "https://misbar.com/d", "reviewDate": "2020-05-01T00:00:00Z"}]},
        {"text": "API good one", "claimDate": None,
         "claimReview": [{"url": "https://misbar.com/e", "reviewDate": "2020-05-01T00:00:00Z", "publisher": None}]},
    ]
    return [
        ("datafeed", "bad_feed.json", {"@type": "DataFeed", "dataFeedElement": elements}),
        ("datafeed", "not_a_feed.json", [1, 2, 3]),
        ("factcheck_api", "bad_api.json", api),
        ("factcheck_api", "not_api.json", "nonsense"),
    ]


def _expected_malformed_reasons() -> Counter:
    expected = Counter(reason for _, reason in BAD_ITEMS + ELEMENTS_BAD)
    # not_a_feed.json is a bare array: its three entries are read, and quarantined as what they are
    expected.update({"element_without_items": 3, "api_without_claims": 1, "claim_without_claimReview": 3,
                     "not_an_object": 1, "claim_text_not_a_string": 1, "claim_date_after_review_date": 1})
    return expected


def test_malformed_feed_is_quarantined_with_stable_reasons():
    assert len(BAD_ITEMS) + len(ELEMENTS_BAD) >= 50
    good, bad, stats = ingest(_malformed_sources(), None)
    expected = _expected_malformed_reasons()
    late = expected.pop("claim_date_after_review_date")
    assert late == 4
    assert _quarantine_reasons(bad) == dict(expected)
    assert dict(stats.drops) == {"claim_date_after_review_date": 4, "duplicate": 0}
    assert len(bad) == 64
    assert len(good) == len(GOOD_ODDITIES) + 1
    assert stats.rows_in == len(bad) + 4 + len(good)
    assert all(q.stage == "reviews" and q.quarter == "all" and q.record for q in bad)
    assert max(len(q.record) for q in bad) == 20000  # the 1 MB claim is kept, truncated
    # the good records survive with their odd fields made harmless
    by_url = {r.review_url: r for r in good}
    assert by_url["https://fullfact.org/online/case-100/"].publisher_name == ""
    assert by_url["https://fullfact.org/online/case-101/"].publisher_name == "Full Fact"
    assert by_url["https://fullfact.org/online/case-102/"].publisher_name == "Full Fact"
    # issue 51: a rating given as its text keeps the text, a one-item list of the claim keeps the claim's date
    assert by_url["https://fullfact.org/online/case-103/"].rating_text == "False"
    assert by_url["https://fullfact.org/online/case-104/"].claim_date == date(2020, 4, 30)
    assert by_url["https://fullfact.org/online/case-105/"].language == "7"
    assert by_url["https://fullfact.org/online/case-106/"].appearance_urls == ["https://t.co/a"]
    assert by_url["https://fullfact.org/online/case-107/"].review_date == date(2020, 5, 1)
    assert by_url["https://fullfact.org/online/case-108/"].claim_text.startswith("\u202e")
    assert "https://fullfact.org/online/upper/" in by_url  # scheme lower-cased, rest kept
    assert by_url["https://fullfact.org/online/case-110/"].language == "en"  # the Language object's name, as a code
    assert by_url["https://fullfact.org/online/case-111/"].review_date == date(2020, 5, 1)
    assert by_url["https://misbar.com/e"].claim_text == "API good one"


def test_malformed_feed_in_another_quarter_keeps_only_undated_failures():
    good, bad, stats = ingest(_malformed_sources(), "2021Q1")
    assert good == []
    reasons = _quarantine_reasons(bad)
    # the dated records belong to 2020Q2; what has no usable date is reported in every partition
    assert reasons == {"not_an_object": 8, "element_without_items": 8,
                       "api_without_claims": 1, "claim_without_claimReview": 3, "no_date": 3}
    assert stats.rows_in == len(bad)


def test_clean_row_rejects_without_raising():
    for item, reason in BAD_ITEMS[6:]:
        row = claimreview_to_row(copy.deepcopy(item), "feed:t#0")
        assert clean_row(row, None)[1] == reason


# --- the demo feed -----------------------------------------------------------------------------------------------


def test_demo_feed_per_quarter(demo_feed):
    rows = list(iter_datafeed(demo_feed, "feed.json"))
    assert len(rows) == 22  # 21 ClaimReview items and the element with "item": null
    good, bad, stats = ingest([("datafeed", "feed.json", demo_feed)], "2020Q2")
    # 19 items + the null element; 16 distinct reviews survive
    assert stats.rows_in == 20
    assert len(good) == 16
    assert dict(stats.drops) == {"claim_date_after_review_date": 1, "duplicate": 1}
    assert _quarantine_reasons(bad) == {"element_without_items": 1, "missing_review_url": 1}
    honjo = next(r for r in good if r.review_url == "https://fullfact.org/online/tasuku-honjo-coronavirus/")
    assert honjo.sources == ["feed:feed.json#4.0", "feed:feed.json#20.0"]
    assert honjo.language == "en"
    assert "https://pesacheck.org/false-there-is-no-evidence-that-aspirin-cures-covid-19-1911839c4a68" not in {
        r.review_url for r in good}
    assert sum(bool(r.appearance_urls) for r in good) == 5

    good26, bad26, stats26 = ingest([("datafeed", "feed.json", demo_feed)], "2026Q2")
    assert stats26.rows_in == 2
    assert len(good26) == 2
    assert dict(stats26.drops) == {"duplicate": 0}
    assert bad26 == []
    afp = next(r for r in good26 if "afp.com" in r.review_url)
    assert (afp.review_date, afp.claim_date, afp.rating_text) == (date(2026, 5, 13), date(2026, 5, 7), "Falsch")
    assert afp.appearance_urls == ["https://x.com/RealAlexJones/status/2052459009425252459"]

    _, bad_all, stats_all = ingest([("datafeed", "feed.json", demo_feed)], None)
    assert stats_all.rows_in == 22 and len(bad_all) == 2
