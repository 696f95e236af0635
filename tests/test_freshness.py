"""Issue 52, freshness: a finished quarter without a release ``freshness.days`` after its end fails
``release_freshness`` and alerts; a quarter with its release passes. A ClaimReview feed seen unchanged for longer
than ``freshness.feed_days`` and than any quiet spell before warns through ``feed_freshness`` and alerts. The
``freshness_alert`` sensor records both checks' results on each tick and alerts once per problem."""

import json
import time
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from dagster_project import freshness
from dagster_project.alerts import AlertsResource, FreshnessSettings
from dagster_project.config import load_config
from dagster_project.freshness import (
    due_quarters,
    feed_history,
    feed_verdict,
    quarter_end,
    release_verdict,
)
from dagster_project.partitions import quarterly_partitions
from dagster_project.sensors import alert_sensors
from tests.conftest import write_demo_config
from tests.test_alerts import Webhook

DAY = 86400.0
NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)  # 2026Q3 ended on 1 October; its release was due on 22 October


# ---- the rules, on plain values -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("now", "days", "count", "expected"), [
    (datetime(2026, 10, 21, 23, 59, tzinfo=UTC), 21, 2, ["2026Q2", "2026Q1"]),  # 2026Q3 not due yet
    (datetime(2026, 10, 22, 0, 0, tzinfo=UTC), 21, 2, ["2026Q3", "2026Q2"]),  # due at midnight, 21 days after
    (datetime(2026, 10, 2, tzinfo=UTC), 0, 3, ["2026Q3", "2026Q2", "2026Q1"]),
    (datetime(2016, 5, 1, tzinfo=UTC), 21, 4, ["2016Q1"]),  # none before the first partition
    (datetime(2016, 1, 5, tzinfo=UTC), 21, 4, []),
])
def test_the_quarters_watched_are_the_newest_whose_release_is_due(now, days, count, expected):
    assert due_quarters(now, days, count) == expected


def test_a_quarter_ends_at_midnight_utc_of_the_next_quarter():
    assert quarter_end("2025Q4") == datetime(2026, 1, 1, tzinfo=UTC)
    assert quarter_end("2026Q1") == datetime(2026, 4, 1, tzinfo=UTC)


def test_a_late_quarter_fails_and_a_released_one_passes():
    settings = FreshnessSettings(days=21, quarters=2)
    late = release_verdict(NOW, settings, released={"2026Q2"})
    assert not late.passed and list(late.problems) == ["release:2026Q3"]
    assert "no release for 2026Q3: it was due 2026-10-22, 21 days after the quarter's end (11 days ago)" in \
        late.problems["release:2026Q3"]
    assert late.metadata["late"].value == ["2026Q3"] and late.metadata["watched"].value == ["2026Q3", "2026Q2"]
    done = release_verdict(NOW, settings, released={"2026Q2", "2026Q3"})
    assert done.passed and done.problems == {} and "every watched quarter has its release" in done.note


def spans(*days_and_fingerprints) -> list[tuple[float, str]]:
    base = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    return [(base + d * DAY, fp) for d, fp in days_and_fingerprints]


@pytest.mark.parametrize(("history", "stale", "unchanged", "limit"), [
    ([], False, None, None),  # never materialized: nothing to judge
    (spans((0, "a")), False, 0.0, 14.0),
    (spans((0, "a"), (10, "a"), (14, "a")), False, 14.0, 14.0),  # exactly the limit is not longer than it
    (spans((0, "a"), (10, "a"), (15, "a")), True, 15.0, 14.0),
    (spans((0, "a"), (3, "b"), (5, "b"), (25, "b")), True, 22.0, 14.0),
    (spans((0, "a"), (30, "b"), (40, "b"), (55, "b")), False, 25.0, 30.0),  # a monthly feed: quiet spells of 30 days
    (spans((0, "a"), (30, "b"), (40, "b"), (61, "b")), True, 31.0, 30.0),
    (spans((0, "a"), (20, "a"), (21, "b")), False, 0.0, 21.0),  # it changed at the last look
])
def test_the_feed_is_stale_once_seen_unchanged_longer_than_feed_days_and_any_earlier_quiet_spell(
        history, stale, unchanged, limit):
    verdict = feed_verdict(history, FreshnessSettings(feed_days=14), NOW)
    assert verdict.passed is not stale
    assert bool(verdict.problems) is stale
    if unchanged is not None:
        assert verdict.metadata["unchanged_days"] == unchanged and verdict.metadata["limit_days"] == limit


# ---- the checks and the sensor on a Dagster instance ----------------------------------------------------------------

@pytest.fixture
def webhook(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    hook = Webhook()
    yield hook
    hook.server.shutdown()
    hook.server.server_close()


@pytest.fixture
def at_now(monkeypatch):
    monkeypatch.setattr(freshness, "utc_now", lambda: NOW)


@contextmanager
def recorded_at(moment: datetime):
    """Events the instance records inside are stamped ``moment`` (Dagster stamps them with ``time.time()``)."""
    real = time.time
    time.time = lambda: moment.timestamp()
    try:
        yield
    finally:
        time.time = real


def released(instance: dg.DagsterInstance, quarter_key: str, when: datetime) -> None:
    """A materialization of ``release`` for a quarter, as a run that built it records one."""
    with recorded_at(when):
        instance.report_runless_asset_event(dg.AssetMaterialization(asset_key="release", partition=quarter_key))


def snapshot(instance: dg.DagsterInstance, fingerprint: str, when: datetime) -> None:
    """A materialization of ``review_snapshot`` with its fingerprint, as the asset records it."""
    with recorded_at(when):
        instance.report_runless_asset_event(dg.AssetMaterialization(asset_key="review_snapshot",
                                                                     metadata={"fingerprint": fingerprint}))


def latest_check(instance: dg.DagsterInstance, asset: str, check: str):
    (record,) = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey(asset), check), limit=1)
    return record.evaluation


def tick(sensor, instance, alerts, settings, cursor=None):
    with dg.build_sensor_context(instance=instance, cursor=cursor,
                                 resources={"alerts": alerts, "freshness": settings}) as context:
        result = sensor.evaluate_tick(context)
        return result, context.cursor


def test_a_late_release_fails_its_check_and_alerts_once_and_a_released_quarter_passes(webhook, at_now):
    alerts = AlertsResource(webhook_url=webhook.url, ui_url="http://127.0.0.1:3999", backoff_s=0)
    settings = FreshnessSettings(days=21, quarters=2)
    sensor = alert_sensors(alerts)[1]
    assert sensor.name == "freshness_alert"
    with dg.instance_for_test() as instance:
        released(instance, "2026-04", datetime(2026, 7, 10, tzinfo=UTC))  # 2026Q2, in time

        result, cursor = tick(sensor, instance, alerts, settings)
        assert "release_freshness: FAILED" in result.skip_message and "alerted 1 new problem" in result.skip_message
        (text,) = webhook.texts()
        assert "no release for 2026Q3: it was due 2026-10-22" in text and "2026Q2" not in text
        assert "link: http://127.0.0.1:3999/assets/release?view=checks" in text
        check = latest_check(instance, "release", "release_freshness")
        assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
        assert check.metadata["late"].value == ["2026Q3"] and check.metadata["watched"].value == ["2026Q3", "2026Q2"]

        result, cursor = tick(sensor, instance, alerts, settings, cursor)  # the next tick: still late, said once
        assert len(webhook.posts) == 1 and "nothing new to alert" in result.skip_message

        released(instance, "2026-07", datetime(2026, 11, 1, tzinfo=UTC))  # 2026Q3, late but there now
        result, cursor = tick(sensor, instance, alerts, settings, cursor)
        assert result.skip_message.startswith("release_freshness: passed; feed_freshness: passed")
        assert len(webhook.posts) == 1 and json.loads(cursor) == []
        assert latest_check(instance, "release", "release_freshness").passed


def test_a_stale_feed_warns_and_alerts_and_a_changed_feed_clears_it(webhook, at_now):
    alerts = AlertsResource(webhook_url=webhook.url, backoff_s=0)
    settings = FreshnessSettings(days=21, quarters=1, feed_days=14)
    sensor = alert_sensors(alerts)[1]
    with dg.instance_for_test() as instance:
        released(instance, "2026-07", datetime(2026, 10, 20, tzinfo=UTC))
        for day, fingerprint in ((1, "a1"), (4, "b2"), (9, "b2"), (30, "b2")):
            snapshot(instance, fingerprint, datetime(2026, 10, day, tzinfo=UTC))
        assert [fp for _, fp in feed_history(instance)] == ["a1", "b2", "b2", "b2"]

        result, cursor = tick(sensor, instance, alerts, settings)
        assert "feed_freshness: FAILED" in result.skip_message and "release_freshness: passed" in result.skip_message
        (text,) = webhook.texts()
        assert "the ClaimReview feed has not changed for 26 days (since 2026-10-04, last looked at 2026-10-30" in text
        assert "link: http://127.0.0.1:3000/assets/review_snapshot?view=checks" in text
        check = latest_check(instance, "review_snapshot", "feed_freshness")
        assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
        assert check.metadata["fingerprint"].value == "b2" and check.metadata["unchanged_days"].value == 26.0

        snapshot(instance, "c3", datetime(2026, 11, 1, tzinfo=UTC))
        result, cursor = tick(sensor, instance, alerts, settings, cursor)
        assert "feed_freshness: passed" in result.skip_message and len(webhook.posts) == 1
        assert latest_check(instance, "review_snapshot", "feed_freshness").passed


def test_an_alert_not_delivered_fails_the_tick_and_is_sent_again_on_the_next(webhook, at_now):
    alerts = AlertsResource(webhook_url=webhook.url, attempts=2, backoff_s=0)
    settings = FreshnessSettings(days=21, quarters=1)
    sensor = alert_sensors(alerts)[1]
    with dg.instance_for_test() as instance:
        webhook.statuses = [500, 500]
        with (dg.build_sensor_context(instance=instance, resources={"alerts": alerts, "freshness": settings}) as ctx,
              pytest.raises(Exception, match="not delivered to webhook http://127.0.0.1")):
            sensor.evaluate_tick(ctx)
        assert len(webhook.posts) == 2 and ctx.cursor is None  # the problem stays unalerted
        assert not latest_check(instance, "release", "release_freshness").passed  # recorded all the same

        _, cursor = tick(sensor, instance, alerts, settings, ctx.cursor)
        assert len(webhook.posts) == 3 and "no release for 2026Q3" in webhook.texts()[-1]
        assert json.loads(cursor) == ["release:2026Q3"]


# ---- the checks run in a run too, after their asset ----------------------------------------------------------------

@dg.asset(name="release", partitions_def=quarterly_partitions)
def release_stand_in() -> None:
    """Stands for the release asset: what the check reads is its materialization for the quarter."""


def test_the_release_check_run_after_the_release_counts_it(at_now):
    resources = {"freshness": FreshnessSettings(days=21, quarters=2)}
    with dg.instance_for_test() as instance:
        released(instance, "2026-04", datetime(2026, 7, 10, tzinfo=UTC))
        run = dg.materialize([release_stand_in, freshness.release_freshness], partition_key="2026-07",
                             resources=resources, instance=instance)
        (evaluation,) = run.get_asset_check_evaluations()
        assert evaluation.passed and evaluation.metadata["watched"].value == ["2026Q3", "2026Q2"]


def test_the_feed_check_reads_the_fingerprint_the_real_snapshot_records(tmp_path: Path, at_now):
    """``review_snapshot`` of the demo feed, then ``feed_freshness`` after it in the same run: the check finds the
    snapshot's fingerprint (its data version) in the instance."""
    from assets.ingestion.reviews import review_snapshot
    from dagster_project.definitions import build_resources

    config = load_config(write_demo_config(tmp_path))
    resources = {**build_resources(config), "freshness": FreshnessSettings()}
    with dg.instance_for_test() as instance:
        run = dg.materialize([review_snapshot, freshness.feed_freshness], resources=resources, instance=instance)
        (evaluation,) = run.get_asset_check_evaluations()
        (materialization,) = run.asset_materializations_for_node("review_snapshot")
    fingerprint = materialization.metadata["fingerprint"].value
    assert evaluation.passed and evaluation.metadata["fingerprint"].value == fingerprint
    assert evaluation.metadata["changes_seen"].value == 1 and len(fingerprint) >= 16
