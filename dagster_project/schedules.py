"""The quarterly schedule: after a quarter ends, refresh it, and re-ingest the two quarters before it.

Fact-checks arrive late, so the two earlier quarters get their ingestion stages again. A partition is asked for
only when its inputs changed since its last successful run of the same kind: the inputs' fingerprint (the local
source files, the publisher registry and the stage parameters) rides on each run as a tag, and a tick skips a
partition whose last successful run carries the same fingerprint. Off by default: turn it on in the UI, or with
``schedule: {enabled: true}`` in the config file.
"""

import hashlib
import json
import os
from datetime import UTC, datetime

import dagster as dg

from dagster_project.partitions import quarter_of, quarterly_partitions, to_key

DEFAULT_CRON = "0 3 8 1,4,7,10 *"  # 03:00 UTC on the 8th day of a quarter: a week for the last quarter's stragglers
INGESTION = ["review_snapshot", "reviews", "trusted_reviews"]  # the snapshot first: it follows the feed
FINGERPRINT_TAG = "veritas/inputs"
KIND_TAG = "veritas/refresh"


def previous_quarters(label: str, n: int) -> list[str]:
    """The ``n`` quarters before ``label``, newest first."""
    year, q = int(label[:4]), int(label[5])
    out = []
    for _ in range(n):
        year, q = (year - 1, 4) if q == 1 else (year, q - 1)
        out.append(f"{year}Q{q}")
    return out


def _file_state(path: str) -> str:
    if "://" in path:
        return path  # a URL cannot be checked without fetching it: the reviews stage re-fetches and skips if unchanged
    try:
        st = os.stat(path)
    except OSError:
        return f"{path}:missing"
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def inputs_fingerprint(config: dict) -> str:
    """What the ingestion stages read, summarised: source files (size, mtime), the registry, the parameters."""
    stages = config["stages"]
    state = {
        "sources": [{**s, "state": _file_state(s["path"])} if s.get("path") else s for s in stages.get("sources", [])],
        "registry": _file_state(stages.get("publisher_registry", "")) if stages.get("publisher_registry") else "",
        "stages": {k: v for k, v in stages.items() if k != "sources"},
    }
    return hashlib.sha256(json.dumps(state, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _already_done(instance: dg.DagsterInstance, key: str, kind: str, fingerprint: str) -> bool:
    runs = instance.get_run_records(
        filters=dg.RunsFilter(
            tags={"dagster/partition": key, KIND_TAG: kind, FINGERPRINT_TAG: fingerprint},
            statuses=[dg.DagsterRunStatus.SUCCESS],
        ),
        limit=1,
    )
    return bool(runs)


def refresh_requests(config: dict, instance: dg.DagsterInstance, when: datetime) -> list[dg.RunRequest]:
    """The run requests of a tick at ``when``: the newest complete quarter in full, ingestion for the two before it."""
    current = quarter_of(when.astimezone(UTC))
    newest_complete = previous_quarters(current, 1)[0]
    fingerprint = inputs_fingerprint(config)
    wanted = [(newest_complete, "full")] + [(q, "ingestion") for q in previous_quarters(newest_complete, 2)]
    known = set(quarterly_partitions.get_partition_keys(current_time=when))
    requests = []
    for label, kind in wanted:
        key = to_key(label)
        if key not in known or _already_done(instance, key, kind, fingerprint):
            continue
        requests.append(dg.RunRequest(
            run_key=f"{label}-{kind}-{fingerprint}",
            partition_key=key,
            asset_selection=[dg.AssetKey(a) for a in INGESTION] if kind == "ingestion" else None,
            tags={KIND_TAG: kind, FINGERPRINT_TAG: fingerprint, "veritas/quarter": label},
        ))
    return requests


def quarterly_schedule(config: dict, job) -> dg.ScheduleDefinition:
    settings = config.get("schedule") or {}
    status = dg.DefaultScheduleStatus.RUNNING if settings.get("enabled") else dg.DefaultScheduleStatus.STOPPED

    @dg.schedule(
        name="quarterly_refresh_schedule",
        cron_schedule=settings.get("cron", DEFAULT_CRON),
        execution_timezone="UTC",
        job=job,
        default_status=status,
        description="After a quarter ends: refresh it in full and re-ingest the two quarters before it, "
        "for the partitions whose inputs changed.",
    )
    def _schedule(context: dg.ScheduleEvaluationContext):
        when = context.scheduled_execution_time or datetime.now(UTC)
        requests = refresh_requests(config, context.instance, when)
        if not requests:
            return dg.SkipReason("no partition's inputs changed since its last successful refresh")
        return requests

    return _schedule
