"""The local store: versioned Parquet per quarter, LATEST pointers, typed empty tables, input-boundary quarantine."""

from datetime import date

import polars as pl
import pytest

from assets.stage.tables import load_upstream
from dagster_project.partitions import (
    quarter_bounds,
    quarter_of,
    quarter_range,
    to_key,
    to_label,
)
from dagster_project.resources.store import StoreResource
from schemas.frames import polars_schema, to_frame
from schemas.records import Review, ScoredClaim


def review(i: int, text: str = "Masks cause oxygen deprivation") -> Review:
    return Review(review_id=f"r{i}", review_url=f"https://fullfact.org/{i}", claim_text=text,
                  claim_date=date(2020, 5, i), quarter="2020Q2", appearance_urls=["https://x.com/a/status/1"],
                  sources=[f"feed:test#{i}"])


def test_versions_are_kept_and_latest_moves(tmp_path):
    store = StoreResource(root=str(tmp_path))
    v1 = store.write_table("reviews", "2020Q2", to_frame([review(1)], Review))
    v2 = store.write_table("reviews", "2020Q2", to_frame([review(1), review(2)], Review))
    assert store.versions("reviews", "2020Q2") == sorted([v1, v2])
    assert store.latest_version("reviews", "2020Q2") == v2
    assert store.read_table("reviews", "2020Q2").height == 2
    assert store.read_table("reviews", "2020Q2", version=v1).height == 1
    assert not list(tmp_path.rglob(".tmp-*"))
    with pytest.raises(FileNotFoundError, match="materialize reviews for 2020Q3 first"):
        store.read_table("reviews", "2020Q3")


def test_empty_tables_keep_their_nested_schema(tmp_path):
    df = to_frame([], ScoredClaim)
    assert df.height == 0 and df.schema == polars_schema(ScoredClaim)
    assert isinstance(df.schema["media"], pl.List) and isinstance(df.schema["integrity"], pl.Struct)
    store = StoreResource(root=str(tmp_path))
    store.write_table("scored_claims", "2020Q2", df)
    assert store.read_table("scored_claims", "2020Q2").schema == df.schema


def test_invalid_upstream_rows_are_quarantined_not_lost(tmp_path):
    store = StoreResource(root=str(tmp_path))
    good = to_frame([review(1), review(2)], Review)
    broken = good.with_columns(pl.when(pl.col("review_id") == "r2").then(pl.lit("")).otherwise(pl.col("claim_text")).alias("claim_text"))
    store.write_table("reviews", "2020Q2", broken)
    quarantine: list = []
    rows = load_upstream(store, "reviews", "2020Q2", Review, quarantine)
    assert [r.review_id for r in rows] == ["r1"]
    assert [(q.stage, q.reason) for q in quarantine] == [("input:reviews", "invalid:claim_text:string_too_short")]
    assert '"review_id": "r2"' in quarantine[0].record
    with pytest.raises(ValueError, match="1 rows of reviews 2020Q2 fail validation"):
        load_upstream(store, "reviews", "2020Q2", Review)


@pytest.mark.parametrize("value,label,key", [
    ("2025Q4", "2025Q4", "2025-10"), ("2025-q4", "2025Q4", "2025-10"), ("2025-10", "2025Q4", "2025-10"),
    ("2025-10-01", "2025Q4", "2025-10"), ("2016-01", "2016Q1", "2016-01"), ("2026 Q2", "2026Q2", "2026-04"),
])
def test_quarter_labels_and_keys(value, label, key):
    assert to_label(value) == label and to_key(value) == key


@pytest.mark.parametrize("bad", ["2025Q5", "2025-11", "2025-02-01", "Q4 2025", ""])
def test_bad_quarters_are_refused(bad):
    with pytest.raises(ValueError, match="not a quarter"):
        to_label(bad)


def test_quarter_helpers():
    assert quarter_of(date(2020, 6, 30)) == "2020Q2" and quarter_of(date(2020, 7, 1)) == "2020Q3"
    assert quarter_bounds("2024Q1") == (date(2024, 1, 1), date(2024, 3, 31))
    assert quarter_range("2025Q3", "2026Q2") == ["2025Q3", "2025Q4", "2026Q1", "2026Q2"]
