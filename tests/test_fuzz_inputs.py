"""Issue 35: property-based tests (hypothesis) of the two readers a user's input goes through first: the DataFeed
reader of stage 1 and the config loader. A fixed budget of examples, derandomized, so that CI takes seconds and a
failure repeats. The properties:

- no exception escapes but the project's own (``ConfigError`` for a config; for a feed, ``FeedFileError`` naming the
  file when it holds no feed shape at all, else none: what is broken is quarantined);
- records in = records out + quarantined, and every record that was not broken comes out as from the parsed feed;
- memory follows the caps, not the input, on nested and oversized records.

The records are the real ClaimReviews of tests/fixtures, broken the ways a careless or hostile feed breaks them."""

import csv
import io
import json
import tracemalloc
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from assets.ingestion import sources
from assets.ingestion.merging import ingest
from assets.ingestion.sources import feed_text, iter_datafeed, stream_datafeed
from dagster_project.config import ConfigError, load_config
from dagster_project.stage_settings import OWNER, stage_settings
from tests.ingest_shapes import FIXTURES, gfc_feed_items, ifcn_feed_items

BUDGET = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _real_items() -> list[dict]:
    claims = json.loads((FIXTURES / "gfc_claims_search_ar_excerpt.json").read_text(encoding="utf-8"))
    with open(FIXTURES / "ifcn_excerpt.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return gfc_feed_items(claims) + ifcn_feed_items(rows)


REAL = _real_items()
CAP_CHARS = 4096  # the record cap while fuzzing: oversized records stay small enough to write by the hundred

# ---- the feed reader ------------------------------------------------------------------------------------------------

# how one element may be broken, and the reason its one triple must then give
BREAKS = {
    "none": "",
    "bad_byte": "invalid_utf8",  # a byte that is not UTF-8 inside a string
    "cut_letter": "invalid_utf8",  # the lead byte of a multi-byte letter cut out
    "deep": "record_too_deep",
    "large": "record_too_large",
    "syntax": "malformed_record_json",  # a colon lost
    "nan": "malformed_record_json",  # NaN, which Python's json reads but JSON has not
    "long_number": "malformed_record_json",  # an element that is a number of more digits than Python reads
}
BAD_BYTES = [b"\xff", b"\xc0", b"\xe2\x82", b"\xed\xa0\x80", b"\x80", b"\xf8\x88\x80\x80\x80"]


@st.composite
def broken_element(draw) -> tuple[bytes, str, dict]:
    """(element bytes, the reason its triple must give, the item it holds)."""
    item = dict(draw(st.sampled_from(REAL)))
    if draw(st.booleans()):  # a field a hostile feed adds: any JSON, nested a little
        item["extra"] = draw(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                                          lambda inner: st.lists(inner, max_size=3)
                                          | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8))
    kind = draw(st.sampled_from(sorted(BREAKS)))
    event(f"break: {kind}")
    data = json.dumps({"@type": "DataFeedItem", "item": [item]}, ensure_ascii=False).encode("utf-8")
    if kind == "bad_byte":
        # in the item (a bad byte in the element's own "@type" leaves the item whole, and it comes out)
        prefix, word = draw(st.sampled_from([(b'"url": "', b""), (b'"claimReviewed": "', b""),
                                             (b'"@type": "', b"ClaimReview")]))
        data = data.replace(prefix + word, prefix + draw(st.sampled_from(BAD_BYTES)) + word, 1)
    elif kind == "cut_letter":
        text = json.dumps(item["claimReviewed"], ensure_ascii=False)[1:-1].encode("utf-8")  # as the element has it
        lead = next((i for i, b in enumerate(text) if b >= 0xC0), None)
        if lead is None:  # an English claim: give it one letter to cut
            data = data.replace(b'"claimReviewed": "', b'"claimReviewed": "\xa9', 1)
        else:
            data = data.replace(text, text[:lead] + text[lead + 1:], 1)
    elif kind == "deep":
        depth = draw(st.integers(sources.MAX_RECORD_DEPTH - 2, 1500))  # the element adds 3: just over the cap
        data = data[:-3] + b', "x": ' + b"[" * depth + b"]" * depth + b"}]}"
    elif kind == "large":
        data = data.replace(b'"url": ', b'"reviewBody": "' + b"x" * draw(st.integers(CAP_CHARS, 3 * CAP_CHARS))
                            + b'", "url": ', 1)
    elif kind == "syntax":
        data = data.replace(b'"url": ', b'"url" ', 1)
    elif kind == "nan":
        data = data.replace(b'"@type": "ClaimReview"', b'"@type": NaN', 1)
    elif kind == "long_number":
        data = b"9" * draw(st.integers(4301, 3 * CAP_CHARS))
    return data, BREAKS[kind], item


def _stream(data: bytes, read_size: int) -> list:
    with mock.patch.object(feed_text, "MAX_RECORD_CHARS", CAP_CHARS), mock.patch.object(feed_text, "_READ", read_size):
        return list(stream_datafeed(io.BytesIO(data), "fuzz.json"))


@settings(BUDGET, max_examples=40)
@given(st.lists(broken_element(), min_size=1, max_size=8), st.sampled_from([7, 1000, 1 << 20]))
def test_every_record_comes_out_or_is_quarantined_alone(elements, read_size):
    data = b'{"@type": "DataFeed", "dataFeedElement": [' + b", ".join(e for e, _, _ in elements) + b"]}"
    triples = _stream(data, read_size)  # reads of 7 bytes cut every token, escape and letter somewhere
    assert len(triples) == len(elements)  # records in = records out + quarantined: one triple per item
    for (_, reason, item), (row, got, raw) in zip(elements, triples):
        if reason == "":
            expected = next(iter_datafeed({"dataFeedElement": [{"@type": "DataFeedItem", "item": [item]}]}, "x"))
            assert (got, raw) == (expected[1], expected[2])
            assert row is None or row == {**expected[0], "sources": row["sources"]}
        else:
            assert (row, got) == (None, reason)


@BUDGET
@given(st.binary(max_size=400), st.sampled_from([5, 1 << 20]))
def test_any_bytes_give_triples_or_a_refusal_naming_the_file(data, read_size):
    try:
        triples = _stream(data, read_size)
    except sources.FeedFileError as err:  # issue 51: no feed shape at all stops the stage, naming the file
        assert str(err).startswith("fuzz.json: ")
        event("refused")
        return
    for triple in triples:
        assert len(triple) == 3


@BUDGET
@given(st.lists(st.recursive(st.none() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False)
                             | st.integers() | st.text(),
                             lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                             max_leaves=20), max_size=8))
def test_any_json_elements_are_read_as_the_parsed_feed_reads_them(elements):
    feed = {"@type": "DataFeed", "dataFeedElement": elements}
    data = json.dumps(feed).encode("utf-8")
    assert _stream(data, 1 << 20) == list(iter_datafeed(json.loads(data), "fuzz.json"))


@settings(max_examples=8, deadline=None, derandomize=True, database=None)
@given(st.integers(1_000, 30_000), st.sampled_from(["[", "{\"a\":"]))
def test_memory_follows_the_cap_not_the_nesting(depth, opener):
    closer = "]" if opener == "[" else "}"
    deep = ('{"item": [' + opener * depth + ("null" if opener != "[" else "") + closer * depth + "]}").encode()
    data = b'{"dataFeedElement": [' + deep + b", " + json.dumps({"item": [REAL[0]]}).encode() + b"]}"
    tracemalloc.start()
    try:
        triples = list(stream_datafeed(io.BytesIO(data), "deep.json"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [reason for _, reason, _ in triples] == ["record_too_deep", ""]
    assert peak < 4 * len(data) + (2 << 20)  # the text of the record and a read; ijson's prefixes grew as depth²


@settings(max_examples=10, deadline=None, derandomize=True, database=None)
@given(st.lists(broken_element(), min_size=1, max_size=8))
def test_ingest_counts_every_record_once(elements):
    data = b'{"@type": "DataFeed", "dataFeedElement": [' + b", ".join(e for e, _, _ in elements) + b"]}"
    with mock.patch.object(feed_text, "MAX_RECORD_CHARS", CAP_CHARS):
        good, bad, stats = ingest([("datafeed", "fuzz.json", io.BytesIO(data))], None)
    dropped = sum(stats.drops.values())  # duplicates merged, claims dated after their review
    assert stats.rows_in == len(elements) == len(good) + len(bad) + dropped


# ---- the config loader ----------------------------------------------------------------------------------------------

KNOWN = {"stages": sorted(OWNER), "web": ["mode", "warc_paths", "archive_dir"],
         "llm": ["cache_path", "timeout_s", "parallel_claims"], "store": ["root", "kind"]}
VALUES = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False)
                      | st.text(max_size=12), lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=6)


@st.composite
def config_text(draw) -> str:
    raw: dict = {"data_dir": draw(st.sampled_from([".veritas", "data", 5, None, ["x"]]))}
    for section, keys in KNOWN.items():
        if draw(st.booleans()):
            continue
        body = {}
        for _ in range(draw(st.integers(0, 3))):
            key = draw(st.sampled_from(keys))
            if draw(st.booleans()):  # a typo: a letter dropped, doubled or swapped
                i = draw(st.integers(0, len(key) - 1))
                key = draw(st.sampled_from([key[:i] + key[i + 1:], key[:i] + key[i] + key[i:],
                                            key[:i] + key[i + 1:i + 2] + key[i:i + 1] + key[i + 2:]]))
            body[key] = draw(VALUES)
        raw[section] = draw(st.sampled_from([body, body, 5, "text", [body]]))
    if draw(st.booleans()):
        raw["sources"] = draw(st.sampled_from([[{"kind": "datafeed", "path": "feed.json"}], [{"pth": "x"}], "x", [5]]))
    text = yaml.safe_dump(raw, sort_keys=False)
    if draw(st.booleans()):  # the file edited by hand: a character inserted, cut or replaced somewhere
        i = draw(st.integers(0, len(text)))
        text = text[:i] + draw(st.sampled_from(["", ":", "[", "{", "\t", "'", "- ", "\n  "])) + text[i + 1:]
    return text


@BUDGET
@given(config_text())
def test_a_config_loads_or_raises_config_error_naming_the_file(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("cfg") / "veritas.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        config = load_config(path)
    except ConfigError as err:
        assert str(err).startswith(f"{path}:") and "\n" not in str(err)
        return
    assert stage_settings(config["stages"])  # what loads is what the run builds its resources from


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(st.sampled_from(sorted(OWNER)).filter(lambda k: len(k) > 6 and k != "sources"),
       st.integers(0, 100))
def test_a_typo_of_a_stage_key_is_named_with_the_key_meant(tmp_path_factory, key, where):
    i = where % len(key)
    typo = key[:i] + key[i + 1:]  # a letter dropped
    if typo in OWNER:
        return
    path = tmp_path_factory.mktemp("cfg") / "veritas.yaml"
    path.write_text(f"stages:\n  {typo}: 1\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert f"{path}:2: stages.{typo}: unknown key; did you mean " in str(err.value)
