"""The daemon runs the quarter (issue 52), as a maintainer deploys it: the real ``dagster-daemon run`` and
``dagster-webserver`` processes on the project's ``workspace.yaml``, the instance on a real PostgreSQL server
(tests/pg_support.py), the config's ``instance:`` section choosing it.

A small simulated quarter (the newest complete quarter at the time of the test: the one the quarterly schedule
refreshes in full) with the simulated model panel on loopback; the schedule's cron is set to every minute by the
config (``schedule: {enabled: true, cron: "* * * * *"}``). The schedule fires, its run goes through every stage to
the release, and the webserver's GraphQL shows the run as SUCCESS with its asset checks. Then a backfill of the
quarter, launched through GraphQL as the UI launches it: the daemon is killed (SIGKILL) while a run of it is under
way and started again; the backfill finishes, every stage's table written twice for the quarter is the same table,
and the release is byte for byte the scheduled run's."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from dagster_project.config import PROJECT_ROOT
from tests.ops_support import free_port, release_files
from tests.pg_support import postgres  # noqa: F401 - the fixture
from tests.simulated import SIM_KEY

URL_ENV = "VERITAS_TEST_PG_URL"
REVIEWS, RELEASE = 40, 10  # a 40-review quarter runs every stage in about 15 s in one process
STAGES = {"rectify": "all", "score": "all"}
CORE_CHECKS = (("reviews", "reviews_volume"), ("articles", "articles_scrape_success"),
               ("scored_claims", "scored_claims_quality"), ("release", "release_format"))
VOLATILE_COLUMNS = ("created",)  # when a row was written (predictions): differs on every run by design
BIN = Path(sys.executable).parent


def newest_complete_quarter() -> str:
    """The quarter the schedule refreshes in full now (``schedules.refresh_requests``)."""
    from dagster_project.partitions import quarter_of
    from dagster_project.schedules import previous_quarters

    return previous_quarters(quarter_of(datetime.now(UTC)), 1)[0]


class Deployment:
    """The daemon and the webserver of one instance, each in a process group of its own, their output in log files."""

    def __init__(self, folder: Path, env: dict):
        self.folder, self.env = folder, env
        self.port = free_port()
        self.daemons: list[subprocess.Popen] = []  # every daemon started, the killed ones too (their groups)
        self.webserver: subprocess.Popen | None = None

    def _start(self, name: str, cmd: list[str]) -> subprocess.Popen:
        with open(self.folder / f"{name}.log", "ab") as log:
            return subprocess.Popen(cmd, cwd=PROJECT_ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    def start_daemon(self) -> None:
        self.daemons.append(self._start("daemon", [str(BIN / "dagster-daemon"), "run", "-w",
                                                   str(PROJECT_ROOT / "workspace.yaml")]))

    def start_webserver(self) -> None:
        self.webserver = self._start("webserver", [str(BIN / "dagster-webserver"), "-w",
                                                   str(PROJECT_ROOT / "workspace.yaml"), "-h", "127.0.0.1", "-p",
                                                   str(self.port)])

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/graphql", method="POST",
                                         data=json.dumps({"query": query, "variables": variables or {}}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as answer:
            body = json.loads(answer.read())
        assert "errors" not in body, body["errors"]
        return body["data"]

    def wait_for_webserver(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.graphql("{ version }")["version"]:
                    return
            except OSError:
                pass
            if self.webserver.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the webserver did not answer GraphQL: {self.logs()}")
            time.sleep(1)

    def logs(self, chars: int = 3000) -> str:
        return " | ".join(f"{p.name}: {p.read_text(errors='replace')[-chars:]}"
                          for p in sorted(self.folder.glob("*.log")))

    def kill_daemon(self) -> None:
        """SIGKILL the daemon process alone, as a crash would: the run it launched lives on in its own process."""
        os.kill(self.daemons[-1].pid, signal.SIGKILL)
        self.daemons[-1].wait(30)

    def stop(self) -> None:
        import contextlib

        from tests.ops_support import stop_group

        for proc in [self.webserver, *reversed(self.daemons)]:
            if proc is not None:
                stop_group(proc, grace=20)
                with contextlib.suppress(ProcessLookupError):  # what a killed daemon left in its group
                    os.killpg(proc.pid, signal.SIGKILL)


def wait_for(what: str, probe, deployment: Deployment, timeout: float, every: float = 2.0):
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}: {deployment.logs()}")
        time.sleep(every)


@pytest.fixture(scope="module")
def deployed(postgres, tmp_path_factory):  # noqa: F811
    """The simulated quarter's config on PostgreSQL, its panel, the daemon and the webserver; yields what the tests
    need, and stops them all afterwards."""
    from dagster_project.config import load_config
    from dagster_project.core.instance import project_instance
    from dagster_project.simulation.panel import PanelConfig, PanelServer
    from dagster_project.simulation.quarter import QuarterConfig, generate
    from dagster_project.simulation.records import load_records
    from dagster_project.simulation.run import write_config

    folder = tmp_path_factory.mktemp("daemon")
    quarter = newest_complete_quarter()
    truth = generate(folder / "quarter", QuarterConfig(quarter=quarter, reviews=REVIEWS, video_share=0.0,
                                                       label_mix="balanced"), load_records(prefer_shared=False))
    with PanelServer(truth, PanelConfig(latency_median_s=0.0, faults={})) as server, \
            pytest.MonkeyPatch.context() as mp:
        cfg = write_config(folder, folder / "quarter", server, release_size=RELEASE, parallel_claims=4, stages=STAGES)
        settings = yaml.safe_load(Path(cfg).read_text())
        settings["schedule"] = {"enabled": True, "cron": "* * * * *"}
        settings["instance"] = {"storage": "postgres", "postgres_url_env": URL_ENV}
        Path(cfg).write_text(yaml.safe_dump(settings, sort_keys=False))
        for name, value in {**SIM_KEY, URL_ENV: postgres.create_database("daemon"), "VERITAS_CONFIG": cfg,
                            "DAGSTER_HOME": str(folder / "dagster")}.items():
            mp.setenv(name, value)
        config = load_config(cfg)
        instance = project_instance(config)  # writes dagster.yaml (PostgreSQL) and creates the tables once
        env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        deployment = Deployment(folder, env)
        try:
            deployment.start_webserver()
            deployment.start_daemon()
            deployment.wait_for_webserver()
            yield {"deployment": deployment, "instance": instance, "config": config, "quarter": quarter,
                   "server": server}
        finally:
            deployment.stop()
            instance.dispose()


def runs_of(instance, **tags):
    import dagster as dg

    return instance.get_runs(filters=dg.RunsFilter(tags=tags))


def releases(config: dict, quarter: str) -> list[Path]:
    root = Path(config["store"]["root"]) / "releases" / quarter
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def test_the_schedule_fires_and_its_run_reaches_the_release(deployed):
    import dagster as dg

    from dagster_project.partitions import to_key
    from dagster_project.schedules import previous_quarters

    deployment, instance, quarter = deployed["deployment"], deployed["instance"], deployed["quarter"]
    key = to_key(quarter)
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"

    # the tick: the quarter in full, ingestion for the two before it; every run ends in SUCCESS
    def tick_done():
        runs = runs_of(instance, **{"dagster/schedule_name": "quarterly_refresh_schedule"})
        failed = [r for r in runs if r.status in (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)]
        if failed:
            pytest.fail(f"a scheduled run failed: {[(r.run_id, r.tags.get('dagster/partition')) for r in failed]}: "
                        f"{deployment.logs()}")
        return runs if len(runs) == 3 and all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs) else None

    runs = wait_for("the schedule's three runs to succeed", tick_done, deployment, timeout=480)
    assert sorted((r.tags["dagster/partition"], r.tags["veritas/refresh"]) for r in runs) == sorted(
        [(key, "full")] + [(to_key(q), "ingestion") for q in previous_quarters(quarter, 2)])
    full = next(r for r in runs if r.tags["veritas/refresh"] == "full")
    (release,) = releases(deployed["config"], quarter)
    claims = json.loads((release / "claims.json").read_text())["claims"]
    assert 0 < len(claims) <= RELEASE

    # what the UI shows, through the webserver's GraphQL: the run, SUCCESS, and its asset checks
    data = deployment.graphql("""query($runId: ID!) { runOrError(runId: $runId) { __typename
        ... on Run { status jobName tags { key value } } } }""", {"runId": full.run_id})["runOrError"]
    assert data["__typename"] == "Run" and data["status"] == "SUCCESS", data
    tags = {t["key"]: t["value"] for t in data["tags"]}
    assert tags["dagster/schedule_name"] == "quarterly_refresh_schedule" and tags["dagster/partition"] == key
    for asset, check in CORE_CHECKS:
        executions = deployment.graphql("""query($asset: AssetKeyInput!, $check: String!) {
            assetCheckExecutions(assetKey: $asset, checkName: $check, limit: 10) {
              runId status partition evaluation { severity } } }""",
                                        {"asset": {"path": [asset]}, "check": check})["assetCheckExecutions"]
        # the check's evaluation (it names its quarter in its metadata), and the partition's planned execution,
        # which Dagster then shows as SKIPPED: none failed
        statuses = sorted(e["status"] for e in executions if e["runId"] == full.run_id)
        assert "SUCCEEDED" in statuses and set(statuses) <= {"SUCCEEDED", "SKIPPED"}, (asset, check, executions)
    health = deployment.graphql("{ instance { daemonHealth { allDaemonStatuses { daemonType healthy required } } } }")
    statuses = {d["daemonType"]: d["healthy"] for d in health["instance"]["daemonHealth"]["allDaemonStatuses"]
                if d["required"]}
    assert statuses.get("SCHEDULER") and statuses.get("BACKFILL") and statuses.get("QUEUED_RUN_COORDINATOR"), statuses


def test_a_daemon_killed_mid_backfill_restarts_and_the_backfill_gives_the_same_release(deployed):
    import dagster as dg

    from dagster_project.definitions import ASSET_NAMES
    from dagster_project.partitions import to_key
    from dagster_project.resources.store import StoreResource

    deployment, instance, quarter, config = (deployed[k] for k in ("deployment", "instance", "quarter", "config"))
    scheduled = releases(config, quarter)
    assert len(scheduled) == 1, "the scheduled run's release is missing (the test before failed)"
    key = to_key(quarter)
    served = deployed["server"].panel.counters()["served"]

    # the backfill of every stage of the quarter, as the UI's Materialize dialog launches it
    selection = [{"assetKey": {"path": ["review_snapshot"]}}] + [
        {"assetKey": {"path": [a]}, "partitions": {"range": {"start": key, "end": key}}} for a in ASSET_NAMES]
    launched = deployment.graphql("""mutation($params: LaunchBackfillParams!) {
        launchPartitionBackfill(backfillParams: $params) { __typename
          ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }""",
                                  {"params": {"partitionsByAssets": selection}})["launchPartitionBackfill"]
    assert launched["__typename"] == "LaunchBackfillSuccess", launched
    backfill_id = launched["backfillId"]

    # kill the daemon while a run of the backfill is under way, after one has finished
    def mid_backfill():
        runs = runs_of(instance, **{"dagster/backfill": backfill_id})
        done = [r for r in runs if r.status == dg.DagsterRunStatus.SUCCESS]
        going = [r for r in runs if r.status == dg.DagsterRunStatus.STARTED]
        if instance.get_backfill(backfill_id).status.value != "REQUESTED":
            pytest.fail(f"the backfill ended before the daemon could be killed: {deployment.logs()}")
        return going if done and going else None

    in_flight = wait_for("a run of the backfill under way after a finished one", mid_backfill, deployment,
                         timeout=420, every=0.5)
    deployment.kill_daemon()
    time.sleep(5)
    assert instance.get_backfill(backfill_id).status.value == "REQUESTED"
    deployment.start_daemon()

    def finished():
        status = instance.get_backfill(backfill_id).status.value
        return status if status != "REQUESTED" else None

    assert wait_for("the backfill to finish", finished, deployment, timeout=480) == "COMPLETED_SUCCESS", \
        deployment.logs()
    data = deployment.graphql("""query($id: String!) { partitionBackfillOrError(backfillId: $id) { __typename
        ... on PartitionBackfill { status } } }""", {"id": backfill_id})["partitionBackfillOrError"]
    assert data == {"__typename": "PartitionBackfill", "status": "COMPLETED_SUCCESS"}
    runs = runs_of(instance, **{"dagster/backfill": backfill_id})
    assert in_flight[0].run_id in {r.run_id for r in runs}
    assert instance.get_run_by_id(in_flight[0].run_id).status == dg.DagsterRunStatus.SUCCESS  # it outlived the daemon

    # every step of the quarter that ran more than once (the schedule's run, the backfill, any retry) wrote the same
    # table each time, and the release is the scheduled run's, byte for byte
    store = StoreResource(root=config["store"]["root"])
    for asset in ASSET_NAMES:
        versions = store.versions(asset, quarter)
        if asset != "release":
            assert len(versions) >= 2, (asset, versions)
        tables = [store.read_table(asset, quarter, v) for v in versions]
        tables = [t.drop([c for c in VOLATILE_COLUMNS if c in t.columns]) for t in tables]
        assert all(t.equals(tables[0]) for t in tables), f"{asset}: a run wrote another table"
    steps: dict[str, int] = {}
    for run in runs:
        for record in instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.STEP_SUCCESS).records:
            steps[record.event_log_entry.step_key] = steps.get(record.event_log_entry.step_key, 0) + 1
    assert set(ASSET_NAMES) <= set(steps), steps
    built = releases(config, quarter)
    assert len(built) == 1 + steps["release"], built
    for folder in built[1:]:
        assert release_files(folder) == release_files(scheduled[0]), folder
    assert deployed["server"].panel.counters()["served"] == served  # the backfill's answers came from the LLM cache
