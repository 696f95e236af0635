"""Stage 1 as two assets: ``review_snapshot`` (not partitioned) parses each version of the configured sources once
into a quarter-partitioned Parquet dataset, and ``reviews`` gives each quarter its own slice of it."""


import dagster as dg
import polars as pl

from assets.ingestion.cleaning import STAGE
from assets.ingestion.merging import merge_sources
from assets.ingestion.publishers import host_of, mix_metadata, registered_domain
from assets.ingestion.snapshot import (
    fingerprint,
    has_snapshot,
    latest,
    manifest_of,
    point_latest,
    read_quarter,
    write_snapshot,
)
from assets.ingestion.sources import check_unchanged, load_sources
from assets.stage.tables import finish_quarter
from assets.stage.wiring import each_quarter, stage_asset
from dagster_project.resources.store import StoreResource
from dagster_project.resources.web import WebResource
from dagster_project.stage_settings import IngestionSettings
from schemas.frames import validate_frame
from schemas.records import Review


def configured(ingestion: IngestionSettings) -> list[dict]:
    """The sources as configured: a snapshot serves the quarters only while they stay so."""
    return [spec.model_dump() for spec in ingestion.sources]


def site_of(url: str) -> str:
    host = host_of(url)
    return registered_domain(host) if host else ""


def sites_of(urls: pl.Series) -> list[str]:
    """``site_of`` of every URL, worked out once per distinct ``scheme://host`` part: urlsplit finds the host there
    alone (a URL holding whitespace or control characters, which urlsplit edits, is taken whole)."""
    key = (pl.when(pl.col("url").str.contains(r"[\x00-\x20\x7f]")).then(pl.col("url"))
           .otherwise(pl.coalesce(pl.col("url").str.extract(r"^([A-Za-z][A-Za-z0-9+.-]*://[^/?#]*)"), pl.col("url"))))
    keys = urls.to_frame("url").select(key).to_series()
    found = {k: site_of(k) for k in keys.unique().to_list()}
    return keys.replace_strict(found, return_dtype=pl.Utf8).to_list()


@dg.asset(
    group_name="ingestion",
    kinds={"python", "parquet"},
    description="Stage 1, once per version of the sources: every configured source parsed, cleaned and merged into "
    "a quarter-partitioned Parquet dataset keyed by the sources' content fingerprint (an unchanged feed is not parsed).",
)
def review_snapshot(
    context: dg.AssetExecutionContext, ingestion: IngestionSettings, store: StoreResource, web: WebResource
) -> dg.MaterializeResult:
    if not ingestion.sources:
        raise dg.Failure("no ClaimReview sources configured (config file: sources:)")
    payloads, source_status = load_sources(ingestion.sources, web, store.base / "sources")
    fp, parts = fingerprint(payloads)
    merged = None if has_snapshot(store, fp) else merge_sources(payloads)
    if merged is not None:
        check_unchanged(payloads)  # the snapshot is labelled with the digests: it must hold what they name
    parsed = merged is not None
    manifest = write_snapshot(store, fp, merged, parts) if parsed else manifest_of(store, fp)
    # per source parsed: in how many byte ranges (processes) it was read, and in how many seconds
    reads = {"reads": dg.MetadataValue.json(merged.reads),
             "feed_ranges": max(r["ranges"] for r in merged.reads)} if parsed and merged.reads else {}
    point_latest(store, fp, configured(ingestion))
    context.log.info(f"review_snapshot {fp}: {'parsed' if parsed else 'unchanged, not parsed'}, "
                     f"{manifest['reviews']} reviews in {len(manifest['quarters'])} quarters")
    return dg.MaterializeResult(
        metadata={"fingerprint": fp, "parsed": parsed, "reviews": manifest["reviews"], "rejects": manifest["rejects"],
                  "quarters": dg.MetadataValue.json(manifest["quarters"]),
                  "sources": dg.MetadataValue.json(source_status),  # new / changed / unchanged per feed URL
                  **reads},
        data_version=dg.DataVersion(fp),
    )


@stage_asset(
    "ingestion",
    "Stage 1: ClaimReview records of the quarter from every configured source, merged and cleaned "
    "(the quarter's slice of review_snapshot).",
    deps=("review_snapshot",),
)
def reviews(
    context: dg.AssetExecutionContext, ingestion: IngestionSettings, store: StoreResource
) -> dg.MaterializeResult:
    pointer = latest(store)
    if pointer is None or pointer["configured"] != configured(ingestion):
        raise dg.Failure("the configured sources have no review_snapshot yet: materialize review_snapshot first "
                         "(veritas run and veritas backfill include it)")

    def one(quarter: str) -> dict:
        frame, bad, stats = read_quarter(store, pointer["fingerprint"], quarter)
        table, invalid = validate_frame(frame, Review, STAGE, quarter)
        stats.extra["snapshot"] = pointer["fingerprint"]
        stats.extra.update(mix_metadata(table, sites_of(table["review_url"])))
        return finish_quarter(context, store, STAGE, quarter, table, Review, stats, bad + invalid)

    return each_quarter(context, one)
