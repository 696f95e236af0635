"""Issue 36: a large local DataFeed is read in byte ranges on every core (``assets.ingestion.feed_ranges``), and what
comes out is what one reader gives: the same frames and the same rejects, record for record, wherever the ranges are
cut. The feed is made of the real ClaimReviews of tests/fixtures (Fact Check Tools answers in Arabic, IFCN rows) with
the breakage stage 1 quarantines (a byte that is not UTF-8, a record that does not parse, one nested too deep, an
element without items), elements of two items, and a string that holds ``}, {"item": ...`` as text."""

import json

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from assets.ingestion import feed_ranges
from assets.ingestion.cleaning import collect_frames
from assets.ingestion.feed_ranges import collect_sources, element_starts, read_ranges
from assets.ingestion.languages import detect_language
from assets.ingestion.merging import chunks_aligned, merge_sources
from assets.ingestion.sources import MAX_RECORD_DEPTH
from tests.ingest_shapes import FIXTURES, real_claimreviews

BATCH = 7  # several frames per range


@pytest.fixture(scope="module")
def real_items() -> list[dict]:
    return real_claimreviews()


def _element(*items) -> bytes:
    return json.dumps({"@type": "DataFeedItem", "item": list(items)}, ensure_ascii=False).encode("utf-8")


def hostile_elements(items: list[dict]) -> list[bytes]:
    """The real items one or two to an element, with every kind of breakage in the second half of the file."""
    out = [_element(it) if i % 5 else _element(it, items[(i + 1) % len(items)]) for i, it in enumerate(items)]
    fake = dict(items[3], name='a title that holds }, {"item": [{"url": "x"}]}, { as text')
    out[80] = _element(fake)
    text = items[90]["claimReviewed"].encode("utf-8")
    out[90] = out[90].replace(text, text[:1] + b"\xff" + text[1:], 1)  # a byte that is not UTF-8
    out[100] = out[100].replace(b'"item": [', b'"item": [,', 1)  # does not parse
    out[110] = b'{"item": [' + b"[" * (MAX_RECORD_DEPTH + 5) + b"]" * (MAX_RECORD_DEPTH + 5) + b"]}"
    out[120] = b'{"@type": "DataFeedItem", "url": "https://example.org/no-items"}'
    return out


HEAD = b'\xef\xbb\xbf{"@type": "DataFeed", "dataFeedElement": [\r\n  '
GAP = b",\r\n  "
ELEMENT = b'{"@type": "DataFeedItem"'


def feed_bytes(elements: list[bytes]) -> bytes:
    return HEAD + GAP.join(elements) + b"]}"


def element_offsets(elements: list[bytes]) -> set[int]:
    offsets, at = set(), len(HEAD)
    for element in elements:
        offsets.add(at)
        at += len(element) + len(GAP)
    return offsets


def serial(path) -> tuple[pl.DataFrame, pl.DataFrame]:
    frames, rejects = collect_frames([("datafeed", "feed.json", str(path))], BATCH)
    return pl.concat(frames), rejects


def assert_same(path, starts: list[int], processes: bool = False, expected=None) -> list[int]:
    frames, rejects, records, used, _languages = read_ranges(path, "feed.json", starts, 0, BATCH,
                                                             processes=processes)
    whole, whole_rejects = expected or serial(path)
    assert_frame_equal(pl.concat(frames), whole)
    assert_frame_equal(rejects, whole_rejects)
    assert records == whole.height + whole_rejects.height
    return used


@pytest.fixture(scope="module")
def hostile_feed(real_items, tmp_path_factory):
    path = tmp_path_factory.mktemp("ranges") / "feed.json"
    path.write_bytes(feed_bytes(hostile_elements(real_items)))
    return path


def test_the_hostile_feed_holds_every_breakage(hostile_feed):
    reasons = set(serial(hostile_feed)[1]["reason"].to_list())
    assert {"invalid_utf8", "malformed_record_json", "record_too_deep", "element_without_items"} <= reasons


def test_every_cut_gives_what_one_reader_gives(real_items, hostile_feed):
    """A range may start at any byte: at an element (used), inside one, between two items, inside a string or a
    UTF-8 letter (not used: the range before reads on)."""
    data = hostile_feed.read_bytes()
    elements = element_offsets(hostile_elements(real_items))
    in_string = data.index(b'{\\"item\\": [{\\"url')  # escaped quotes: text in a string
    cuts = set(range(60, len(data) - 1, 1999)) | set(sorted(elements)[1::7]) | {in_string, in_string + 24}
    expected = serial(hostile_feed)
    outcomes = {cut: assert_same(hostile_feed, [cut], expected=expected) for cut in sorted(cuts)}
    assert {cut for cut, used in outcomes.items() if used == [0, 1]} == cuts & elements
    assert len(cuts & elements) > 20 and len(cuts - elements) > 60


def test_the_ranges_renumber_the_elements_a_rejected_record_names(hostile_feed):
    data = hostile_feed.read_bytes()
    cut = data.index(ELEMENT, len(data) // 2)  # before the broken elements, which are numbered 100 and 110
    frames, rejects, _records, used, _languages = read_ranges(hostile_feed, "feed.json", [cut], 0, BATCH,
                                                              processes=False)
    assert used == [0, 1]
    named = [json.loads(r) for r in rejects.filter(pl.col("_ref"))["record"].to_list()]
    assert {r["element"] for r in named} == {100, 110}  # the file's own numbers, not the range's
    assert any(s.endswith("#152.0") for s in pl.concat(frames)["sources"].explode().to_list())


def test_three_ranges_in_processes_with_a_bad_cut(hostile_feed):
    data = hostile_feed.read_bytes()
    good = data.index(ELEMENT, 2 * len(data) // 3)
    bad = data.index(b"claimReviewed", len(data) // 3)  # inside an element: the first range reads on to ``good``
    assert assert_same(hostile_feed, [bad, good], processes=True) == [0, 2]


def test_a_feed_cut_short_is_renumbered_too(real_items, tmp_path):
    data = feed_bytes(hostile_elements(real_items))
    path = tmp_path / "cut.json"
    path.write_bytes(data[: len(data) - 300])  # ends inside the last element
    cut = data.index(ELEMENT, len(data) // 2)
    assert assert_same(path, [cut]) == [0, 1]
    ends = serial(path)[1].filter(pl.col("reason") == "truncated_feed")["record"].to_list()
    assert [json.loads(r)["elements_read"] for r in ends] == [len(real_items) - 1]


def test_element_starts_skip_the_gaps_between_items(real_items, tmp_path):
    elements = [_element(it, it, it) for it in real_items]  # three items each: most gaps are between items
    path = tmp_path / "feed.json"
    path.write_bytes(feed_bytes(elements))
    data = path.read_bytes()
    starts = element_starts(path, 4)
    assert len(starts) == 3 and starts == sorted(starts)
    assert set(starts) <= element_offsets(elements)
    assert assert_same(path, starts) == [0, 1, 2, 3]


def test_collect_sources_numbers_on_across_sources(real_items, tmp_path, monkeypatch):
    """A feed read in ranges between two other sources: the reading order runs on as if one reader read all."""
    path = tmp_path / "feed.json"
    path.write_bytes(feed_bytes(hostile_elements(real_items)))
    claims = json.loads((FIXTURES / "gfc_claims_search_ar_excerpt.json").read_text(encoding="utf-8"))
    sources = [("factcheck_api", "api-1", claims), ("datafeed", "feed.json", str(path)),
               ("factcheck_api", "api-2", claims)]
    monkeypatch.setattr(feed_ranges, "RANGE_MIN_BYTES", path.stat().st_size // 3)
    frames, rejects, languages, reads = collect_sources(sources, BATCH, workers=2)
    whole, whole_rejects = collect_frames(sources, BATCH)
    assert_frame_equal(pl.concat(frames), pl.concat(whole))
    assert_frame_equal(rejects, whole_rejects.drop("_ref"))
    assert languages and all(detect_language(text) == language for text, language in languages.items())
    assert [(r["origin"], r["ranges"]) for r in reads] == [("api-1", 1), ("feed.json", 2), ("api-2", 1)]


def test_the_merged_reviews_are_those_of_one_reader(hostile_feed, monkeypatch):
    """Through the merge: the same reviews, languages detected the same way, the same rejects and counts."""
    sources = [("datafeed", "feed.json", str(hostile_feed))]
    monkeypatch.setattr(feed_ranges, "RANGE_MIN_BYTES", 1 << 40)
    one = merge_sources(sources)
    monkeypatch.setattr(feed_ranges, "RANGE_MIN_BYTES", hostile_feed.stat().st_size // 2)
    monkeypatch.setattr(feed_ranges, "range_count", lambda path, workers=None: 2)
    ranged = merge_sources(sources)
    assert one.rows["language_detected"].sum() > 50
    assert_frame_equal(ranged.reviews.collect(), one.reviews.collect())
    assert_frame_equal(ranged.rejects, one.rejects)
    assert_frame_equal(ranged.counts, one.counts)
    assert [r["ranges"] for r in one.reads] == [1] and [r["ranges"] for r in ranged.reads] == [2]


def test_the_merged_rows_keep_the_ranges_chunks_in_every_column(hostile_feed, monkeypatch):
    """The merge works on the ranges' frames as they come, chunk by chunk: every column of its result is cut at the
    same rows (``chunks_aligned``), so that selecting and filtering it later copies no column whole. The cut columns
    hold the values of one chunk."""
    monkeypatch.setattr(feed_ranges, "RANGE_MIN_BYTES", hostile_feed.stat().st_size // 2)
    monkeypatch.setattr(feed_ranges, "range_count", lambda path, workers=None: 2)
    rows = merge_sources([("datafeed", "feed.json", str(hostile_feed))], batch=BATCH).rows
    lengths = {tuple(column.chunk_lengths()) for column in rows.iter_columns()}
    assert len(lengths) == 1 and len(next(iter(lengths))) > 10  # several frames per range, every column alike
    whole = rows.rechunk()
    mixed = pl.concat([whole.head(30), whole.slice(30)], rechunk=False).with_columns(pl.col("quarter").rechunk())
    assert {len(column.chunk_lengths()) for column in mixed.iter_columns()} == {1, 2}
    again = chunks_aligned(mixed)
    assert {tuple(column.chunk_lengths()) for column in again.iter_columns()} == {(30, rows.height - 30)}
    assert_frame_equal(again, rows)
