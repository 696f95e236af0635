"""A batched run (a backfill's range of quarters in one run, ``stages.quarters_per_run``) works on its quarters in
``QUARTER_THREADS`` threads: each quarter's materialization still gets its own metadata, in quarter order, and a
quarter that raises fails the run without the quarters not yet begun being worked on. The quarters' yields go to
the run's log in one message."""

import threading
import time

import dagster as dg
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
)

from assets.stage.tables import StageYield
from assets.stage.wiring import PARTITIONS, QUARTER_THREADS, each_quarter
from dagster_project.partitions import to_label

RANGE = {ASSET_PARTITION_RANGE_START_TAG: "2020-01", ASSET_PARTITION_RANGE_END_TAG: "2021-10"}  # 8 quarters


def probe_asset(ran: list[str], failing: str | None, threads: set[str]):
    @dg.asset(partitions_def=PARTITIONS, name="probe")
    def probe(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        def one(quarter: str) -> dict:
            ran.append(quarter)
            threads.add(threading.current_thread().name)
            time.sleep(0.3 if quarter != "2020Q1" else 0.6)  # the first quarter ends after the second
            if quarter == failing:
                raise ValueError(f"{quarter} is broken")
            stats = StageYield(rows_in=10)
            stats.drop("duplicate", 3)
            return {**stats.metadata(7), "quarter": quarter}

        return each_quarter(context, one)

    return probe


def test_each_quarter_gets_its_own_metadata_in_order():
    ran, threads = [], set()
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([probe_asset(ran, None, threads)], instance=instance, tags=RANGE)
        assert result.success
        records = instance.fetch_materializations(dg.AssetKey("probe"), limit=20, ascending=True).records
        by_quarter = {to_label(r.partition_key): r.asset_materialization.metadata["quarter"].value for r in records}
        logs = [e.user_message for e in instance.all_logs(result.run_id) if e.dagster_event is None]
    quarters = ["2020Q1", "2020Q2", "2020Q3", "2020Q4", "2021Q1", "2021Q2", "2021Q3", "2021Q4"]
    assert by_quarter == {q: q for q in quarters}
    assert sorted(ran) == quarters and len(threads) == QUARTER_THREADS == 2
    assert [log for log in logs if "probe 20" in log] == [
        "\n".join(f"probe {q}: 10 in, 7 out, drops {{'duplicate': 3}}" for q in quarters)]


def test_a_quarter_that_raises_fails_the_run_and_the_quarters_not_begun_are_not_worked_on():
    ran, threads = [], set()
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([probe_asset(ran, "2020Q3", threads)], instance=instance, tags=RANGE,
                                raise_on_error=False)
        assert not result.success
        failure = next(e for e in result.all_events if e.is_step_failure)
        assert "2020Q3 is broken" in failure.step_failure_data.error.cause.message
        assert not instance.fetch_materializations(dg.AssetKey("probe"), limit=20).records
    # 2020Q3 raised 0.6 s in; the quarters in the threads by then end, the others never begin
    assert "2020Q3" in ran and len(ran) <= 5 and "2021Q4" not in ran
