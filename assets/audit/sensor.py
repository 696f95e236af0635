"""``audit_sensor``: the audit of a quarter computed once its tasks have their annotations, without a maintainer at
the keyboard (issue 50: "materialized when the quarter's tasks have at least audit.min_annotators annotations each,
by a sensor or the schedule").

On each tick, with a Label Studio server configured (``stages.label_studio_url``, its token in the variable
``stages.label_studio_token_env`` names), it first reads every project "veritas audit <quarter>" there: the JSON
export of the current release's tasks (``label_studio.pull_export``), hashed; an export that changed since the last
tick that read it (the cursor holds each quarter's hash) and holds annotations is saved under the data dir
(``audit_pulls/<quarter>/``, outside the store: the asset keeps its own copy under ``audit/<quarter>/imports/``) and
read by a run of ``audit_annotations`` with the file in its ``veritas/audit_export`` tag, and of ``release_audit``
in the same run when the answers will then be complete. A server that cannot be reached, or that refuses the token,
fails the tick, naming the server and what to do.

Then, server or not, each quarter whose latest ``audit_annotations`` materialization (an import by `veritas audit
import --no-audit`, the UI, or a pull whose answers were short) is later than its latest ``release_audit``, is of
the current release, and leaves every sampled claim with ``audit_min_annotators`` complete annotations (counted
again with the current settings, as ``release_audit`` counts them) gets a run of ``release_audit``: once per
annotations materialization (its storage id is in the run key and the cursor). An import younger than ``SETTLE_S``
waits a tick: `veritas audit import` computes the audit itself right after it.

The sensor runs by default when the config names a server, else it is stopped (switchable in the UI);
``stages.audit_sensor_interval_s`` sets how often it ticks."""

import hashlib
import json
import os
import re
import time
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg

from assets.audit.agreement import complete_annotators
from assets.audit.annotations import answers_of
from assets.audit.asset import (
    AGREEMENT_CHECK,
    EXPORT_TAG,
    REPLACE_TAG,
    AuditError,
    audit_annotations,
    import_answers,
    read_answers,
    release_audit,
    sampled_claims,
)
from assets.audit.label_studio import TITLE, LabelStudioError, connect, pull_export
from assets.stage.wiring import PARTITIONS
from dagster_project.core.config_file import clip
from dagster_project.partitions import to_key, to_label
from dagster_project.resources.store import StoreResource
from dagster_project.stage_settings import AuditSettings

SENSOR = "audit_sensor"
AUDIT_JOB = "quarter_audit"
PULLS = "audit_pulls"  # under the data dir: the exports the sensor read, one file per change
KEEP_PULLS = 20  # of each quarter's pulls, the newest kept (a run waiting in the queue still finds its file)
SETTLE_S = 60  # an import younger than this waits a tick: `veritas audit import` runs release_audit right after it
QUARTER_TAG, ANNOTATIONS_TAG = "veritas/quarter", "veritas/audit_annotations"  # the latter: the storage id audited
ANNOTATIONS_KEY, AUDIT_KEY = audit_annotations.key, release_audit.key
AGREEMENT_KEY = dg.AssetCheckKey(AUDIT_KEY, AGREEMENT_CHECK)  # runs with release_audit
_BEFORE, _AFTER = TITLE.split("{quarter}")
TITLE_RE = re.compile(re.escape(_BEFORE) + r"(\d{4}Q[1-4])" + re.escape(_AFTER))  # a project's title -> its quarter

audit_job = dg.define_asset_job(
    AUDIT_JOB, selection=dg.AssetSelection.assets(audit_annotations, release_audit), partitions_def=PARTITIONS,
    description="A quarter's audit: the annotators' answers read from a Label Studio export (audit_annotations, the "
                "file in the run tag veritas/audit_export) and the audit computed from them (release_audit). "
                "audit_sensor launches it.")


# ---- the cursor ------------------------------------------------------------------------------------------------------

def read_cursor(cursor: str | None) -> dict:
    """``pulled``: quarter -> the sha256 of its last export read; ``audited``: quarter -> the storage id of the
    annotations materialization release_audit was asked for; ``waiting``: quarter -> what was short, and of what."""
    state = json.loads(cursor) if cursor else {}
    return {part: dict(state.get(part) or {}) for part in ("pulled", "audited", "waiting")}


# ---- how far a quarter's answers are ---------------------------------------------------------------------------------

def answers_progress(store: StoreResource, settings: AuditSettings, quarter: str) -> dict:
    """The current release's sampled claims and how many have ``audit_min_annotators`` complete annotations in the
    store's answers (as ``release_audit`` counts them). AuditError when the sample cannot be drawn."""
    folder, _, claims = sampled_claims(store, settings, quarter)
    frame = read_answers(store, quarter)
    answers = answers_of(frame, folder.name) if frame is not None else {}
    done = sum(len(complete_annotators(answers.get(c.id) or {})) >= settings.audit_min_annotators for c in claims)
    return {"release_version": folder.name, "sampled": len(claims), "complete": done, "short": len(claims) - done}


def latest_by_partition(instance: dg.DagsterInstance, key: dg.AssetKey,
                        page: int = 500) -> dict[str, dg.EventLogRecord]:
    """partition key -> the asset's latest materialization record in it."""
    latest: dict[str, dg.EventLogRecord] = {}
    cursor = None
    while True:
        result = instance.fetch_materializations(key, limit=page, cursor=cursor)
        for record in result.records:
            if record.partition_key:
                latest.setdefault(record.partition_key, record)
        if not result.has_more:
            return latest
        cursor = result.cursor


def latest_in(instance: dg.DagsterInstance, key: dg.AssetKey, partition: str) -> dg.EventLogRecord | None:
    records = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition]),
                                              limit=1).records
    return records[0] if records else None


def pending_audits(instance: dg.DagsterInstance, store: StoreResource, settings: AuditSettings, state: dict,
                   skip: set[str], log) -> tuple[list[dg.RunRequest], list[str]]:
    """The runs of release_audit that imported answers call for, and a line for each quarter that waits."""
    requests, notes = [], []
    now = time.time()
    for partition, record in sorted(latest_by_partition(instance, ANNOTATIONS_KEY).items()):
        try:
            quarter = to_label(partition)
        except ValueError:  # a partition of another code location on the same instance
            continue
        sid = record.storage_id
        if quarter in skip or state["audited"].get(quarter) == sid:
            continue
        audited = latest_in(instance, AUDIT_KEY, partition)
        if audited is not None and audited.storage_id > sid:
            state["waiting"].pop(quarter, None)
            continue
        if now - record.timestamp < SETTLE_S:
            notes.append(f"{quarter}: answers imported {now - record.timestamp:.0f} s ago, looked at next tick")
            continue
        metadata = record.asset_materialization.metadata if record.asset_materialization else {}
        version = getattr(metadata.get("release_version"), "value", None)
        folder = store.latest_release(quarter)
        if folder is None or folder.name != version:
            notes.append(f"{quarter}: the last answers are of release {version}, the release is now "
                         f"{folder.name if folder else 'gone'}: its tasks need annotating")
            continue
        seen = f"{sid}:{version}:{settings.audit_min_annotators}:{settings.audit_sample_size}"
        waiting = state["waiting"].get(quarter) or {}
        if waiting.get("of") == seen:  # nothing changed since it was counted
            notes.append(f"{quarter}: {waiting['short']} of {waiting['sampled']} sampled claims still short")
            continue
        try:
            progress = answers_progress(store, settings, quarter)
        except AuditError as err:
            log.warning(f"{SENSOR}: {quarter}: {err}")
            notes.append(f"{quarter}: {err}")
            continue
        if progress["short"]:
            state["waiting"][quarter] = {"of": seen, "short": progress["short"], "sampled": progress["sampled"]}
            notes.append(f"{quarter}: {progress['short']} of {progress['sampled']} sampled claims have fewer than "
                         f"{settings.audit_min_annotators} complete annotations")
            continue
        state["waiting"].pop(quarter, None)
        state["audited"][quarter] = sid
        requests.append(dg.RunRequest(
            run_key=f"release_audit:{quarter}:{sid}", partition_key=partition, asset_selection=[AUDIT_KEY],
            asset_check_keys=[AGREEMENT_KEY],
            tags={QUARTER_TAG: quarter, ANNOTATIONS_TAG: str(sid)}))
        log.info(f"{SENSOR}: {quarter}: all {progress['sampled']} sampled claims have their annotations: "
                 "release_audit requested")
    return requests, notes


# ---- the server ------------------------------------------------------------------------------------------------------

def server_failure(url: str, token_env: str, err: Exception, what: str) -> LabelStudioError:
    """What the tick fails with when the server does not answer ``what``, saying what to do."""
    status = getattr(err, "status_code", None)
    if status in (401, 403):
        return LabelStudioError(f"Label Studio at {url} refused the token in ${token_env} (HTTP {status}) when "
                                f"{SENSOR} {what}: set it to an access token of that server (Account & Settings > "
                                "Personal Access Token) where the daemon runs")
    if status is not None:
        body = getattr(err, "body", "")
        return LabelStudioError(f"Label Studio at {url} answered HTTP {status} when {SENSOR} {what}: "
                                f"{clip(' '.join(str(body).split()), 300)}")
    return LabelStudioError(f"Label Studio at {url} cannot be reached when {SENSOR} {what} ({type(err).__name__}: "
                            f"{clip(str(err), 300)}): start the server, or correct stages.label_studio_url (empty "
                            f"it, or stop {SENSOR} in the UI, to stop polling)")


def export_bytes(tasks: list[dict]) -> bytes:
    """The export as the sensor saves and hashes it: the same answers give the same bytes."""
    return json.dumps(tasks, ensure_ascii=False, sort_keys=True).encode()


def annotations_in(tasks: list[dict]) -> int:
    return sum(1 for t in tasks for a in t.get("annotations") or [] if not a.get("was_cancelled"))


def save_pull(folder: Path, quarter: str, digest: str, data: bytes) -> Path:
    """The export under ``folder/<quarter>/`` (written whole, then moved into place); the oldest beyond
    ``KEEP_PULLS`` removed."""
    target = folder / quarter
    target.mkdir(parents=True, exist_ok=True)
    path = target / f"{datetime.now(UTC):%Y%m%dT%H%M%S}Z-{digest[:16]}.json"
    scratch = path.with_suffix(".partial")
    scratch.write_bytes(data)
    os.replace(scratch, path)
    for old in sorted(target.glob("*.json"))[:-KEEP_PULLS]:
        old.unlink(missing_ok=True)
    return path


def poll_server(store: StoreResource, settings: AuditSettings, pulls: Path, state: dict,
                log) -> tuple[list[dg.RunRequest], list[str]]:
    """The runs of audit_annotations (and release_audit, when the answers will be complete) that changed exports of
    the server's "veritas audit <quarter>" projects call for, and a line for each quarter looked at."""
    url, token_env = settings.label_studio_url, settings.label_studio_token_env
    client = connect(url, token_env)  # LabelStudioError without a token: the tick fails with it
    try:
        projects = [(p.id, p.title or "") for p in client.projects.list()]
    except Exception as err:  # noqa: BLE001 - httpx's transport errors, the SDK's ApiError: no project list
        raise server_failure(url, token_env, err, "listed its projects") from None
    requests, notes = [], []
    for project, title in sorted(projects, key=lambda p: p[1]):
        found = TITLE_RE.fullmatch(title)
        if not found:
            continue
        quarter = to_label(found.group(1))
        folder = store.latest_release(quarter)
        if folder is None:
            notes.append(f"{quarter}: project {project} but no release")
            continue
        try:
            tasks, _ = pull_export(client, project, folder.name)
        except Exception as err:  # noqa: BLE001 - as above: the tick fails, naming the server
            raise server_failure(url, token_env, err, f"exported project {project} ({title!r})") from None
        data = export_bytes(tasks)
        digest = hashlib.sha256(data).hexdigest()
        if state["pulled"].get(quarter) == digest:
            notes.append(f"{quarter}: the export is unchanged")
            continue
        if not annotations_in(tasks):
            state["pulled"][quarter] = digest
            notes.append(f"{quarter}: no annotations on the server yet ({len(tasks)} tasks of {folder.name})")
            continue
        path = save_pull(pulls, quarter, digest, data)
        try:  # what the run will read, counted now: the audit goes in the same run when it will be complete
            _, read = import_answers(store, settings, quarter, path)
            complete = read["short"] == 0
        except (AuditError, ValueError) as err:  # the run fails with the same reason, in the UI and the alerts
            log.warning(f"{SENSOR}: {quarter}: {err}")
            complete = False
        assets = [ANNOTATIONS_KEY, *([AUDIT_KEY] if complete else [])]
        requests.append(dg.RunRequest(
            run_key=f"audit_pull:{quarter}:{digest[:32]}", partition_key=to_key(quarter), asset_selection=assets,
            asset_check_keys=[AGREEMENT_KEY] if complete else [],
            tags={QUARTER_TAG: quarter, EXPORT_TAG: str(path), REPLACE_TAG: "false"}))
        state["pulled"][quarter] = digest
        log.info(f"{SENSOR}: {quarter}: the export of project {project} changed ({annotations_in(tasks)} "
                 f"annotations): {' and '.join(k.path[-1] for k in assets)} requested, reading {path}")
    return requests, notes


# ---- the sensor ------------------------------------------------------------------------------------------------------

def audit_sensor(settings: AuditSettings, data_dir: str | os.PathLike) -> dg.SensorDefinition:
    """The sensor, running by default when ``settings`` names a Label Studio server, else stopped (switchable in
    the UI); its pulls go under ``data_dir``."""
    status = dg.DefaultSensorStatus.RUNNING if settings.label_studio_url else dg.DefaultSensorStatus.STOPPED
    pulls = Path(data_dir).expanduser() / PULLS

    @dg.sensor(
        name=SENSOR, job=audit_job, minimum_interval_seconds=settings.audit_sensor_interval_s, default_status=status,
        description="Computes a quarter's audit (release_audit) once every sampled claim has audit_min_annotators "
                    "complete annotations; with stages.label_studio_url, first reads each changed export of the "
                    "server's 'veritas audit <quarter>' projects (audit_annotations). A server that cannot be "
                    "reached fails the tick.",
    )
    def sensor(context: dg.SensorEvaluationContext, store: StoreResource, audit: AuditSettings) -> dg.SensorResult:
        state = read_cursor(context.cursor)
        requests, notes = [], []
        if audit.label_studio_url:
            requests, notes = poll_server(store, audit, pulls, state, context.log)
        polled = {r.tags[QUARTER_TAG] for r in requests}  # their run reads the answers first: looked at next tick
        more, waiting = pending_audits(context.instance, store, audit, state, polled, context.log)
        requests, notes = requests + more, notes + waiting
        return dg.SensorResult(run_requests=requests, cursor=json.dumps(state, sort_keys=True),
                               skip_reason=None if requests else "; ".join(notes) or "no quarter has new answers")

    return sensor
