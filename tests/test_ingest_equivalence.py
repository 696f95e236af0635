"""Issue 16: the parse-once snapshot gives each quarter the same ``reviews`` table, quarantine and yield as the
code before it (main at 30e92b5, captured in ``tests/fixtures/ingest_expected_by_quarter.json``), on the real
fixtures: the Arabic Fact Check Tools excerpt and the IFCN excerpt in every source shape, the real AFP page's
ClaimReview both as page markup and, altered, in a feed (page > feed), and the malformed kinds of
``tests/test_ingest_malformed.py`` in a feed of their own."""

import copy
import csv
import hashlib
import json

import pytest

from assets.ingestion.merging import ingest, merge_sources
from assets.ingestion.snapshot import fingerprint, read_quarter, write_snapshot
from assets.ingestion.sources import prefetch_digests
from dagster_project.resources.store import StoreResource
from schemas.frames import validate_rows
from schemas.records import Review
from tests.ingest_shapes import FIXTURES, afp_claimreview, feed, gfc_feed_items, ifcn_api_claims, ifcn_feed_items

EXPECTED = FIXTURES / "ingest_expected_by_quarter.json"


def fixture_sources() -> list[tuple[str, str, object]]:
    """(kind, origin, payload) for every source shape, built fresh (the readers may keep references)."""
    from assets.ingestion.sources import PageMarkup
    from tests.test_ingest_malformed import _kinds

    claims = json.loads((FIXTURES / "gfc_claims_search_ar_excerpt.json").read_text(encoding="utf-8"))
    with open(FIXTURES / "ifcn_excerpt.csv", newline="", encoding="utf-8") as fh:
        ifcn = list(csv.DictReader(fh))
    afp = afp_claimreview()
    afp_in_feed = copy.deepcopy(afp)
    afp_in_feed["reviewRating"] = {"@type": "Rating", "alternateName": "feed's own rating"}
    afp_in_feed["inLanguage"] = ""
    malformed = {"@type": "DataFeed", "dataFeedElement": [copy.deepcopy(e) for e, _ in _kinds(False)]}
    return [
        ("factcheck_api", "gfc_api.json", claims),
        ("datafeed", "gfc_feed.json", feed(gfc_feed_items(claims))),
        ("datafeed", "ifcn_feed.json", feed(ifcn_feed_items(ifcn) + [afp_in_feed])),
        ("factcheck_api", "ifcn_api.json", ifcn_api_claims(ifcn)),
        ("page_markup", "pages#4", [PageMarkup(afp["url"], [afp])]),
        ("datafeed", "malformed.json", malformed),
    ]


def _as_captured(records, bad, stats) -> dict:
    return {"reviews": [json.loads(r.model_dump_json()) for r in records], "quarantine": [q.model_dump() for q in bad],
            "rows_in": stats.rows_in, "drops": dict(sorted(stats.drops.items()))}


@pytest.fixture(scope="module")
def expected() -> dict:
    return json.loads(EXPECTED.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    """The fixtures' snapshot written to a local store, as review_snapshot writes it."""
    store = StoreResource(root=str(tmp_path_factory.mktemp("store")))
    payloads = fixture_sources()
    fp, parts = fingerprint(payloads)
    manifest = write_snapshot(store, fp, merge_sources(fixture_sources()), parts)
    return store, fp, manifest


def test_every_quarter_is_captured(expected):
    assert sorted(expected) == ["2016Q1", "2020Q1", "2020Q2", "2024Q2", "2024Q3", "2024Q4", "2025Q1", "2025Q2", "2026Q2"]
    assert sum(len(q["reviews"]) for q in expected.values()) == 128  # 127 fixture reviews and the AFP page's
    assert {len(q["quarantine"]) for q in expected.values()} == {17, 65}  # 17 undated rejects count everywhere


@pytest.mark.parametrize("quarter", ["2016Q1", "2020Q1", "2020Q2", "2024Q2", "2024Q3", "2024Q4", "2025Q1", "2025Q2",
                                     "2026Q2"])
def test_the_snapshot_gives_each_quarter_what_the_old_code_gave(expected, snapshot, quarter):
    store, fp, manifest = snapshot
    frame, bad, stats = read_quarter(store, fp, quarter)
    records, invalid = validate_rows(frame.iter_rows(named=True), Review, "reviews", quarter)
    assert _as_captured(records, bad + invalid, stats) == expected[quarter]
    assert manifest["quarters"].get(quarter, 0) == len(expected[quarter]["reviews"])


@pytest.mark.parametrize("quarter", ["2020Q2", "2026Q2"])
def test_ingest_in_memory_gives_the_same(expected, quarter):
    assert _as_captured(*ingest(fixture_sources(), quarter)) == expected[quarter]


def test_the_page_wins_over_the_feed(expected):
    afp = [r for r in expected["2026Q2"]["reviews"] if r["sources"][0].startswith("page:")]
    assert len(afp) == 1 and afp[0]["rating_text"] != "feed's own rating"
    assert [s.split(":")[0] for s in afp[0]["sources"]] == ["page", "feed"]


def test_the_fingerprint_follows_the_content_only(tmp_path):
    feed_path = tmp_path / "feed.json"
    feed_path.write_text(json.dumps(fixture_sources()[1][2]), encoding="utf-8")
    one, _ = fingerprint([("datafeed", "feed.json", str(feed_path))])
    feed_path.write_text(json.dumps(fixture_sources()[1][2]), encoding="utf-8")  # rewritten, same bytes
    assert fingerprint([("datafeed", "feed.json", str(feed_path))])[0] == one
    with open(feed_path, "a", encoding="utf-8") as fh:
        fh.write(" ")
    assert fingerprint([("datafeed", "feed.json", str(feed_path))])[0] != one


def test_a_feed_hashed_ahead_counts_only_as_it_was_when_the_hashing_began(tmp_path):
    """``veritas backfill`` hashes local feeds on a thread while it starts (``prefetch_digests``); the fingerprint
    takes that digest up only while the file is as it was, else it reads the file again."""
    feed_path = tmp_path / "feed.json"
    feed_path.write_text(json.dumps(fixture_sources()[1][2]), encoding="utf-8")
    alone, _ = fingerprint([("datafeed", "feed.json", str(feed_path))])
    prefetch_digests([str(feed_path), str(tmp_path / "absent.json")])  # a missing file is left to the stage
    assert fingerprint([("datafeed", "feed.json", str(feed_path))])[0] == alone
    prefetch_digests([str(feed_path)])
    with open(feed_path, "a", encoding="utf-8") as fh:
        fh.write(" ")  # changed after its hashing began
    changed, parts = fingerprint([("datafeed", "feed.json", str(feed_path))])
    assert changed != alone and parts[0]["sha256"] == hashlib.sha256(feed_path.read_bytes()).hexdigest()
