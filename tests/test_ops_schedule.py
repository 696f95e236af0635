"""The quarterly schedule: newest complete quarter in full, ingestion for the two before, only when inputs changed."""

import shutil
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import yaml

from dagster_project.config import PROJECT_ROOT
from dagster_project.definitions import build_definitions
from tests.conftest import write_demo_config


@dg.op
def _noop():
    return None


@dg.job
def _recorded():
    _noop()


def config_with_own_feed(folder: Path, **extra) -> tuple[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    cfg_path = Path(write_demo_config(folder))
    feed = folder / "feed.json"
    shutil.copy(PROJECT_ROOT / "demo/snapshot/feed.json", feed)
    cfg = yaml.safe_load(cfg_path.read_text())
    cfg["sources"] = [{"kind": "datafeed", "path": str(feed)}]
    cfg.update(extra)
    cfg_path.write_text(yaml.safe_dump(cfg))
    return str(cfg_path), feed


def tick(schedule: dg.ScheduleDefinition, instance: dg.DagsterInstance, when: datetime, repo=None):
    context = dg.build_schedule_context(instance=instance, scheduled_execution_time=when, repository_def=repo)
    return schedule.evaluate_tick(context)


def test_the_schedule_is_off_by_default_and_on_by_config(tmp_path):
    cfg, _ = config_with_own_feed(tmp_path / "a")
    schedule = build_definitions(cfg).get_schedule_def("quarterly_refresh_schedule")
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    assert schedule.cron_schedule == "0 3 8 1,4,7,10 *" and schedule.execution_timezone == "UTC"
    cfg_on, _ = config_with_own_feed(tmp_path / "b", schedule={"enabled": True, "cron": "0 5 15 1,4,7,10 *"})
    schedule_on = build_definitions(cfg_on).get_schedule_def("quarterly_refresh_schedule")
    assert schedule_on.default_status == dg.DefaultScheduleStatus.RUNNING
    assert schedule_on.cron_schedule == "0 5 15 1,4,7,10 *"


def test_a_tick_refreshes_the_finished_quarter_and_reingests_two_before_only_when_inputs_change(tmp_path):
    cfg, feed = config_with_own_feed(tmp_path)
    defs = build_definitions(cfg)
    schedule = defs.get_schedule_def("quarterly_refresh_schedule")
    with dg.instance_for_test() as instance:  # the schedule context needs an instance with a reference
        check_ticks(schedule, instance, feed, defs.get_repository_def())


def check_ticks(schedule, instance, feed, repo):
    when = datetime(2026, 1, 8, 3, tzinfo=UTC)  # 2025Q4 has just ended

    requests = tick(schedule, instance, when, repo).run_requests
    assert [(r.partition_key, r.tags["veritas/refresh"]) for r in requests] == [
        ("2025-10", "full"), ("2025-07", "ingestion"), ("2025-04", "ingestion")]
    assert requests[0].asset_selection is None  # the whole job: every stage
    for r in requests[1:]:
        assert [k.to_user_string() for k in r.asset_selection] == ["review_snapshot", "reviews", "trusted_reviews"]
    fingerprint = requests[0].tags["veritas/inputs"]
    assert {r.tags["veritas/inputs"] for r in requests} == {fingerprint}
    assert {r.run_key for r in requests} == {f"2025Q4-full-{fingerprint}", f"2025Q3-ingestion-{fingerprint}",
                                              f"2025Q2-ingestion-{fingerprint}"}

    # they ran and succeeded: the next tick (a retry of the same schedule) asks for nothing
    for r in requests:
        assert _recorded.execute_in_process(instance=instance, tags=dict(r.tags) | {"dagster/partition": r.partition_key}).success
    again = tick(schedule, instance, when, repo)
    assert again.run_requests == [] and "inputs changed" in again.skip_message

    # a new feed snapshot: the same three partitions are due again, under a new fingerprint
    feed.write_text(feed.read_text() + "\n")
    changed = tick(schedule, instance, when, repo).run_requests
    assert [r.partition_key for r in changed] == ["2025-10", "2025-07", "2025-04"]
    assert {r.tags["veritas/inputs"] for r in changed} != {fingerprint}

    # a quarter later, the window moves on
    later = tick(schedule, instance, datetime(2026, 4, 8, 3, tzinfo=UTC), repo).run_requests
    assert [(r.partition_key, r.tags["veritas/refresh"]) for r in later] == [
        ("2026-01", "full"), ("2025-10", "ingestion"), ("2025-07", "ingestion")]
