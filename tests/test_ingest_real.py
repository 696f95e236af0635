"""Issue 3: stages 1-2 on the real records, every shape at once, with exact counts.

Sources: the Arabic Fact Check Tools excerpt (60 claims, 74 reviews) as an API answer and as a DataFeed, and the
IFCN excerpt (79 rows) as a DataFeed and as API answers. Expected values come from reading the fixtures (the
cross-checks below recompute them from the raw files without the stage's code)."""

import csv
import json
import re
import unicodedata
from collections import Counter

import pytest

from assets.ingestion.merging import ingest
from assets.ingestion.publishers import filter_trusted, load_registry
from dagster_project.config import PROJECT_ROOT
from schemas.frames import from_frame, to_frame
from schemas.records import Review, TrustedReview
from tests.ingest_shapes import (
    FIXTURES,
    feed,
    gfc_feed_items,
    ifcn_api_claims,
    ifcn_claim_text,
    ifcn_feed_items,
)


@pytest.fixture(scope="module")
def claims():
    return json.loads((FIXTURES / "gfc_claims_search_ar_excerpt.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def ifcn():
    with open(FIXTURES / "ifcn_excerpt.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def all_sources(claims, ifcn):
    return [
        ("factcheck_api", "gfc_api.json", claims),
        ("datafeed", "gfc_feed.json", feed(gfc_feed_items(claims))),
        ("datafeed", "ifcn_feed.json", feed(ifcn_feed_items(ifcn))),
        ("factcheck_api", "ifcn_api.json", ifcn_api_claims(ifcn)),
    ]


@pytest.fixture(scope="module")
def publishers():
    return load_registry(str(PROJECT_ROOT / "registry" / "publishers.csv"))


def _key(url: str, text: str) -> tuple[str, str]:
    return url.strip().lower(), re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text)).strip().casefold()


def test_distinct_reviews_cross_check(claims, ifcn):
    """What merging must find, counted straight from the raw files."""
    gfc_keys = {_key(r["url"], c["text"]) for c in claims for r in c["claimReview"]}
    ifcn_keys = {_key(row["fact_check_url"], ifcn_claim_text(row)) for row in ifcn}
    assert (len(gfc_keys), len(ifcn_keys), len(gfc_keys | ifcn_keys)) == (49, 79, 128)
    late = {_key(r["url"], c["text"]) for c in claims for r in c["claimReview"]
            if c.get("claimDate") and r.get("reviewDate") and c["claimDate"][:10] > r["reviewDate"][:10]}
    assert len(late) == 1  # Annir: claimDate 2024-09-11, reviewDate 2024-09-10


def test_all_shapes_merged(all_sources):
    good, bad, stats = ingest(all_sources, None)
    assert stats.rows_in == 74 + 74 + 79 + 79
    assert len(good) == 127  # 128 distinct keys, less the one whose claim date is after its review date
    assert bad == []  # no real record here is malformed
    # the late review comes twice (API and feed); every other key beyond its first copy is a duplicate
    assert dict(stats.drops) == {"claim_date_after_review_date": 2, "duplicate": 306 - 127 - 2}
    # 112 reviews come once per shape (feed + API); the 15 recurring gfc URLs come 2, 3 or 4 times per shape
    assert Counter(len(r.sources) for r in good) == {2: 112, 4: 9, 6: 2, 8: 4}
    assert sum(len(r.sources) for r in good) == 306 - 2
    # every gfc review also came from the feed copy, which wins over the API
    gfc = [r for r in good if r.sources[0].startswith("feed:gfc_feed.json#")]
    assert len(gfc) == 48 and all(any(s.startswith("api:gfc_api.json#") for s in r.sources) for r in gfc)
    assert Counter(r.quarter for r in good) == {"2020Q2": 55, "2020Q1": 24, "2025Q1": 20, "2025Q2": 13, "2024Q3": 7,
                                                "2024Q4": 6, "2024Q2": 2}
    # languages: codes from the feed and the API ("Spanish" -> es); none had to be detected
    assert Counter(r.language for r in good) == {
        "ar": 45, "en": 44, "es": 9, "pt": 7, "fr": 7, "hr": 3, "chinese (traditional)": 3, "my": 2, "lt": 1,
        "pl": 1, "tr": 1, "cs": 1, "it": 1, "ta": 1, "te": 1}
    assert not any(r.language_detected for r in good)
    maldita = next(r for r in good if r.review_url == "https://maldita.es/malditobulo/libro-1981-predijo-coronavirus/")
    assert (maldita.rating_text, maldita.language, maldita.claim_author) == ("misleading", "es", "Twitter")
    assert maldita.appearance_urls == ["https://twitter.com/eldiariodedross/status/1231936799406206977?s=08"]


def test_all_shapes_trusted(all_sources, publishers):
    good, _, _ = ingest(all_sources, None)
    kept, stats, unknown = filter_trusted(to_frame(good, Review), publishers)
    kept = from_frame(kept, TrustedReview)
    assert (stats.rows_in, len(kept)) == (127, 120)
    assert dict(stats.drops) == {"not_a_signatory": 7}  # Yoop Yup (2), Falso, Al Mushahid, Chayyek, Maharat, Tayqan
    assert unknown == Counter()
    assert stats.extra == {"matched_by/domain": 120}
    assert len({r.publisher_id for r in kept}) == 35
    assert Counter(r.publisher_id for r in kept).most_common(5) == [
        ("misbar", 18), ("afp-fact-check", 17), ("fatabyyano", 11), ("india-today-fact-check", 6), ("politifact", 5)]


def test_feed_without_language_is_detected(ifcn):
    good, _, _ = ingest([("datafeed", "ifcn_feed.json", feed(ifcn_feed_items(ifcn)))], None)
    assert len(good) == 79 and all(r.language_detected for r in good)
    # the claim texts are the CSV's English explanations, whatever language the fact-check was in
    assert Counter(r.language for r in good) == {"en": 79}


def test_quarantine_counts_with_real_neighbours(ifcn):
    """Real rows with their fields broken the ways feeds break them: each is quarantined under its reason."""
    items = ifcn_feed_items(ifcn)
    items[0]["url"] = "Unavaliable"  # the CSV's own placeholder, in the URL field
    items[1]["url"] = None
    items[2]["claimReviewed"] = ""
    items[3]["datePublished"] = "2020-02-31"
    items[4]["datePublished"] = "2020-04-01"
    items[4]["itemReviewed"]["datePublished"] = "2020-04-05"
    del items[5]["datePublished"]
    good, bad, stats = ingest([("datafeed", "broken.json", feed(items))], None)
    assert Counter(q.reason for q in bad) == {"non_http_review_url": 1, "missing_review_url": 1, "missing_claim_text": 1,
                                              "unparseable_date": 1, "no_date": 1}
    assert dict(stats.drops) == {"claim_date_after_review_date": 1, "duplicate": 0}
    assert len(good) == 73 and stats.rows_in == 79


@pytest.mark.parametrize("quarter", [None, "2020Q2", "2025Q1", "2024Q3"])
def test_batch_size_does_not_change_the_results(all_sources, quarter):
    good, bad, stats = ingest(all_sources, quarter)
    small, sbad, sstats = ingest(all_sources, quarter, batch=40)  # batches end inside every source
    assert to_frame(small, Review).equals(to_frame(good, Review))
    assert sbad == bad and (sstats.rows_in, dict(sstats.drops)) == (stats.rows_in, dict(stats.drops))
