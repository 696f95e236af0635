"""Stage 1-2 validate their tables as frames (``validate_frame``): the same valid rows and the same quarantine, with
the same reasons, as the row-by-row pydantic path (``validate_rows`` then ``to_frame``) they replace."""

from datetime import date

import polars as pl
import pytest

from assets.ingestion.cleaning import REJECT_SCHEMA
from assets.ingestion.merging import Merged
from assets.ingestion.snapshot import read_quarter, write_snapshot
from assets.stage.tables import load_upstream, load_upstream_frame
from dagster_project.resources.store import StoreResource
from schemas.frames import polars_schema, to_frame, validate_frame, validate_rows
from schemas.records import QuarantineRecord, Review, TrustedReview

GOOD = dict(review_id="r0", review_url="https://fullfact.org/online/x/", claim_text="A claim", claim_date=date(2020, 4, 2),
            review_date=None, quarter="2020Q2", publisher_name="Full Fact", publisher_site="fullfact.org",
            rating_text="False", rating_value="", rating_best="", rating_worst="", language="en",
            language_detected=False, claim_author="", title="", appearance_urls=["https://x.com/p/1"],
            sources=["feed:f.json#0"])
# (changes to a good row, the reason the row-by-row path gives), in the order of the frame below
BAD = [
    ({"review_url": "ftp://fullfact.org/x"}, "invalid:review_url:value_error"),
    ({"review_url": "HTTPS://fullfact.org/x"}, "invalid:review_url:value_error"),
    ({"claim_text": ""}, "invalid:claim_text:string_too_short"),
    ({"claim_text": "é" * 5001}, "invalid:claim_text:string_too_long"),
    ({"publisher_name": None}, "invalid:publisher_name:string_type"),
    ({"appearance_urls": ["https://x.com/p/1", None]}, "invalid:appearance_urls.1:string_type"),
    ({"sources": None}, "invalid:sources:list_type"),
    ({"language_detected": None}, "invalid:language_detected:bool_type"),
    ({"review_url": None, "claim_text": ""}, "invalid:review_url:string_type"),  # the first field's error words it
    ({"quarter": None}, "invalid:quarter:string_type"),
]
# rows the column checks look at twice but pydantic accepts: kept as they are
EDGE = [{"claim_text": "é" * 5000}, {"claim_date": None, "review_date": date(2020, 5, 1)}, {"appearance_urls": []},
        {"review_url": "http://x.org"}]


def _frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=polars_schema(Review), orient="row")


def _rows() -> list[dict]:
    out = []
    for i, (change, _reason) in enumerate(BAD):
        out += [{**GOOD, "review_id": f"good{i}"}, {**GOOD, "review_id": f"bad{i}", **change}]
    return out + [{**GOOD, "review_id": f"edge{i}", **change} for i, change in enumerate(EDGE)]


def _row_path(df: pl.DataFrame, model=Review) -> tuple[pl.DataFrame, list[QuarantineRecord]]:
    good, bad = validate_rows(df.iter_rows(named=True), model, "reviews", "2020Q2")
    return to_frame(good, model), bad


def test_bad_rows_keep_their_reasons_and_good_rows_their_values():
    df = _frame(_rows())
    table, bad = validate_frame(df, Review, "reviews", "2020Q2")
    assert [(q.reason, q.stage, q.quarter) for q in bad] == [(reason, "reviews", "2020Q2") for _c, reason in BAD]
    assert [q.record[:40] for q in bad][:1] == ['{"review_id": "bad0", "review_url": "ftp']
    expected_table, expected_bad = _row_path(df)
    assert bad == expected_bad
    assert table.schema == expected_table.schema
    assert table.equals(expected_table, null_equal=True)
    assert table["review_id"].to_list() == [f"good{i}" for i in range(len(BAD))] + [f"edge{i}" for i in range(len(EDGE))]


def test_clean_frame_is_kept_whole():
    df = _frame([{**GOOD, "review_id": f"r{i}"} for i in range(5)])
    table, bad = validate_frame(df, Review, "reviews", "2020Q2")
    assert bad == []
    assert table.equals(df)


@pytest.mark.parametrize("change", [
    lambda df: df.with_columns(pl.col("claim_date").cast(pl.Utf8)),  # a column of another dtype
    lambda df: df.drop("title"),  # a column the model gives a default
    lambda df: df.drop("quarter"),  # a required column
])
def test_frames_the_columns_cannot_vouch_for_go_row_by_row(change):
    df = change(_frame(_rows()))
    table, bad = validate_frame(df, Review, "reviews", "2020Q2")
    expected_table, expected_bad = _row_path(df)
    assert bad == expected_bad
    assert table.equals(expected_table, null_equal=True)


def test_bad_row_in_a_snapshot_is_quarantined_by_reviews_as_before(tmp_path):
    """The reviews asset's path: a quarter read from a snapshot, validated as a frame."""
    store = StoreResource(root=str(tmp_path))
    rows = [r for r in _rows() if r["quarter"] is not None]  # the quarter names the snapshot's partition
    merged = Merged(rows=_frame(rows).with_columns(_keep=True), rejects=pl.DataFrame(schema=REJECT_SCHEMA),
                    counts=pl.DataFrame({"quarter": ["2020Q2"], "rows_in": [len(rows)], "late": [0], "duplicate": [0]}))
    write_snapshot(store, "f" * 32, merged, [])
    frame, _quarantined, _stats = read_quarter(store, "f" * 32, "2020Q2")
    table, bad = validate_frame(frame, Review, "reviews", "2020Q2")
    expected_table, expected_bad = _row_path(frame)
    assert [q.reason for q in bad] == [reason for change, reason in BAD if "quarter" not in change]
    assert bad == expected_bad and table.equals(expected_table, null_equal=True)


def test_trusted_reviews_input_boundary_as_before(tmp_path):
    """trusted_reviews reads its upstream as a frame: the same rows and the same input quarantine as the records."""
    store = StoreResource(root=str(tmp_path))
    store.write_table("reviews", "2020Q2", _frame(_rows()))
    bad_frame, bad_records = [], []
    table = load_upstream_frame(store, "reviews", "2020Q2", Review, bad_frame)
    records = load_upstream(store, "reviews", "2020Q2", Review, bad_records)
    assert bad_frame == bad_records
    assert [q.stage for q in bad_frame] == ["input:reviews"] * len(BAD)
    assert table.equals(to_frame(records, Review), null_equal=True)
    with pytest.raises(ValueError, match="10 rows of reviews 2020Q2 fail validation, first: invalid:review_url:value_error"):
        load_upstream_frame(store, "reviews", "2020Q2", Review)


def test_a_subclass_keeps_the_inherited_validator():
    trusted = {**GOOD, "publisher_id": "fullfact", "publisher_country": "GB"}
    rows = [trusted, {**trusted, "review_url": "ftp://x"}, {**trusted, "publisher_id": None}]
    df = pl.DataFrame(rows, schema=polars_schema(TrustedReview), orient="row")
    table, bad = validate_frame(df, TrustedReview, "trusted_reviews", "2020Q2")
    assert [q.reason for q in bad] == ["invalid:review_url:value_error", "invalid:publisher_id:string_type"]
    assert table.equals(_row_path(df, TrustedReview)[0])
