"""The project's Dagster instance: a persistent one under the data dir (``dagster dev`` with the same
``DAGSTER_HOME`` shows the same runs and backfills), with the config's pool limits set on it."""

import json
import os
from pathlib import Path

from dagster_project.core.dagster_private import PRIVATE

# runs wait in the instance's queue; as many run at once as there are cores (each run is a process of its own); a
# code server on a busy machine may take minutes to import the definitions
SETTINGS = (f"telemetry:\n  enabled: false\nrun_queue:\n  max_concurrent_runs: {os.cpu_count() or 2}\n"
            "code_servers:\n  local_startup_timeout: 900\n")
# all events in one SQLite file in WAL mode: Dagster's default opens, creates and syncs a database file per run,
# which cost about 2 s a run (more than a quarter's ingestion) in a 42-quarter backfill
EVENT_LOG_MODULE, EVENT_LOG_CLASS = PRIVATE["ConsolidatedSqliteEventLogStorage"]
EVENT_LOG = (f"event_log_storage:\n  module: {EVENT_LOG_MODULE}\n  class: {EVENT_LOG_CLASS}\n"
             "  config:\n    base_dir: {base_dir}\n")


def apply_pools(instance, config: dict) -> dict[str, int]:
    """Set the instance's pool limits from the config's ``pools:`` (e.g. {llm: 2, web: 4}); others stay as they are.

    The limits live in the instance's storage, so they bind every run of it, whoever launches it (the CLI, a
    backfill, the UI, a schedule)."""
    for pool, limit in config.get("pools", {}).items():
        instance.event_log_storage.set_concurrency_slots(pool, limit)
    return config.get("pools", {})


def instance_home(config: dict) -> Path:
    """The instance folder: ``$DAGSTER_HOME``, else ``<data_dir>/dagster``."""
    return Path(os.environ.get("DAGSTER_HOME") or Path(config["data_dir"]) / "dagster")


def project_instance(config: dict):
    """The instance of ``$DAGSTER_HOME``, else ``<data_dir>/dagster``; ``DAGSTER_HOME`` is set to it, so that run
    workers and code servers started from here open the same one."""
    import dagster as dg

    home = instance_home(config)
    home.mkdir(parents=True, exist_ok=True)
    settings = home / "dagster.yaml"
    if not settings.exists():
        settings.write_text(SETTINGS + EVENT_LOG.format(base_dir=json.dumps(str(home.resolve() / "history"))))
    os.environ["DAGSTER_HOME"] = str(home)
    instance = dg.DagsterInstance.get()
    apply_pools(instance, config)
    return instance
