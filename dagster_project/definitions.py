"""The code location: the sources' parsed snapshot, ten quarter-partitioned assets, three side-effect resources
and each stage's settings."""

import os
import warnings

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

import dagster as dg  # noqa: E402

from assets.audit.asset import AUDIT_ASSETS  # noqa: E402
from assets.audit.sensor import audit_job, audit_sensor  # noqa: E402
from assets.claims.normalized_claims import normalized_claims  # noqa: E402
from assets.claims.rectified_claims import rectified_claims  # noqa: E402
from assets.claims.scored_claims import scored_claims  # noqa: E402
from assets.evaluation.evaluation import evaluation  # noqa: E402
from assets.evaluation.leaderboard import leaderboard  # noqa: E402
from assets.evaluation.predictions import predictions  # noqa: E402
from assets.ingestion.reviews import review_snapshot, reviews  # noqa: E402
from assets.ingestion.trusted_reviews import trusted_reviews  # noqa: E402
from assets.release.asset import release  # noqa: E402
from assets.scraping.appearances import appearances  # noqa: E402
from assets.scraping.articles import articles  # noqa: E402
from dagster_project.alerts import AlertsResource, FreshnessSettings  # noqa: E402
from dagster_project.checks import CHECKS  # noqa: E402
from dagster_project.config import load_config  # noqa: E402
from dagster_project.executors import (  # noqa: E402
    ALL_STAGES_JOB,
    RETRY_DEFAULTS,
    executor_from_config,
)
from dagster_project.freshness import FRESHNESS_CHECKS  # noqa: E402
from dagster_project.resources.llm import LLMResource  # noqa: E402
from dagster_project.resources.store import StoreResource  # noqa: E402
from dagster_project.resources.web import WebResource  # noqa: E402
from dagster_project.schedules import quarterly_schedule  # noqa: E402
from dagster_project.sensors import alert_sensors  # noqa: E402
from dagster_project.stage_settings import stage_settings  # noqa: E402

SNAPSHOT_ASSETS = [review_snapshot]  # not partitioned: the sources parsed once per version, read by every quarter
PIPELINE_ASSETS = [
    reviews, trusted_reviews, articles, appearances, normalized_claims, scored_claims, rectified_claims, release,
]
JOB_ASSETS = [predictions, evaluation]
ALL_ASSETS = SNAPSHOT_ASSETS + PIPELINE_ASSETS + JOB_ASSETS
ASSET_NAMES = [a.key.path[-1] for a in PIPELINE_ASSETS + JOB_ASSETS]  # the quarter stages in order: --until, funnel
BOARD_ASSETS = [leaderboard]  # not partitioned: every quarter's evaluation feeds it
BATCHED_STAGES = {"reviews", "trusted_reviews"}  # a backfill runs several quarters of these at once (quarters_per_run)
# A job's backfill (the job page's) takes its assets' smallest policy, one quarter per run, and says so: expected here.
warnings.filterwarnings("ignore", message="Asset job .* materializes assets with varying BackfillPolicies")


def with_snapshot(names: list[str]) -> list[str]:
    """A selection of quarter stages, with the sources' snapshot in front when it holds reviews (its reader)."""
    return ["review_snapshot", *names] if "reviews" in names else list(names)


def build_resources(config: dict) -> dict:
    """The side-effect resources, and each stage's settings under the key its asset names them by."""
    return {
        **stage_settings(config["stages"]),
        "store": StoreResource(**config["store"]),
        "web": WebResource(**config["web"]),
        "llm": LLMResource(**config["llm"]),
    }


def build_definitions(config_path: str | None = None) -> dg.Definitions:
    config = load_config(config_path)
    with warnings.catch_warnings():  # code references are beta in 1.13; they link each asset to its source in the UI
        warnings.simplefilter("ignore", dg.BetaWarning)
        assets = dg.with_source_code_references(ALL_ASSETS + BOARD_ASSETS + AUDIT_ASSETS)
    resources = build_resources(config)
    batch = resources["ingestion"].quarters_per_run
    per_run = dg.BackfillPolicy.multi_run(batch) if batch else dg.BackfillPolicy.single_run()
    assets = [a.with_attributes(backfill_policy=per_run) if a.key.path[-1] in BATCHED_STAGES else a for a in assets]
    # run-level retries (the daemon's, once `run_retries: {enabled: true}` is in dagster.yaml) on top of step retries
    retry_tags = {"dagster/max_retries": str(RETRY_DEFAULTS["max_retries"]), "dagster/retry_strategy": "FROM_FAILURE"}
    all_stages = dg.define_asset_job(
        ALL_STAGES_JOB, selection=dg.AssetSelection.assets(*ALL_ASSETS), tags=retry_tags,
        description="Every stage for one quarter; launch a backfill over quarters from its Partitions tab.",
    )
    # where alerts go and when a release or the feed is late: the sensors and the freshness checks read them
    alerts = AlertsResource(**config.get("alerts") or {})
    resources |= {"alerts": alerts, "freshness": FreshnessSettings(**config.get("freshness") or {})}
    return dg.Definitions(
        assets=assets,
        asset_checks=CHECKS + FRESHNESS_CHECKS,
        resources=resources,
        jobs=[
            dg.define_asset_job("quarterly_refresh", selection=dg.AssetSelection.assets(*SNAPSHOT_ASSETS, *PIPELINE_ASSETS),
                                tags=retry_tags),
            dg.define_asset_job("evaluate_release", selection=dg.AssetSelection.assets(*JOB_ASSETS), tags=retry_tags),
            all_stages,
            audit_job,
        ],
        schedules=[quarterly_schedule(config, all_stages)],
        sensors=[*alert_sensors(alerts), audit_sensor(resources["audit"], config["data_dir"])],
        executor=executor_from_config(config.get("executor")),
    )


def all_stages_job() -> dg.JobDefinition:
    """The partitioned job over all stages, rebuilt from ``$VERITAS_CONFIG`` wherever a step runs.

    A module-level function, so that ``dg.reconstructable`` can point a subprocess or a Celery worker at it.
    """
    return build_definitions(os.environ.get("VERITAS_CONFIG")).resolve_job_def(ALL_STAGES_JOB)


defs = build_definitions()
