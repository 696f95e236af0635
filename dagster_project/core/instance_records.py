"""What the Dagster instance recorded about a quarter: the latest materialization of each stage and the latest
result of each yield-band check, as plain values.

Read-only commands (``veritas yields``) read it without importing Dagster, which alone takes longer than their
2 s target: an instance with Dagster's SQLite event log (the default, or the consolidated one) is read straight
from that database (its event JSON is Dagster's stable serialization). Any other storage (Postgres, a custom
event log) goes through the instance's API. ``tests/test_cli_fast.py`` holds both readers equal on a real instance."""

import json
import sqlite3
from contextlib import closing
from pathlib import Path

from dagster_project.core.dagster_private import private
from dagster_project.core.instance import instance_home, project_instance
from dagster_project.core.quarters import to_key

# (asset, check) of checks.YIELD_CHECKS; named here so that `veritas yields` need not import the checks' stages
YIELD_CHECK_KEYS = (("reviews", "reviews_volume"), ("articles", "articles_scrape_success"))
STORAGE_KEYS = {"storage", "run_storage", "event_log_storage", "schedule_storage"}  # anything but the default


def latest_materialization(instance, asset: str, quarter: str):
    """The latest materialization record of ``asset`` for ``quarter`` through the instance's API, or None."""
    return latest_materializations(instance, asset, [quarter]).get(quarter)


def latest_materializations(instance, asset: str, quarters: list[str]) -> dict:
    """quarter -> the latest materialization record of ``asset`` for it, for those of ``quarters`` that have one:
    the records of all of them read newest first, a page at a time, until each quarter has its latest (a batched
    run's check asks for 43 quarters: one query instead of 43)."""
    import dagster as dg

    keys = {to_key(q): q for q in quarters}
    found: dict = {}
    query = dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=list(keys))
    cursor = None
    while len(found) < len(keys):
        page = instance.fetch_materializations(query, limit=2 * len(keys), cursor=cursor)
        for record in page.records:
            found.setdefault(keys[record.partition_key], record)
        if not page.has_more:
            break
        cursor = page.cursor
    return found


def latest_json(instance, asset: str, quarter: str, key: str) -> dict:
    """A JSON metadata entry (``key``) of the latest materialization of ``asset`` for ``quarter``; {} when absent."""
    import json

    record = latest_materialization(instance, asset, quarter)
    entry = record.asset_materialization.metadata.get(key) if record else None
    return json.loads(entry.value) if entry is not None else {}


def _value(data: dict | None):
    """A serialized metadata value (``{"__class__": "IntMetadataEntryData", "value": 3}``, ``... "text": "x"``) as
    the plain value the API's ``.value`` gives; values of no single field (tables, null) as None."""
    fields = [v for k, v in (data or {}).items() if k != "__class__"]
    return fields[0] if len(fields) == 1 else None


def _metadata(serialized) -> dict:
    """Metadata of a serialized event: the legacy entry list or the newer mapping."""
    if isinstance(serialized, dict):
        return {k: _value(v) for k, v in serialized.items()}
    return {e["label"]: _value(e.get("entry_data")) for e in serialized or []}


class SqliteHistory:
    """Reads ``<home>/history/runs/index.db`` (Dagster's default SQLite event log) with the standard library."""

    def __init__(self, index: Path):
        self.index = index

    def _rows(self, sql: str, args: tuple) -> list:
        if not self.index.exists():
            return []  # the instance never ran anything
        with closing(sqlite3.connect(f"file:{self.index}?mode=ro", uri=True)) as conn:
            return conn.execute(sql, args).fetchall()

    def materialization(self, asset: str, quarter: str) -> dict | None:
        rows = self._rows(
            "SELECT e.event FROM event_logs e LEFT JOIN asset_keys k ON k.asset_key = e.asset_key"
            " WHERE e.asset_key = ? AND e.dagster_event_type = 'ASSET_MATERIALIZATION' AND e.partition = ?"
            " AND (k.wipe_timestamp IS NULL OR e.timestamp > k.wipe_timestamp) ORDER BY e.id DESC LIMIT 1",
            (json.dumps([asset]), to_key(quarter)))
        if not rows:
            return None
        entry = json.loads(rows[0][0])
        materialization = entry["dagster_event"]["event_specific_data"]["materialization"]
        serialized = materialization.get("metadata_entries", materialization.get("metadata"))
        return {"metadata": _metadata(serialized), "timestamp": entry["timestamp"]}

    def check_evaluations(self, asset: str, check: str) -> list[dict]:
        rows = self._rows(
            "SELECT run_id, evaluation_event FROM asset_check_executions WHERE asset_key = ? AND check_name = ?"
            " AND execution_status IN ('SUCCEEDED', 'FAILED') ORDER BY id DESC LIMIT 1000",
            (json.dumps([asset]), check))
        out = []
        for run_id, event in rows:
            evaluation = json.loads(event)["dagster_event"]["event_specific_data"]
            out.append({"passed": evaluation["success"], "severity": evaluation["severity"]["__enum__"].split(".")[-1],
                        "metadata": _metadata(evaluation.get("metadata")), "run_id": run_id})
        return out


class InstanceHistory:
    """The same answers through a ``DagsterInstance`` (any storage)."""

    def __init__(self, instance):
        self.instance = instance

    def materialization(self, asset: str, quarter: str) -> dict | None:
        record = latest_materialization(self.instance, asset, quarter)
        if record is None:
            return None
        meta = record.asset_materialization.metadata
        return {"metadata": {k: v.value for k, v in meta.items()}, "timestamp": record.timestamp}

    def check_evaluations(self, asset: str, check: str) -> list[dict]:
        import dagster as dg
        Status = private("AssetCheckExecutionRecordStatus")

        key = dg.AssetCheckKey(dg.AssetKey(asset), check)
        history = self.instance.event_log_storage.get_asset_check_execution_history(
            key, limit=1000, status={Status.SUCCEEDED, Status.FAILED})
        return [{"passed": r.evaluation.passed, "severity": r.evaluation.severity.value,
                 "metadata": {k: v.value for k, v in r.evaluation.metadata.items()}, "run_id": r.run_id}
                for r in history]


def event_log_file(home: Path) -> Path | None:
    """The SQLite file holding the instance's asset events, where Dagster's own SQLite storage is used: the default
    layout's ``history/runs/index.db``, or ``event_log.db`` under a ``ConsolidatedSqliteEventLogStorage``'s base_dir;
    None for any other storage."""
    import yaml

    settings = home / "dagster.yaml"
    chosen = (yaml.safe_load(settings.read_text()) or {}) if settings.exists() else {}
    if not STORAGE_KEYS & set(chosen):
        return home / "history" / "runs" / "index.db"
    event_log = chosen.get("event_log_storage") or {}
    if set(chosen) & STORAGE_KEYS == {"event_log_storage"} and event_log.get("class") == "ConsolidatedSqliteEventLogStorage":
        return Path((event_log.get("config") or {})["base_dir"]) / "event_log.db"
    return None


def open_history(config: dict) -> SqliteHistory | InstanceHistory:
    """The fast reader where the instance keeps its events in Dagster's SQLite storage, else the instance's API."""
    found = event_log_file(instance_home(config))
    return SqliteHistory(found) if found is not None else InstanceHistory(project_instance(config))
