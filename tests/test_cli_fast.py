"""Read-only commands (`veritas yields`, `costs`, `export`) read the instance, the ledger and the store directly:
they never load the code location (its stages, litellm, Great Expectations), which took them 15-30 s, and with
the default storage and a local store they do not even import Dagster."""

import json
import os
import subprocess
import sys

import pytest

from dagster_project.checks import YIELD_CHECKS
from dagster_project.config import PROJECT_ROOT, load_config
from dagster_project.core.dashboard import STAGE_ORDER
from dagster_project.core.instance_records import (
    YIELD_CHECK_KEYS,
    InstanceHistory,
    SqliteHistory,
    event_log_file,
    open_history,
)
from dagster_project.core.quarters import current_quarter, to_label
from dagster_project.definitions import ASSET_NAMES
from dagster_project.partitions import quarterly_partitions
from tests.conftest import write_demo_config

# modules a read-only command must not import: the code location and the libraries only stages need
HEAVY = ("dagster", "dagster_project.definitions", "dagster_project.checks", "assets", "litellm",
         "great_expectations", "trafilatura", "yt_dlp", "polars")

PROBE = """
import json, sys
from dagster_project.cli import main
rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "loaded": sorted(m for m in %r if m in sys.modules)}))
""" % (HEAVY,)


def test_the_light_names_match_the_code_location():
    assert STAGE_ORDER == ASSET_NAMES
    assert current_quarter() == to_label(quarterly_partitions.get_last_partition_key())
    assert {(k.asset_key.to_user_string(), k.name) for c in YIELD_CHECKS for k in c.check_keys} == set(YIELD_CHECK_KEYS)


@pytest.fixture(scope="module")
def materialized(tmp_path_factory):
    """2020Q2's reviews and trusted reviews of the demo feed (no model stage), and a release folder to export."""
    from dagster_project.quarter_run import run_quarter

    folder = tmp_path_factory.mktemp("fast")
    cfg = write_demo_config(folder)
    with pytest.MonkeyPatch.context() as mp:
        # the instance under the config's data dir, where the CLI finds it (restored after: run_quarter sets it)
        mp.setenv("DAGSTER_HOME", str(folder / "data" / "dagster"))
        assert run_quarter(cfg, "2020Q2", until="trusted_reviews")
    release = folder / "data" / "data" / "releases" / "2020Q2"
    (release / "v1").mkdir(parents=True)
    (release / "v1" / "claims.json").write_text("[]")
    (release / "LATEST").write_text("v1")
    return cfg, folder


def probe(*argv: str) -> tuple[dict, str]:
    env_clean = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          env=env_clean, timeout=600)
    assert done.returncode == 0, done.stderr
    *printed, last = done.stdout.strip().splitlines()
    return json.loads(last), "\n".join(printed)


def test_yields_reads_the_instance_only(materialized):
    cfg, _ = materialized
    assert load_config(cfg)["store"]["root"].endswith("data/data")
    result, printed = probe("--config", cfg, "yields", "--quarter", "2020Q2", "--json")
    assert result == {"rc": 0, "loaded": []}
    report = json.loads(printed)
    assert list(report["stages"]) == ["reviews", "trusted_reviews"]
    assert (report["stages"]["reviews"]["rows_in"], report["stages"]["reviews"]["rows_out"]) == (20, 16)
    assert set(report["checks"]) == {"reviews_volume"}  # articles (and its check) were not run


def test_the_sqlite_reader_gives_what_the_instance_api_gives(materialized):
    import dagster as dg

    cfg, folder = materialized
    config = load_config(cfg)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(folder / "data" / "dagster"))
        fast = open_history(config)
        assert isinstance(fast, SqliteHistory) and fast.index.name == "event_log.db"  # the project's consolidated log
        with dg.DagsterInstance.get() as instance:
            slow = InstanceHistory(instance)
            for stage in ("review_snapshot", "reviews", "trusted_reviews", "articles"):
                assert fast.materialization(stage, "2020Q2") == slow.materialization(stage, "2020Q2")
            assert fast.materialization("reviews", "2020Q2")["metadata"]["drops_json"] == {
                "claim_date_after_review_date": 1, "duplicate": 1, "quarantined:element_without_items": 1,
                "quarantined:missing_review_url": 1}
            for asset, check in YIELD_CHECK_KEYS:
                assert fast.check_evaluations(asset, check) == slow.check_evaluations(asset, check)
            assert [e["metadata"]["quarter"] for e in fast.check_evaluations("reviews", "reviews_volume")] == ["2020Q2"]
        # another storage than Dagster's SQLite event log goes through the API
        settings = folder / "data" / "dagster" / "dagster.yaml"
        kept = settings.read_text()
        try:
            settings.write_text(f"storage:\n  sqlite:\n    base_dir: {json.dumps(str(settings.parent))}\n")
            assert isinstance(open_history(config), InstanceHistory)
            settings.write_text("telemetry:\n  enabled: false\n")  # Dagster's default layout: a file per run
            assert event_log_file(settings.parent) == settings.parent / "history" / "runs" / "index.db"
        finally:
            settings.write_text(kept)


def test_costs_reads_the_ledger_only(materialized, monkeypatch):
    from dagster_project.resources.llm import EnsembleMember, LLMResource
    from dagster_project.simulation.openai_stub import OpenAIStub
    from tests.test_llm import MESSAGES, SCHEMA, Rating

    cfg, _ = materialized
    result, printed = probe("--config", cfg, "costs")
    assert result == {"rc": 0, "loaded": []}
    assert printed.startswith("LLM ledger: no cache file at ")  # no model stage ran
    # one answered call in the ledger: the read-only report is the resource's own
    monkeypatch.setenv("FAST_STUB_KEY", "sk-test")
    stub = OpenAIStub(lambda mode, body: (200, '{"category": "positive", "certainty": "certain", "justification": "x"}'))
    try:
        llm = LLMResource(cache_path=load_config(cfg)["llm"]["cache_path"], members=[EnsembleMember(
            name="m", model="openai/m", api_base=stub.base("ok"), api_key_env="FAST_STUB_KEY", input_cost_per_token=1e-6,
            output_cost_per_token=2e-6)])
        llm.set_quarter("2020Q2")
        llm.complete_json("m", MESSAGES, SCHEMA, Rating, template_id="rate_claim", template_hash="h", stage="scored_claims")
    finally:
        stub.close()
    result, printed = probe("--config", cfg, "costs", "--quarter", "2020Q2", "--json")
    assert result == {"rc": 0, "loaded": []}
    report = json.loads(printed)
    assert report == json.loads(json.dumps(llm.ledger_report("2020Q2")))
    assert (report["calls"], report["model_calls"], report["by_stage"]["scored_claims"]["calls"]) == (1, 1, 1)


def test_export_reads_the_store_only(materialized):
    cfg, folder = materialized
    result, printed = probe("--config", cfg, "export", "--quarter", "2020Q2", "--out", str(folder / "out"))
    assert result == {"rc": 0, "loaded": []}
    assert printed == str(folder / "out" / "2020Q2")
    assert (folder / "out" / "2020Q2" / "claims.json").read_text() == "[]"
