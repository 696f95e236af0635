"""Blocking data-quality checks: a bad table or a bad split stops the run before anything downstream reads it."""

import os

import dagster as dg
import polars as pl

from assets.release import validate_release
from assets.scored_claims import bin3
from dagster_project.partitions import to_label
from dagster_project.resources.store import StoreResource

LABELS = ["intact", "unknown", "compromised"]
DECISIVE = ["context_coverage", "veracity", "contextualization"]


def _quarter(context: dg.AssetCheckExecutionContext) -> str:
    key = context.run.tags.get("dagster/partition")
    if not key:
        raise dg.Failure("this check runs on one quarter: launch it with a partition")
    return to_label(key)


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


@dg.asset_check(asset="release", blocking=True, description="The published split passes the VeriTaS-format check.")
def release_format(context: dg.AssetCheckExecutionContext, store: StoreResource) -> dg.AssetCheckResult:
    quarter = _quarter(context)
    folder = store.latest_release(quarter)
    if folder is None:
        return dg.AssetCheckResult(passed=False, metadata={"problem": f"no release for {quarter}"})
    problems = validate_release(folder)
    return dg.AssetCheckResult(passed=not problems, metadata={"path": str(folder), "problems": dg.MetadataValue.json(problems[:50])})


CHECKS = [scored_claims_quality, release_format]
