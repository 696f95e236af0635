"""Stage 2: keep reviews by professional fact-checkers (active IFCN or EFCSN signatories)."""

import csv
import io
from collections import Counter

import dagster as dg

from assets.ingestion.publishers import filter_trusted, load_registry, mix_metadata
from assets.stage.tables import finish_quarter, load_upstream_frame
from assets.stage.wiring import each_quarter, stage_asset
from dagster_project.resources.store import StoreResource
from dagster_project.stage_settings import IngestionSettings
from schemas.records import Review, TrustedReview

STAGE = "trusted_reviews"


def unknown_report(unknown: Counter) -> bytes:
    """The unknown publishers of a quarter as CSV (registered domain or name, reviews), most frequent first."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["publisher", "reviews"])
    writer.writerows(unknown.most_common())
    return out.getvalue().encode("utf-8")


@stage_asset(
    "ingestion",
    "Stage 2: reviews whose publisher is an active IFCN/EFCSN signatory; unknown publishers reported.",
    deps=("reviews",),
)
def trusted_reviews(
    context: dg.AssetExecutionContext, ingestion: IngestionSettings, store: StoreResource
) -> dg.MaterializeResult:
    registry = load_registry(ingestion.publisher_registry)

    def one(quarter: str) -> dict:
        bad: list = []  # upstream rows that fail validation
        upstream = load_upstream_frame(store, "reviews", quarter, Review, bad)
        kept, stats, unknown = filter_trusted(upstream, registry)
        report = f"reports/{STAGE}/{quarter}/unknown_publishers.csv"
        store.put_bytes(report, unknown_report(unknown), content_type="text/csv")
        stats.extra["unknown_publishers"] = dg.MetadataValue.json(dict(unknown.most_common()))  # all, not a sample
        stats.extra["unknown_publishers_distinct"] = len(unknown)
        stats.extra["unknown_publishers_report"] = dg.MetadataValue.path(f"{store.location}/{report}")
        publishers = kept["publisher_id"].to_list()
        stats.extra["top_publishers"] = dg.MetadataValue.json(dict(Counter(publishers).most_common(10)))
        stats.extra.update(mix_metadata(kept, publishers))
        return finish_quarter(context, store, STAGE, quarter, kept, TrustedReview, stats, bad)

    return each_quarter(context, one)
