"""The small simulated quarter, run once per test session (the `simulated` fixture in tests/conftest.py).

A quarter of real records with planted failures and a planted truth (dagster_project/simulation/quarter.py), the
simulated model panel on loopback at zero latency with its faults on (dagster_project/simulation/panel.py), every
stage run by Dagster.
tests/test_rehearsal_e2e.py checks that run; the S3, backfill and Celery tests run the same quarter again in their
own way, from the same LLM and OCR caches (so the panel answers nothing twice), and compare their releases with it.
"""

import contextlib
import os
from pathlib import Path

import pytest

QUARTER = "2025Q3"
REVIEWS, RELEASE = 300, 100
# every claim is scored and every Compromised one rewritten (119 rewrites), as the funnel and the kill and backfill
# checks expect; the release takes 8 of the variants (tests/test_score_demand.py and tests/test_rectify_demand.py
# cover scoring and rectification on demand, bench/rehearsal.py both at full size)
STAGES = {"rectify": "all", "score": "all"}
# the panel's API key, and a fixed release order key: a new data dir would draw its own, and with it another selection
SIM_KEY = {"VERITAS_SIM_KEY": "sk-simulated", "VERITAS_RELEASE_KEY": "5eed" * 16}
PANEL_FAULTS = {"rate_limit": 0.01, "server_error": 0.005, "malformed": 0.005, "refusal": 0.002}
# the simulated writer's styles (dagster_project/simulation/rewrites.py), PanelConfig's default mix: the checker
# refuses the negation template as not shareable, so stage 7 has refusals to count
REWRITE_STYLES = {"negation": 0.2, "correction": 0.2, "minimal": 0.4, "paraphrase": 0.2}


@contextlib.contextmanager
def simulated_quarter(folder: Path):
    """Generates the quarter, starts the panel, runs every stage, then a warm re-run; yields what the tests check."""
    from dagster_project.quarter_run import run_quarter
    from dagster_project.simulation.panel import PanelConfig, PanelServer
    from dagster_project.simulation.quarter import QuarterConfig, generate
    from dagster_project.simulation.records import load_records
    from dagster_project.simulation.run import latest_release, write_config
    from dagster_project.yield_report import collect_yields
    from tests.ops_support import fast_router_backoff

    truth = generate(folder / "quarter", QuarterConfig(quarter=QUARTER, reviews=REVIEWS, video_share=0.03,
                                                       label_mix="balanced"), load_records(prefer_shared=False))
    panel = PanelConfig(latency_median_s=0.0, retry_after_s=0.0, faults=PANEL_FAULTS, rewrite_styles=REWRITE_STYLES)
    with PanelServer(truth, panel) as server:
        with pytest.MonkeyPatch.context() as mp, fast_router_backoff():
            for name, value in SIM_KEY.items():
                mp.setenv(name, value)
            mp.setenv("DAGSTER_HOME", str(folder / "dagster_home"))
            config = write_config(folder, folder / "quarter", server, release_size=RELEASE, parallel_claims=4,
                                  stages=STAGES)
            ok = run_quarter(config, QUARTER)
            first = server.panel.counters()
            first_yields = collect_yields(config, QUARTER)
            rerun_ok = run_quarter(config, QUARTER, until="release")
            second = server.panel.counters()
            yields = collect_yields(config, QUARTER)
        yield {"ok": ok, "rerun_ok": rerun_ok, "truth": truth, "folder": folder, "server": server, "config": config,
               "first": first, "second": second, "first_yields": first_yields, "yields": yields,
               "cache_path": str(folder / "data" / "llm_cache.sqlite"),
               "release": latest_release(folder / "data", QUARTER) if ok else None}


def rerun_config(simulated: dict, folder: Path, **extra) -> str:
    """A config for the simulated quarter in ``folder`` (its own data dir and Dagster instance) that shares the
    session run's LLM and OCR caches; ``extra`` sets top-level sections (store, executor)."""
    import yaml

    from dagster_project.simulation.run import write_config

    assert simulated["ok"], "the simulated quarter's first run failed"
    path = write_config(folder, simulated["folder"] / "quarter", simulated["server"], release_size=RELEASE,
                        parallel_claims=4, cache_path=Path(simulated["cache_path"]), stages=STAGES)
    cfg = yaml.safe_load(Path(path).read_text())
    cfg.update(extra)
    Path(path).write_text(yaml.safe_dump(cfg, allow_unicode=True, sort_keys=False))
    return path


def release_claim_count(release: Path) -> int:
    import json

    return len(json.loads((release / "claims.json").read_text())["claims"])


def env_with_sim_key() -> dict:
    return {**os.environ, **SIM_KEY}
