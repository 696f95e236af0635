"""Data-quality checks: blocking ones stop a bad table or split; yield-band ones (WARN) flag a quarter whose yield slumps."""

import os

import dagster as dg
import polars as pl

from assets.release.validation import validate_release
from assets.rules.bins import bin3
from dagster_project.core.dagster_private import private
from dagster_project.core.instance_records import (
    latest_materialization,
    latest_materializations,
)
from dagster_project.partitions import quarterly_partitions, to_label
from dagster_project.resources.store import StoreResource
from dagster_project.stage_settings import ReleaseSettings

# a batched run names its first and last quarter in these tags (Dagster has no public name for them)
ASSET_PARTITION_RANGE_START_TAG = private("ASSET_PARTITION_RANGE_START_TAG")
ASSET_PARTITION_RANGE_END_TAG = private("ASSET_PARTITION_RANGE_END_TAG")
LABELS = ["intact", "unknown", "compromised"]
DECISIVE = ["context_coverage", "veracity", "contextualization"]


def _quarters(context: dg.AssetCheckExecutionContext) -> list[str]:
    """The quarters of the check's run: its partition, or the range a backfill run of a batched stage holds."""
    tags = context.run.tags
    if tags.get("dagster/partition"):
        return [to_label(tags["dagster/partition"])]
    start, end = tags.get(ASSET_PARTITION_RANGE_START_TAG), tags.get(ASSET_PARTITION_RANGE_END_TAG)
    if not (start and end):
        raise dg.Failure("this check runs on quarters: launch it with a partition")
    return [to_label(k) for k in quarterly_partitions.get_partition_keys_in_range(dg.PartitionKeyRange(start, end))]


def _quarter(context: dg.AssetCheckExecutionContext) -> str:
    (quarter,) = _quarters(context)
    return quarter


def per_quarter_result(results: dict[str, dg.AssetCheckResult]) -> dg.AssetCheckResult:
    """One quarter's result as it is; several quarters' (a batched backfill run) as one result that passes when all
    pass, each quarter's verdict and metadata under ``quarters`` (``veritas yields`` reads them per quarter)."""
    if len(results) == 1:
        return next(iter(results.values()))
    failed = [q for q, r in results.items() if not r.passed]
    quarters = {q: {**{k: v.value for k, v in r.metadata.items()}, "passed": r.passed} for q, r in results.items()}
    note = (f"{len(failed)} of {len(results)} quarters below the band: {', '.join(failed)}" if failed
            else f"all {len(results)} quarters within the band")
    return dg.AssetCheckResult(
        passed=not failed, severity=dg.AssetCheckSeverity.WARN,
        metadata={"quarters": dg.MetadataValue.json(quarters), "failed": dg.MetadataValue.json(failed), "note": note},
    )


def scored_table_problems(df: pl.DataFrame) -> list[str]:
    """Great Expectations over the scored claims: ranges, label sets, uniqueness, the bin of every score."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx  # imported here: it takes seconds
    from great_expectations.data_context.types.base import ProgressBarsConfig

    flat = df.select(
        "claim_id", "text",
        pl.col("integrity").struct.field("score").alias("score"),
        pl.col("integrity").struct.field("label").alias("label"),
        pl.col("integrity").struct.field("decisive_property").alias("decisive_property"),
        pl.col("media").list.len().alias("n_media"),
    ).to_pandas()
    flat["label_matches_score"] = [bin3(s) == label for s, label in zip(flat["score"], flat["label"])]
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)  # run logs, not terminal bars
    batch = (
        context.data_sources.add_pandas("veritas").add_dataframe_asset("scored_claims")
        .add_batch_definition_whole_dataframe("all").get_batch(batch_parameters={"dataframe": flat})
    )
    suite = context.suites.add(gx.ExpectationSuite(name="scored_claims"))
    expect = gx.expectations
    for expectation in [
        expect.ExpectColumnValuesToBeUnique(column="claim_id"),
        expect.ExpectColumnValuesToNotBeNull(column="text"),
        expect.ExpectColumnValuesToBeBetween(column="score", min_value=-1, max_value=1),
        expect.ExpectColumnValuesToBeInSet(column="label", value_set=LABELS),
        expect.ExpectColumnValuesToBeInSet(column="decisive_property", value_set=DECISIVE),
        expect.ExpectColumnValuesToBeBetween(column="n_media", min_value=0, max_value=4),
        expect.ExpectColumnValuesToBeInSet(column="label_matches_score", value_set=[True]),
    ]:
        suite.add_expectation(expectation)
    result = batch.validate(suite)
    return [
        f"{r.expectation_config.type}({r.expectation_config.kwargs.get('column')}): "
        f"{r.result.get('unexpected_count')} unexpected, e.g. {r.result.get('partial_unexpected_list', [])[:3]}"
        for r in result.results
        if not r.success
    ]


@dg.asset_check(asset="scored_claims", blocking=True, description="Scores in range, labels match their bins, ids unique (Great Expectations).")
def scored_claims_quality(context: dg.AssetCheckExecutionContext, store: StoreResource) -> dg.AssetCheckResult:
    quarter = _quarter(context)
    df = store.read_table("scored_claims", quarter)
    problems = scored_table_problems(df) if df.height else []
    return dg.AssetCheckResult(passed=not problems, metadata={"quarter": quarter, "rows": df.height, "problems": dg.MetadataValue.json(problems)})


@dg.asset_check(asset="release", blocking=True,
                description="The published split passes the VeriTaS-format check, holds exactly release_size claims "
                            "(fewer only when the pool allows no more and allow_short_release is set) and no more "
                            "media claims than media_share, and names the code version that built it; no label can be read "
                            "from the order of claims.json, the claim ids or the media ids, and its shortcut audit "
                            "found no position, id or selection shortcut.")
def release_format(
    context: dg.AssetCheckExecutionContext, store: StoreResource, release_rules: ReleaseSettings
) -> dg.AssetCheckResult:
    quarter = _quarter(context)
    folder = store.latest_release(quarter)
    if folder is None:
        return dg.AssetCheckResult(passed=False, metadata={"problem": f"no release for {quarter}"})
    problems = validate_release(folder, release_rules.release_size, release_rules.media_share,
                                release_rules.allow_short_release)
    return dg.AssetCheckResult(passed=not problems, metadata={
        "path": str(folder), "release_size": release_rules.release_size,
        "media_share": release_rules.media_share,
        "problems": dg.MetadataValue.json(problems[:50])})


SCRAPE_SUCCESS_FLOOR = 0.5  # under half the trusted reviews yielding an article means walls, dead links or a broken extractor
REVIEW_DROP_FLOOR = 0.5  # a quarter with under half the previous quarter's reviews points at a feed or ingestion gap


def previous_quarter(label: str) -> str:
    year, q = int(label[:4]), int(label[5])
    return f"{year - 1}Q4" if q == 1 else f"{year}Q{q - 1}"


def latest_yield(instance: dg.DagsterInstance, asset: str, quarter: str) -> dict | None:
    """rows_in / rows_out (and the run) of the latest materialization of ``asset`` for ``quarter``, or None."""
    return yield_of(latest_materialization(instance, asset, quarter))


def yield_of(record) -> dict | None:
    """rows_in / rows_out (and the run) of a materialization record, or None."""
    if record is None:
        return None
    meta = record.asset_materialization.metadata
    return {
        "rows_in": getattr(meta.get("rows_in"), "value", None),
        "rows_out": getattr(meta.get("rows_out"), "value", None),
        "run_id": record.run_id,
    }


def scrape_success_result(quarter: str, current: dict | None) -> dg.AssetCheckResult:
    """Articles rows_out / rows_in against the 50 % floor; nothing to scrape passes with a note."""
    meta = {"quarter": quarter, "floor": SCRAPE_SUCCESS_FLOOR}
    if current is None or not current["rows_in"]:
        note = "no articles materialization for this quarter" if current is None else "no trusted reviews to scrape"
        return dg.AssetCheckResult(passed=True, severity=dg.AssetCheckSeverity.WARN, metadata={**meta, "note": note})
    rate = (current["rows_out"] or 0) / current["rows_in"]
    passed = rate >= SCRAPE_SUCCESS_FLOOR
    note = (
        f"{current['rows_out']} of {current['rows_in']} trusted reviews yielded an article ({rate:.0%}); "
        f"the band is >= {SCRAPE_SUCCESS_FLOOR:.0%}" + ("" if passed else ": look at drop/* on articles (bot walls, fetch failures, length rules)")
    )
    return dg.AssetCheckResult(
        passed=passed, severity=dg.AssetCheckSeverity.WARN,
        metadata={**meta, "rows_in": current["rows_in"], "rows_out": current["rows_out"], "scrape_success": round(rate, 4), "note": note},
    )


def review_volume_result(quarter: str, current: dict | None, previous: dict | None) -> dg.AssetCheckResult:
    """This quarter's reviews rows_out against half of the previous quarter's; no previous quarter passes with a note."""
    prev_label = previous_quarter(quarter)
    meta = {"quarter": quarter, "previous_quarter": prev_label, "floor": REVIEW_DROP_FLOOR}
    reviews = (current or {}).get("rows_out") or 0
    meta["reviews"] = reviews
    if previous is None or not previous["rows_out"]:
        why = "was never materialized" if previous is None else "had no reviews"
        note = f"no comparison: {prev_label} {why}"
        return dg.AssetCheckResult(passed=True, severity=dg.AssetCheckSeverity.WARN, metadata={**meta, "note": note})
    ratio = reviews / previous["rows_out"]
    passed = ratio >= REVIEW_DROP_FLOOR
    note = (
        f"{reviews} reviews against {previous['rows_out']} in {prev_label} ({ratio:.0%}); the band is >= {REVIEW_DROP_FLOOR:.0%}"
        + ("" if passed else ": check the sources (a feed snapshot cut short, an API dump missing) before trusting the quarter")
    )
    return dg.AssetCheckResult(
        passed=passed, severity=dg.AssetCheckSeverity.WARN,
        metadata={**meta, "previous_reviews": previous["rows_out"], "ratio": round(ratio, 4), "note": note},
    )


@dg.asset_check(asset="articles", description="Yield band (WARN): at least half of the trusted reviews yield an article.")
def articles_scrape_success(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    quarter = _quarter(context)
    return scrape_success_result(quarter, latest_yield(context.instance, "articles", quarter))


@dg.asset_check(asset="reviews", description="Yield band (WARN): at least half as many reviews as the previous quarter.")
def reviews_volume(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    quarters = _quarters(context)
    found = latest_materializations(context.instance, "reviews", [*quarters, previous_quarter(quarters[0])])
    return per_quarter_result({q: review_volume_result(q, *(yield_of(found.get(k)) for k in (q, previous_quarter(q))))
                               for q in quarters})


BLOCKING_CHECKS = [scored_claims_quality, release_format]
YIELD_CHECKS = [reviews_volume, articles_scrape_success]
CHECKS = BLOCKING_CHECKS + YIELD_CHECKS
