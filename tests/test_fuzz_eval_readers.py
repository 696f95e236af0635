"""Property-based tests (hypothesis, issue 35) of the two readers `veritas evaluate` and the leaderboard trust: the
predictions reader and the release reader. On any input: no exception escapes but the project's own (ValueError,
FileNotFoundError); every record comes out as a prediction or as an error; memory stays bounded by the size cap on
nested and oversized input. A fixed budget, derandomized: the same examples on every run, a few seconds each."""

import json
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from assets.evaluation.prediction_files import parse_predictions, read_predictions
from assets.evaluation.predictions import load_release

BUDGET = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
OURS = (ValueError, FileNotFoundError)

scalars = (st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False, allow_infinity=False)
           | st.text(max_size=8) | st.sampled_from(["1", "１", "٣", "1.9", "2025Q3", "2025Q9", "", "-1", "0.5"]))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=12)
scores = (st.none() | st.floats(-1.5, 1.5) | st.integers(-2, 2) | st.booleans()
          | st.builds(lambda x: {"score": x}, scalars))
ids = st.integers(-1, 6) | scalars
media = st.none() | scalars | st.lists(st.fixed_dictionaries({}, optional={"id": ids, "authenticity": scores,
                                                                            "contextualization": scores}), max_size=3)
predictions = st.fixed_dictionaries({}, optional={
    "claim_id": ids, "id": ids, "integrity": scores, "veracity": scores, "context_coverage": scores,
    "media": media, "quarter": st.sampled_from(["2025Q3", "2025-07", "2025Q9", "", "Q3"]) | scalars,
    "system": st.sampled_from(["a", "b"]) | scalars, "justification": scalars})
records = st.lists(predictions | json_values, max_size=12)
layouts = st.sampled_from(["list", "lines", "wrapper"])


def write(path: Path, items: list, layout: str) -> None:
    if layout == "lines":
        path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in items))
    else:
        path.write_text(json.dumps(items if layout == "list" else {"system": "s", "predictions": items}))


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@BUDGET
@given(items=records, layout=layouts)
def test_predictions_reader_raises_only_its_own_errors_and_counts_every_record(folder, items, layout):
    # JSON Lines of one line holding a list or a wrapper are the very bytes of that whole-file document, which the
    # reader reads as the document it is (its records, not one line): that case is the other layouts'
    assume(not (layout == "lines" and len(items) == 1 and (
        isinstance(items[0], list) or isinstance(items[0], dict) and ("predictions" in items[0] or "claims" in items[0]))))
    path = folder / "preds.json"
    write(path, items, layout)
    try:
        out, errors = parse_predictions(path, "2025Q3", "s")
    except OURS as err:
        assert str(path) in str(err)  # a whole-file refusal names the file
        return
    assert len(out) + len(errors) == len(items)
    assert all(e.startswith(("line ", "record ")) and ": " in e for e in errors)
    keys = [(p.quarter, p.system, p.claim_id) for _, p in out]
    assert len(set(keys)) == len(keys)  # duplicates are errors, never silently kept
    try:
        strict = read_predictions(path, "2025Q3", "s")
    except OURS:
        assert errors
    else:
        assert not errors and strict == out


@BUDGET
@given(data=st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_predictions_reader_on_arbitrary_bytes(folder, data):
    path = folder / "bytes.json"
    path.write_bytes(data)
    try:
        out, errors = parse_predictions(path, "2025Q3", "s")
    except OURS:
        return
    assert all(p.integrity is None or -1 <= p.integrity <= 1 for _, p in out)


claims = st.fixed_dictionaries({
    "id": st.integers(0, 4) | scalars, "text": st.text(max_size=10) | scalars, "date": st.none() | st.just("2025-08-01"),
    "language": st.just("en") | scalars, "review_url": st.just("https://x.org"),
    "integrity": st.fixed_dictionaries({"score": st.floats(-1.2, 1.2) | scalars,
                                        "decisive_property": st.just("veracity")}) | scalars,
}, optional={"media": media, "veracity": st.none() | st.fixed_dictionaries({"score": st.floats(-1, 1)})})


@BUDGET
@given(payload=st.fixed_dictionaries({"claims": st.lists(claims | json_values, max_size=8)}) | json_values)
def test_release_reader_rejects_a_damaged_release_whole_and_raises_only_its_own_errors(folder, payload):
    release = folder / "release"
    release.mkdir(exist_ok=True)
    (release / "claims.json").write_text(json.dumps(payload))
    try:
        gold = load_release(release)
    except OURS as err:
        assert str(release / "claims.json") in str(err)
        return
    assert len(gold) == len(payload["claims"]) > 0  # every claim in, or the release refused
    assert len({c.id for c in gold}) == len(gold)


@pytest.mark.parametrize("body", [
    "[" * 200_000,  # 200 KB nested 200,000 deep: the feed drove a process to 23.5 GB
    '{"a":' * 100_000 + "1" + "}" * 100_000,
    "\n".join(['{"id": 1, "x": ' + "[" * 5_000 + "]" * 5_000 + "}"] * 40),
])
def test_nested_input_stays_within_memory(folder, body):
    for reader, path in ((lambda p: parse_predictions(p, "2025Q3"), folder / "nested.json"),
                         (load_release, folder / "nested-release")):
        target = path / "claims.json" if reader is load_release else path
        target.parent.mkdir(exist_ok=True)
        target.write_text(body)
        tracemalloc.start()
        try:
            reader(path)
        except OURS:
            pass
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        assert peak < 40 * len(body) + 8_000_000, (reader, peak)


def test_a_file_over_the_cap_is_refused_before_it_is_read(folder):
    path = folder / "big.jsonl"
    path.write_text("\n".join(json.dumps({"id": i, "integrity": 0.0}) for i in range(200_000)))  # ~6 MB
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="over the 1 MiB cap"):
            parse_predictions(path, "2025Q3", max_bytes=1024 * 1024)
        (folder / "big-release").mkdir(exist_ok=True)
        (folder / "big-release/claims.json").write_bytes(path.read_bytes())
        with pytest.raises(ValueError, match="over the 1 MiB cap"):
            load_release(folder / "big-release", max_bytes=1024 * 1024)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 7_000_000 + 1_000_000  # the test's own read of the file; the readers add nearly nothing
