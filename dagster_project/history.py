"""What the Dagster instance recorded about a quarter, read without loading the code location (its assets,
litellm, Great Expectations): the latest materialization of a stage and the keys of the yield-band checks."""

import dagster as dg

from dagster_project.partitions import to_key

# (asset, check) of checks.YIELD_CHECKS; named here so that `veritas yields` need not import the checks' stages
YIELD_CHECK_KEYS = (("reviews", "reviews_volume"), ("articles", "articles_scrape_success"))


def latest_materialization(instance: dg.DagsterInstance, asset: str, quarter: str):
    """The latest materialization record of ``asset`` for ``quarter``, or None."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[to_key(quarter)]), limit=1
    ).records
    return records[0] if records else None


def yield_check_keys() -> list[dg.AssetCheckKey]:
    return [dg.AssetCheckKey(dg.AssetKey(asset), name) for asset, name in YIELD_CHECK_KEYS]
