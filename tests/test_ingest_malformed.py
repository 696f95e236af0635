"""Issue 3: a DataFeed of malformed records (more than 50 kinds) interleaved with real ones.

Every malformed record is quarantined with its own reason, in feed order; nothing raises; the real records around
them come out exactly as they do from a feed that holds only them. Checked for the in-memory feed, the same feed
streamed from disk, and the same feed cleaned in batches of 7 rows."""

import copy
import json
from collections import Counter

import pytest

from assets.ingestion.merging import ingest
from schemas.records import Review
from tests.ingest_shapes import real_claimreviews
from tests.test_reviews import _SURROGATE, BAD_ITEMS, ELEMENTS_BAD, _item

# kinds beyond tests/test_reviews.py's list: (element, reason)
MORE_BAD = [
    ({"item": {}}, "missing_review_url"),  # an empty ClaimReview
    ({"item": [{}]}, "missing_review_url"),
    ({"item": [_item(201, url="http:")]}, "malformed_review_url"),  # a scheme and nothing else
    ({"item": [_item(202, url="https://fullfact.org/a\nb")]}, "malformed_review_url"),  # a line break inside
    ({"item": [_item(203, url="//fullfact.org/online/x")]}, "non_http_review_url"),  # scheme-relative
    ({"item": [_item(204, url="  https://fullfact.org/a b  ")]}, "malformed_review_url"),
    ({"item": [_item(205, datePublished="0000-00-00")]}, "unparseable_date"),
    ({"item": [_item(206, datePublished="2020-05-01T00:00:00+25:00")]}, "unparseable_date"),  # an impossible offset
    ({"item": [_item(207, datePublished="31/31/2020")]}, "unparseable_date"),
    ({"item": [_item(208, claimReviewed="z" * 10_000_000)]}, "claim_text_too_long"),  # 10 MB
    ({"item": [_item(209, claimReviewed=None, url=None)]}, "missing_review_url"),  # two faults: the first is named
    ({"item": [_item(210, itemReviewed={"datePublished": {"nested": [1, 2]}})]}, "unparseable_date"),
]
SURROGATE_KINDS = {29, 30}  # JSON-escaped lone surrogates (tests/ingest_expected_by_quarter.json was captured without)


def _kinds(with_surrogates: bool = True) -> list[tuple[object, str]]:
    """(element, reason) for every malformed kind."""
    kinds = [({"@type": "DataFeedItem", "item": [item]}, reason) for item, reason in BAD_ITEMS
             if with_surrogates or not (isinstance(item, dict) and _case(item) in SURROGATE_KINDS)]
    return kinds + list(ELEMENTS_BAD) + MORE_BAD


def _case(item: dict) -> int | None:
    url = item.get("url")
    if isinstance(url, str) and "/case-" in url:
        return int(url.rsplit("case-", 1)[1].strip("/"))
    return None


@pytest.fixture(scope="module")
def real_items() -> list[dict]:
    return real_claimreviews()


def _interleaved(kinds, real_items) -> tuple[dict, dict[int, int]]:
    """Bad and real elements alternating; returns the feed and {element index: index among the real items}."""
    elements, where = [], {}
    reals = iter(real_items)
    for element, _ in kinds:
        elements.append(copy.deepcopy(element))
        real = next(reals, None)
        if real is not None:
            where[len(elements)] = len(where)
            elements.append({"@type": "DataFeedItem", "item": [real]})
    for real in reals:
        where[len(elements)] = len(where)
        elements.append({"@type": "DataFeedItem", "item": [real]})
    return {"@type": "DataFeed", "dataFeedElement": elements}, where


def _strip_sources(records: list[Review]) -> list[dict]:
    return [r.model_dump(exclude={"sources"}) for r in records]


def _check(kinds, real_items, result, alone, where, origin):
    good, bad, stats = result
    expected_reasons = [reason for _, reason in kinds]
    late = expected_reasons.count("claim_date_after_review_date")  # dropped and counted, not quarantined
    assert [q.reason for q in bad] == [r for r in expected_reasons if r != "claim_date_after_review_date"]
    assert all(q.stage == "reviews" and q.record and q.source == origin for q in bad)
    alone_good, alone_bad, alone_stats = alone
    assert alone_bad == []
    # the real records come through unchanged: the same rows as from a feed of only them, in the same order
    assert _strip_sources(good) == _strip_sources(alone_good)
    element_of = {v: k for k, v in where.items()}
    for merged, single in zip(good, alone_good):
        originals = [int(s.split("#")[1].split(".")[0]) for s in single.sources]
        assert merged.sources == [f"feed:{origin}#{element_of[i]}.0" for i in originals]
    assert stats.rows_in == alone_stats.rows_in + len(kinds)
    assert dict(stats.drops) == {**dict(alone_stats.drops),
                                 "claim_date_after_review_date": alone_stats.drops["claim_date_after_review_date"] + late}


def test_malformed_kinds_in_memory(real_items):
    kinds = _kinds()
    assert len(kinds) == len(BAD_ITEMS) + len(ELEMENTS_BAD) + len(MORE_BAD) == 70
    payload, where = _interleaved(kinds, real_items)
    result = ingest([("datafeed", "mixed.json", payload)], None)
    alone = ingest([("datafeed", "real.json", {"dataFeedElement": [{"item": [it]} for it in real_items]})], None)
    _check(kinds, real_items, result, alone, where, "mixed.json")
    good, bad, stats = result
    # the real records: 74 API reviews of 48 distinct keys (one claim date after its review), 79 IFCN rows
    assert len(good) == 48 + 79 and Counter(q.reason for q in bad)["not_an_object"] == 7
    assert max(len(q.record) for q in bad) == 20000  # the 10 MB claim is kept, truncated


def test_malformed_kinds_streamed_from_disk(real_items, tmp_path):
    kinds = _kinds()  # the JSON-escaped lone surrogates too: a file gives what the parsed feed gives
    assert len(kinds) == 70
    payload, where = _interleaved(kinds, real_items)
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    alone_path = tmp_path / "real.json"
    alone_path.write_text(json.dumps({"dataFeedElement": [{"item": [it]} for it in real_items]}), encoding="utf-8")
    result = ingest([("datafeed", "mixed.json", str(path))], None)
    alone = ingest([("datafeed", "real.json", str(alone_path))], None)
    _check(kinds, real_items, result, alone, where, "mixed.json")
    small, sbad, sstats = ingest([("datafeed", "mixed.json", str(path))], None, batch=7)  # batch ends everywhere
    assert small == result[0] and sbad == result[1]
    assert (sstats.rows_in, dict(sstats.drops)) == (result[2].rows_in, dict(result[2].drops))


def test_surrogates_from_a_file_are_quarantined_as_from_the_parsed_feed(tmp_path):
    path = tmp_path / "s.json"
    feed = {"dataFeedElement": [{"item": [_item(29, claimReviewed=_SURROGATE)]}]}
    path.write_text(json.dumps(feed), encoding="utf-8")  # the lone surrogate written as its JSON escape
    good, bad, _ = ingest([("datafeed", "s.json", str(path))], None)
    assert good == [] and [q.reason for q in bad] == ["invalid_unicode"]
    assert ingest([("datafeed", "s.json", feed)], None)[1] == bad


def test_list_fields_that_cannot_travel_joined_take_the_per_record_path():
    from assets.ingestion.cleaning import _plain_list, _raw_frame

    assert _plain_list(["https://a.example/1", "https://b.example/2"]) and _plain_list([])
    assert not _plain_list(["https://a.example/1", ""])  # an empty entry would vanish in the split
    assert not _plain_list(["https://a.example/1\x1fx"])  # the separator itself
    assert not _plain_list(["https://a.example/1", None])  # not a string: judged entry by entry
    # an API-shaped row has no rating scale: the missing fields become "" and the lists come back whole
    api_row = {"review_url": "https://a.example/1", "claim_text": "c", "claim_date": None, "review_date": "2024-01-02",
               "publisher_name": "P", "publisher_site": "a.example", "rating_text": "False", "language": "en",
               "claim_author": "", "title": "t", "appearance_urls": [], "sources": ["api:x#0.0"], "_seq": 3}
    frame = _raw_frame([api_row])
    assert frame.row(0, named=True) == {**api_row, "rating_value": "", "rating_best": "", "rating_worst": ""}
