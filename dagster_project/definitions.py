"""The code location: ten quarter-partitioned assets, three side-effect resources and the stage parameters."""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

import dagster as dg  # noqa: E402

from assets.appearances import appearances  # noqa: E402
from assets.articles import articles  # noqa: E402
from assets.evaluation import evaluation  # noqa: E402
from assets.normalized_claims import normalized_claims  # noqa: E402
from assets.predictions import predictions  # noqa: E402
from assets.rectified_claims import rectified_claims  # noqa: E402
from assets.release import release, validate_release  # noqa: E402
from assets.reviews import reviews  # noqa: E402
from assets.scored_claims import scored_claims  # noqa: E402
from assets.trusted_reviews import trusted_reviews  # noqa: E402
from dagster_project.config import PipelineResource, load_config  # noqa: E402
from dagster_project.partitions import to_label  # noqa: E402
from dagster_project.resources.llm import LLMResource  # noqa: E402
from dagster_project.resources.store import StoreResource  # noqa: E402
from dagster_project.resources.web import WebResource  # noqa: E402

PIPELINE_ASSETS = [
    reviews, trusted_reviews, articles, appearances, normalized_claims, scored_claims, rectified_claims, release,
]
JOB_ASSETS = [predictions, evaluation]
ALL_ASSETS = PIPELINE_ASSETS + JOB_ASSETS
ASSET_NAMES = [a.key.path[-1] for a in ALL_ASSETS]


@dg.asset_check(asset=release, blocking=True, description="The published split passes the VeriTaS-format check.")
def release_format(context: dg.AssetCheckExecutionContext, store: StoreResource) -> dg.AssetCheckResult:
    quarter = to_label(context.run.tags.get("dagster/partition", "")) if context.run.tags.get("dagster/partition") else ""
    folder = store.latest_release(quarter) if quarter else None
    if folder is None:
        return dg.AssetCheckResult(passed=False, metadata={"problem": f"no release found for {quarter or 'this run'}"})
    problems = validate_release(folder)
    return dg.AssetCheckResult(passed=not problems, metadata={"path": str(folder), "problems": dg.MetadataValue.json(problems[:50])})


def build_resources(config: dict) -> dict:
    return {
        "pipeline": PipelineResource(**config["stages"]),
        "store": StoreResource(**config["store"]),
        "web": WebResource(**config["web"]),
        "llm": LLMResource(**config["llm"]),
    }


def build_definitions(config_path: str | None = None) -> dg.Definitions:
    config = load_config(config_path)
    return dg.Definitions(
        assets=ALL_ASSETS,
        asset_checks=[release_format],
        resources=build_resources(config),
        jobs=[
            dg.define_asset_job("quarterly_refresh", selection=dg.AssetSelection.assets(*PIPELINE_ASSETS), partitions_def=PIPELINE_ASSETS[0].partitions_def),
            dg.define_asset_job("evaluate_release", selection=dg.AssetSelection.assets(*JOB_ASSETS), partitions_def=PIPELINE_ASSETS[0].partitions_def),
        ],
    )


defs = build_definitions()
