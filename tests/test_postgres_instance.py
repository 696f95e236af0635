"""The Dagster instance on PostgreSQL (issue 52): the config's ``instance:`` section chooses the storage, and the
``dagster.yaml`` the project writes follows it (the URL, password included, only ever in the environment); a file of
the user's own is left alone. A quarter run on a real PostgreSQL server (tests/pg_support.py) is read back by the
history readers (``veritas yields``) exactly as the same run on SQLite is read by the fast SQLite reader."""

import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dagster_project.config import PROJECT_ROOT, ConfigError, load_config
from dagster_project.core.instance import (
    EVENT_LOG,
    LEGACY,
    MARKER,
    SETTINGS,
    project_instance,
    storage_of,
    write_settings,
)
from tests.conftest import write_demo_config
from tests.pg_support import postgres  # noqa: F401 - the fixture

URL_ENV = "VERITAS_TEST_PG_URL"
QUARTER = "2020Q2"
STAGES = ("review_snapshot", "reviews", "trusted_reviews")


def demo_config(folder: Path, **sections) -> str:
    """The demo config in ``folder`` with extra top-level sections (``instance={...}``)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = Path(write_demo_config(folder))
    cfg = yaml.safe_load(path.read_text())
    cfg.update(sections)
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


@pytest.fixture
def home(tmp_path, monkeypatch):
    """An instance folder of its own (``DAGSTER_HOME``), restored after the test."""
    folder = tmp_path / "dagster_home"
    monkeypatch.setenv("DAGSTER_HOME", str(folder))
    return folder


def test_dagster_yaml_follows_the_config_and_keeps_a_users_own(tmp_path, home, monkeypatch):
    monkeypatch.setenv(URL_ENV, "postgresql://veritas:s3cret-pw@127.0.0.1:1/veritas")
    sqlite = load_config(demo_config(tmp_path / "a"))
    postgres_cfg = load_config(demo_config(tmp_path / "b", instance={"storage": "postgres",
                                                                     "postgres_url_env": URL_ENV}))
    settings = home / "dagster.yaml"

    # SQLite (the default): the consolidated event log, the run queue, the daemon's monitoring and retries
    assert write_settings(sqlite) == (settings, "written")
    text = settings.read_text()
    chosen = yaml.safe_load(text)
    assert text.startswith(MARKER + "\n") and storage_of(text) == "sqlite"
    assert chosen["event_log_storage"]["class"] == "ConsolidatedSqliteEventLogStorage"
    assert chosen["run_monitoring"] == {"enabled": True} and chosen["run_retries"] == {"enabled": True}
    assert chosen["telemetry"] == {"enabled": False} and chosen["run_queue"]["max_concurrent_runs"] >= 1
    written_at = settings.stat().st_mtime_ns
    assert write_settings(sqlite) == (settings, "unchanged") and settings.stat().st_mtime_ns == written_at

    # PostgreSQL: runs, events and schedules there; the file names the variable, never the URL or its password
    assert write_settings(postgres_cfg) == (settings, "written")
    text = settings.read_text()
    chosen = yaml.safe_load(text)
    assert chosen["storage"] == {"postgres": {"postgres_url": {"env": URL_ENV}}} and storage_of(text) == "postgres"
    assert "event_log_storage" not in chosen and "s3cret" not in text and "127.0.0.1" not in text
    assert {k: chosen[k] for k in ("telemetry", "run_queue", "code_servers", "run_monitoring", "run_retries")} == {
        k: v for k, v in yaml.safe_load(SETTINGS + "run_monitoring:\n  enabled: true\nrun_retries:\n  enabled: true\n"
                                        ).items()}
    # back to SQLite: the project's file follows again
    assert write_settings(sqlite)[1] == "written" and storage_of(settings.read_text()) == "sqlite"

    # a file of the user's own (no marker) is kept byte for byte, and used as it is
    own = f"# my instance\ntelemetry:\n  enabled: false\nstorage:\n  sqlite:\n    base_dir: {json.dumps(str(home))}\n"
    settings.write_text(own)
    assert write_settings(sqlite) == (settings, "own file") and settings.read_text() == own
    # ... unless the config asks for another storage than it keeps: one line that says what to do
    with pytest.raises(ConfigError) as refused:
        write_settings(postgres_cfg)
    message = str(refused.value)
    assert "\n" not in message and "is your own" in message and "delete that file" in message and "postgres" in message
    assert settings.read_text() == own

    # the file an earlier version wrote (no marker) is the project's: rewritten
    legacy = SETTINGS + EVENT_LOG.format(base_dir=json.dumps(str(home / "history")))
    assert LEGACY.fullmatch(legacy)
    settings.write_text(legacy)
    assert write_settings(postgres_cfg)[1] == "written" and storage_of(settings.read_text()) == "postgres"

    # the instance Dagster opens from the project's SQLite file has the daemon's monitoring and retries on
    write_settings(sqlite)
    with project_instance(sqlite) as instance:
        assert instance.run_monitoring_enabled and instance.run_retries_enabled
        assert type(instance.event_log_storage).__name__ == "ConsolidatedSqliteEventLogStorage"


def test_the_instance_section_is_checked_and_holds_no_url(tmp_path):
    good = load_config(demo_config(tmp_path / "ok", instance={"storage": "postgres"}))
    assert good["instance"] == {"storage": "postgres"}
    for name, section, said in (
            ("kind", {"storage": "mysql"}, "instance.storage"),
            ("url", {"storage": "postgres", "postgres_url_env": "postgresql://u:pw@db:5432/x"},
             "instance.postgres_url_env: must be the NAME of a variable"),
            ("typo", {"storage": "postgres", "postgres_url": "x"}, "did you mean postgres_url_env?")):
        with pytest.raises(ConfigError) as refused:
            load_config(demo_config(tmp_path / name, instance=section))
        assert said in str(refused.value) and "\n" not in str(refused.value), str(refused.value)
        assert ":pw@" not in str(refused.value)  # a secret put where a name belongs is not echoed


def test_a_missing_url_or_an_unreachable_server_is_one_line(tmp_path, home, monkeypatch):
    from tests.ops_support import free_port

    config = load_config(demo_config(tmp_path, instance={"storage": "postgres", "postgres_url_env": URL_ENV}))
    monkeypatch.delenv(URL_ENV, raising=False)
    with pytest.raises(ConfigError) as missing:
        project_instance(config)
    assert f"${URL_ENV} is not set" in str(missing.value) and "\n" not in str(missing.value)
    port = free_port()  # nothing listens there
    monkeypatch.setenv(URL_ENV, f"postgresql://veritas:s3cret-pw@127.0.0.1:{port}/veritas")
    with pytest.raises(ConfigError) as unreachable:
        project_instance(config)
    message = str(unreachable.value)
    assert f"127.0.0.1:{port}/veritas cannot be used" in message and "s3cret" not in message and "\n" not in message


def volatile_free(found, data_dir: Path):
    """A history answer without what names its run or its config: the timestamp, the table version the run wrote,
    the data dir in the paths it reports."""
    if found is None:
        return None
    metadata = {k: v for k, v in found["metadata"].items() if k != "version"}
    return json.loads(json.dumps(metadata).replace(str(data_dir), "<data_dir>"))


def test_the_history_readers_give_on_postgres_what_they_give_on_sqlite(postgres, tmp_path, monkeypatch):  # noqa: F811
    """2020Q2's ingestion on SQLite and on PostgreSQL: what `veritas yields` reads from the PostgreSQL instance (through
    Dagster's API) equals what it reads from the SQLite one (straight from the SQLite file), check results included;
    the pool limits are set on the PostgreSQL instance."""
    from dagster_project.core.instance_records import (
        YIELD_CHECK_KEYS,
        InstanceHistory,
        SqliteHistory,
        event_log_file,
        open_history,
    )
    from dagster_project.quarter_run import run_quarter

    lite = demo_config(tmp_path / "sqlite")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "sqlite" / "data" / "dagster"))
    assert run_quarter(lite, QUARTER, until="trusted_reviews")
    fast = open_history(load_config(lite))
    assert isinstance(fast, SqliteHistory)

    monkeypatch.setenv(URL_ENV, postgres.create_database("history"))
    pg = demo_config(tmp_path / "pg", instance={"storage": "postgres", "postgres_url_env": URL_ENV},
                     pools={"llm": 2, "web": 3})
    pg_home = tmp_path / "pg" / "data" / "dagster"
    monkeypatch.setenv("DAGSTER_HOME", str(pg_home))
    assert run_quarter(pg, QUARTER, until="trusted_reviews")
    assert event_log_file(pg_home) is None and not (pg_home / "history").exists()  # nothing went to SQLite files
    slow = open_history(load_config(pg))
    assert isinstance(slow, InstanceHistory)
    assert type(slow.instance.run_storage).__name__ == "PostgresRunStorage"
    assert type(slow.instance.event_log_storage).__name__ == "PostgresEventLogStorage"
    assert type(slow.instance.schedule_storage).__name__ == "PostgresScheduleStorage"
    assert {p: slow.instance.event_log_storage.get_concurrency_info(p).slot_count for p in ("llm", "web")} == {
        "llm": 2, "web": 3}

    for stage in (*STAGES, "articles"):
        assert (volatile_free(slow.materialization(stage, QUARTER), tmp_path / "pg")
                == volatile_free(fast.materialization(stage, QUARTER), tmp_path / "sqlite")), stage
    assert slow.materialization("reviews", QUARTER)["metadata"]["rows_out"] == 16
    for asset, check in YIELD_CHECK_KEYS:
        got = [{k: v for k, v in e.items() if k != "run_id"} for e in slow.check_evaluations(asset, check)]
        assert got == [{k: v for k, v in e.items() if k != "run_id"} for e in fast.check_evaluations(asset, check)]
    assert [e["metadata"]["quarter"] for e in slow.check_evaluations("reviews", "reviews_volume")] == [QUARTER]

    # the command itself, in a process of its own, given only the variable: the same report as on SQLite
    def yields(cfg: str) -> dict:
        env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
        done = subprocess.run([sys.executable, "-m", "dagster_project.cli", "--config", cfg, "yields", "--quarter",
                               QUARTER, "--json"], cwd=PROJECT_ROOT, capture_output=True, text=True, env=env,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout.replace(str(Path(cfg).parent), "<folder>"))
        for stage in report["stages"].values():  # what names the run: the table version, when it was written
            del stage["version"], stage["materialized"]
        for check in report["checks"].values():
            del check["run_id"]
        return report

    on_sqlite, on_postgres = yields(lite), yields(pg)
    assert list(on_postgres["stages"]) == ["reviews", "trusted_reviews"]
    assert on_postgres["stages"] == on_sqlite["stages"] and on_postgres["checks"] == on_sqlite["checks"]


def alive_in_groups(groups: list[int]) -> list[str]:
    """The processes still running (not zombies left to a PID 1 that reaps none) in the process groups."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) in groups and fields[0] != "Z":
            alive.append(stat.parent.name)
    return alive


def test_serve_starts_postgres_the_daemon_and_the_webserver_and_ctrl_c_stops_them(tmp_path):
    """`veritas serve` with instance.local_cluster: it creates and starts the cluster, writes dagster.yaml, starts
    the daemon and the webserver (GraphQL answers, the daemon's heartbeats arrive); another `veritas` command finds
    the cluster's URL without the variable; Ctrl-C (SIGINT) stops every process and the cluster, and exits 0."""
    import signal
    import tempfile
    import time
    import urllib.request

    from dagster_project.commands.serve import MISSING_SERVER, server_binaries
    from tests.ops_support import free_port

    if server_binaries() is None:
        pytest.skip(MISSING_SERVER)
    outside = Path(tempfile.mkdtemp(prefix="veritas-serve-"))  # as root, the postgres user must reach the cluster
    outside.chmod(0o711)
    pg_port, ui_port = free_port(), free_port()
    cfg = demo_config(tmp_path, instance={"storage": "postgres", "postgres_url_env": URL_ENV,
                                          "local_cluster": str(outside / "pg"), "local_port": pg_port})
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", URL_ENV)}
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        serve = subprocess.Popen([sys.executable, "-m", "dagster_project.cli", "--config", cfg, "serve", "--port",
                                  str(ui_port)], cwd=PROJECT_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True)
    try:
        def graphql(query: str) -> dict:
            request = urllib.request.Request(f"http://127.0.0.1:{ui_port}/graphql", method="POST",
                                             data=json.dumps({"query": query}).encode(),
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=60) as answer:
                return json.loads(answer.read())["data"]

        health = "{ instance { daemonHealth { allDaemonStatuses { daemonType healthy required } } } }"
        deadline = time.monotonic() + 300
        while True:
            try:
                statuses = graphql(health)["instance"]["daemonHealth"]["allDaemonStatuses"]
                if all(s["healthy"] for s in statuses if s["required"]):
                    break
            except OSError:
                pass
            assert serve.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(1)
        printed = log.read_text()
        assert "[serve] creating the PostgreSQL cluster" in printed and f"127.0.0.1:{pg_port}" in printed
        pids = [int(p) for p in re.findall(r"(?:daemon|webserver) pid (\d+)", printed)]
        assert len(pids) == 2, printed
        settings = (tmp_path / "data" / "dagster" / "dagster.yaml").read_text()
        assert yaml.safe_load(settings)["storage"] == {"postgres": {"postgres_url": {"env": URL_ENV}}}
        url_file = outside / "pg" / "veritas-url"
        assert oct(url_file.stat().st_mode & 0o777) == "0o600" and url_file.read_text().split(":")[2].split("@")[0] \
            not in settings  # the password is in the cluster's URL file only
        # another command, without the variable: the URL from the running local cluster
        done = subprocess.run([sys.executable, "-m", "dagster_project.cli", "--config", cfg, "yields", "--quarter",
                               QUARTER, "--json"], cwd=PROJECT_ROOT, capture_output=True, text=True, env=env,
                              timeout=300)
        assert done.returncode == 0 and json.loads(done.stdout)["stages"] == {}, done.stderr

        serve.send_signal(signal.SIGINT)  # what Ctrl-C sends
        assert serve.wait(120) == 0, log.read_text()[-3000:]
        printed = log.read_text()
        assert "SIGINT received" in printed and "[serve] stopping PostgreSQL" in printed
        assert not alive_in_groups(pids), alive_in_groups(pids)  # the daemon, the webserver and their children
        import socket

        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", pg_port)) != 0  # the cluster stopped
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
        for group in (int(p) for p in re.findall(r"(?:daemon|webserver) pid (\d+)", log.read_text())):
            with contextlib.suppress(ProcessLookupError):  # in sessions of their own: a killed serve leaves them
                os.killpg(group, signal.SIGKILL)
        from dagster_project.commands.serve import PostgresCluster

        PostgresCluster(outside / "pg", pg_port).stop()
        import shutil

        shutil.rmtree(outside, ignore_errors=True)
