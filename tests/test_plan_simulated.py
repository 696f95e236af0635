"""`veritas plan` against the calls the session's simulated quarter made (tests/simulated.py: 300 reviews, every
Compromised claim rewritten, the simulated panel and writer, real OCR of the generated pictures, most of which carry
their claim's first 40 characters).

The plan is made from the quarter's tables after stage 6 and stage 5's OCR cache, as `veritas plan` reads them for a
quarter resumed at stage 7: stage 7's estimate counts the media consistency rule of issue 49 from the OCR's text of
the very claims it rewrites (rectify/media_carry), and its refusals and exclusions at the rates measured on the
default rehearsal (dagster_project/commands/plan.py, MEDIA_REFUSED_*)."""

import sqlite3

from dagster_project.commands.plan import build_plan
from dagster_project.config import load_config
from dagster_project.resources.llm import LLMResource
from dagster_project.resources.store import StoreResource
from dagster_project.stage_settings import stage_settings
from tests.simulated import QUARTER, SIM_KEY

# planned / made stage-7 calls allowed: the plan is an estimate (rates of the default rehearsal, a full re-rating
# for every rewrite the rule does not exclude)
TOLERANCE = 0.15


def stage_plan(simulated, monkeypatch) -> dict:
    for name, value in SIM_KEY.items():
        monkeypatch.setenv(name, value)
    cfg = load_config(simulated["config"])
    llm = LLMResource(**cfg["llm"])
    llm.set_quarter(QUARTER)
    plan = build_plan(llm, stage_settings(cfg["stages"]), StoreResource(**cfg["store"]), QUARTER)
    return {s["stage"]: s for s in plan["stages"]} | {"assumptions": plan["assumptions"]}


def paid(simulated, stage: str) -> int:
    """The stage's paid calls in the session's ledger (the warm re-runs and the other tests' runs of the same quarter
    hit the cache)."""
    with sqlite3.connect(simulated["cache_path"]) as db:
        return db.execute("SELECT COUNT(*) FROM llm_ledger WHERE stage=? AND quarter=? AND cache_hit=0",
                          (stage, QUARTER)).fetchone()[0]


def test_the_plan_counts_stage_7s_calls_with_the_media_rule(simulated, monkeypatch):
    assert simulated["ok"]
    extra = simulated["first_yields"]["stages"]["rectified_claims"]["extras"]
    plan = stage_plan(simulated, monkeypatch)
    seven = plan["rectified_claims"]
    rule = seven["media_rule"]
    # the rewrites, and the ones whose media carry their wording, as stage 7 found them: read in the OCR cache
    assert rule["rewrites"] == extra["rectify/attempted"]
    carried = sum(v for k, v in extra.items() if k.startswith("rectify/media_carry/"))
    assert rule["read_carrying"] == rule["expected_carrying"] == carried > 0
    assert rule["read_in_ocr_cache"] == rule["with_media"]
    excluded = sum(v for k, v in extra.items() if k.startswith("rectify/media_excluded/"))
    assert abs(rule["expected_excluded"] - excluded) <= 0.25 * carried, (rule, excluded)
    made = paid(simulated, "rectified_claims")
    assert abs(seven["calls"] / made - 1) <= TOLERANCE, (seven["calls"], made, seven["basis"])
    assert plan["assumptions"][0].startswith(f"stage 7: {rule['rewrites']} rewrites, {rule['with_media']} with media")
