"""Operations wiring chosen by config: executors, pools, retries, the all-stages job and the backfill CLI's checks."""

from pathlib import Path

import dagster as dg
import pytest
import yaml

from dagster_project.cli import main
from dagster_project.commands.backfill import quarter_keys, stage_selection
from dagster_project.config import load_config
from dagster_project.core.instance import apply_pools
from dagster_project.definitions import ASSET_NAMES, build_definitions
from dagster_project.executors import (
    ALL_STAGES_JOB,
    executor_from_config,
    write_celery_worker_yaml,
)
from dagster_project.partitions import quarterly_partitions
from tests.conftest import write_demo_config


def config_file(folder: Path, **extra) -> str:
    path = Path(write_demo_config(folder))
    raw = yaml.safe_load(path.read_text())
    raw.update(extra)
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def test_the_executor_is_chosen_by_config(tmp_path):
    assert executor_from_config({}) is dg.in_process_executor
    assert executor_from_config({"kind": "multiprocess", "max_concurrent": 3}).name == "multiprocess"
    celery = executor_from_config({"kind": "celery", "broker": "redis://127.0.0.1:6390/0"})
    assert celery.name == "celery"
    with pytest.raises(ValueError, match="unknown kind 'dask'"):
        executor_from_config({"kind": "dask"})
    cfg = config_file(tmp_path, executor={"kind": "celery", "broker": "redis://127.0.0.1:6390/1"})
    defs = build_definitions(cfg)
    assert defs.resolve_job_def(ALL_STAGES_JOB).executor_def.name == "celery"
    worker = yaml.safe_load(write_celery_worker_yaml(load_config(cfg), tmp_path / "worker.yaml").read_text())
    assert worker == {"execution": {"config": {
        "broker": "redis://127.0.0.1:6390/1", "backend": "redis://127.0.0.1:6390/1",
        "config_source": {"worker_prefetch_multiplier": 1, "worker_disable_prefetch": True},
    }}}


def test_the_all_stages_job_is_partitioned_and_retried(tmp_path):
    defs = build_definitions(config_file(tmp_path))
    job = defs.resolve_job_def(ALL_STAGES_JOB)
    assert job.partitions_def == quarterly_partitions
    assert {k.to_user_string() for k in job.asset_layer.selected_asset_keys} == set(ASSET_NAMES) | {"review_snapshot"}
    assert job.tags["dagster/max_retries"] == "2" and job.executor_def is dg.in_process_executor
    graph = defs.resolve_asset_graph()
    pools = {k.to_user_string(): graph.get(k).pools for k in graph.get_all_asset_keys()}
    assert pools["scored_claims"] == {"llm"} and pools["articles"] == {"web"} and not pools["release"]
    policies = {n.name: n.retry_policy for n in job.graph.node_defs}
    assert policies["scored_claims"].max_retries == 2 and policies["scored_claims"].backoff == dg.Backoff.EXPONENTIAL
    assert policies["release"] is None  # local work: a failure there is a bug, retrying would only repeat it


def test_pool_limits_come_from_the_config(tmp_path):
    config = load_config(config_file(tmp_path, pools={"llm": 2, "web": 5}))
    with dg.instance_for_test() as instance:
        assert apply_pools(instance, config) == {"llm": 2, "web": 5}
        assert instance.event_log_storage.get_concurrency_info("llm").slot_count == 2
        assert instance.event_log_storage.get_concurrency_info("web").slot_count == 5


def test_backfill_ranges_are_checked(tmp_path, capsys):
    assert quarter_keys("2020Q2", "2020Q4") == ["2020-04", "2020-07", "2020-10"]
    with pytest.raises(ValueError, match="quarter 2015Q3 has no partition: the quarters run from 2016Q1 to "):
        quarter_keys("2015Q3", "2016Q1")
    assert stage_selection(None, "trusted_reviews") == ["reviews", "trusted_reviews"]
    assert stage_selection("normalized_claims", "scored_claims") == ["normalized_claims", "scored_claims"]
    assert stage_selection(None, None) == ASSET_NAMES
    with pytest.raises(ValueError, match="comes after"):
        stage_selection("release", "articles")
    cfg = config_file(tmp_path)
    assert main(["--config", cfg, "backfill", "--from", "2020Q2", "--until", "nonsense"]) == 2
    assert "unknown asset 'nonsense'" in capsys.readouterr().err
    assert main(["--config", cfg, "backfill", "--retry", "bf-missing"]) == 2
    assert "no backfill 'bf-missing'" in capsys.readouterr().err
