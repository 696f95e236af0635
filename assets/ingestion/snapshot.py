"""The parsed form of one version of the configured sources: every quarter's merged reviews as a hive-partitioned
Parquet dataset (``reviews/quarter=2025Q4/part-0.parquet``), the rejected records and the merge's counts, kept under
``snapshots/reviews/<fingerprint>/`` in the store. The fingerprint is the sha256 of the sources' contents (and of
``SNAPSHOT_FORMAT``), so a feed version is parsed once, and a quarter reads its own slice without touching the rest.

``manifest.json`` is written last: a snapshot without it is incomplete and is never read.
"""

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import polars as pl

from assets.ingestion.cleaning import REVIEW_SCHEMA
from assets.ingestion.merging import Merged, quarter_slice
from assets.ingestion.sources import source_digest
from assets.stage.tables import StageYield
from dagster_project.core.atomic_files import TMP_PREFIX, atomic_write
from dagster_project.resources.store import StoreResource
from schemas.records import QuarantineRecord

SNAPSHOT_FORMAT = 2  # bump when a cleaning or merging rule changes what a feed version gives
ROOT = "snapshots/reviews"
LATEST = f"{ROOT}/LATEST.json"  # the snapshot of the sources as last configured, and what they were


def fingerprint(payloads: list[tuple[str, str, Any]]) -> tuple[str, list[dict]]:
    """(fingerprint, per source: kind, origin, sha256) of the loaded sources; nothing is parsed."""
    parts = [{"kind": kind, "origin": origin, "sha256": source_digest(kind, payload)} for kind, origin, payload in payloads]
    text = json.dumps({"format": SNAPSHOT_FORMAT, "sources": parts}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32], parts


def _local(store: StoreResource, fp: str) -> Path:
    return store.base / ROOT / fp


def has_snapshot(store: StoreResource, fp: str) -> bool:
    return (_local(store, fp) / "manifest.json").exists() or (store.is_s3 and store.exists(f"{ROOT}/{fp}/manifest.json"))


def write_snapshot(store: StoreResource, fp: str, merged: Merged, sources: list[dict]) -> dict:
    """Write the merged whole as the snapshot ``fp`` (built beside it, renamed into place); returns the manifest."""
    final = _local(store, fp)
    tmp = final.with_name(f"{TMP_PREFIX}{os.getpid()}-{fp}")
    shutil.rmtree(tmp, ignore_errors=True)
    quarters: dict[str, int] = {}
    # one quarter's copy at a time (partition_by would copy them all at once: twice the feed in memory)
    found = merged.reviews.select(pl.col("quarter").unique(maintain_order=True)).collect()
    for quarter in found.to_series().to_list():
        part = merged.reviews.filter(pl.col("quarter") == quarter).drop("quarter").collect()
        folder = tmp / "reviews" / f"quarter={quarter}"
        folder.mkdir(parents=True)
        part.write_parquet(folder / "part-0.parquet", compression="zstd", statistics=True)
        quarters[quarter] = part.height
        del part
    tmp.mkdir(parents=True, exist_ok=True)
    merged.rejects.write_parquet(tmp / "rejects.parquet", compression="zstd", statistics=True)
    merged.counts.write_parquet(tmp / "counts.parquet", statistics=True)
    manifest = {"fingerprint": fp, "format": SNAPSHOT_FORMAT, "sources": sources, "reviews": sum(quarters.values()),
                "rejects": merged.rejects.height, "quarters": dict(sorted(quarters.items()))}
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
    try:
        os.rename(tmp, final)
    except OSError:  # another run wrote the same version meanwhile: its copy is as good
        shutil.rmtree(tmp, ignore_errors=True)
    if store.is_s3:  # the data files first, the manifest that vouches for them last
        store.push_dir(final, f"{ROOT}/{fp}", suffixes=(".parquet",))
        store.put_file(final / "manifest.json", f"{ROOT}/{fp}/manifest.json", "application/json")
    return manifest


def manifest_of(store: StoreResource, fp: str) -> dict:
    local = _local(store, fp) / "manifest.json"
    if store.is_s3 and not local.exists():
        store.get_file(f"{ROOT}/{fp}/manifest.json", local)
    return json.loads(local.read_text())


def point_latest(store: StoreResource, fp: str, configured: list[dict]) -> None:
    payload = json.dumps({"fingerprint": fp, "configured": configured}, sort_keys=True).encode()
    if store.is_s3:
        store.put_bytes(LATEST, payload, "application/json")
    else:
        atomic_write(store.base / LATEST, payload)


def latest(store: StoreResource) -> dict | None:
    try:
        return json.loads(store.get_bytes(LATEST))
    except FileNotFoundError:
        return None


def read_quarter(store: StoreResource, fp: str, quarter: str) -> tuple[pl.DataFrame, list[QuarantineRecord], StageYield]:
    """One quarter's reviews, quarantine and yield from snapshot ``fp``; the filters are pushed down to the files
    (hive partitions for the reviews, row-group statistics for the rest)."""
    local = _local(store, fp)
    if store.is_s3:  # this host may lack the copy: fetch only the slice it reads
        for name in ("rejects.parquet", "counts.parquet"):
            if not (local / name).exists():
                store.get_file(f"{ROOT}/{fp}/{name}", local / name)
        store.pull_dir(f"{ROOT}/{fp}/reviews/quarter={quarter}", local / "reviews" / f"quarter={quarter}")
    if not (local / "counts.parquet").exists():
        raise FileNotFoundError(f"snapshot {fp} is missing from {store.location}: materialize review_snapshot")
    if any((local / "reviews").glob("quarter=*/*.parquet")):
        reviews = pl.scan_parquet(local / "reviews" / "**" / "*.parquet", hive_partitioning=True,
                                  hive_schema={"quarter": pl.Utf8})
    else:
        reviews = pl.LazyFrame(schema=REVIEW_SCHEMA)
    rejects = pl.scan_parquet(local / "rejects.parquet")
    counts = pl.scan_parquet(local / "counts.parquet")
    return quarter_slice(reviews, rejects, counts, quarter)
