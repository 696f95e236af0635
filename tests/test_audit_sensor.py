"""Issue 50: ``audit_sensor`` computes a quarter's audit once its tasks have their annotations, and reads a Label
Studio server's exports as they change.

Two quarters' releases (10 claims each, one with an image; tests/test_audit_display.py's ``publish``) are in a store
with the project's own Dagster instance; the answers go in through `veritas audit import --no-audit` (a real
``audit_annotations`` materialization), the sensor's ticks are evaluated with ``dg.build_sensor_context`` on that
instance, and each run it asks for is executed through the registered job ``quarter_audit``.

The server is a loopback double that answers the three requests the SDK makes (``GET /api/version/``,
``GET /api/projects/?page=N``, ``GET /api/projects/<id>/export``) in the shapes and with the status codes a real
Label Studio 1.23.2 gave (recorded from ``label-studio==1.23.2``, the version `make label-studio` installs); the real
server's round trip is tests/test_audit_label_studio.py's."""

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import dagster as dg
import pytest
import yaml

from assets.audit import sensor as audit_sensor_module
from assets.audit.annotations import to_export
from assets.audit.asset import ANNOTATIONS, EXPORT_TAG, REPLACE_TAG, addendum_rel
from assets.audit.label_studio import LabelStudioError
from assets.audit.sensor import (
    AGREEMENT_KEY,
    ANNOTATIONS_KEY,
    AUDIT_JOB,
    AUDIT_KEY,
    PULLS,
    SENSOR,
    read_cursor,
)
from dagster_project.config import load_config
from dagster_project.partitions import to_key
from dagster_project.resources.media import MediaStore
from dagster_project.resources.store import StoreResource
from tests.conftest import write_demo_config
from tests.test_audit_display import jpeg, publish, release_answers

OFFLINE, POLLED = "2025Q3", "2025Q4"  # the first quarter's answers come as files, the second's from the server
ANNOTATORS = ("ann-1@example.org", "ann-2@example.org")
SAMPLE = 8
TOKEN_ENV = "VERITAS_TEST_AUDIT_SENSOR_TOKEN"

# ---- what a real Label Studio 1.23.2 answered (label-studio==1.23.2 on loopback, the SDK 2.1.2's requests) ----------
# GET /api/version/ (the SDK asks it before an export: "Community" exports synchronously)
VERSION = {"release": "1.23.2", "label-studio-os-package": {
    "version": "1.23.2", "short_version": "1.23", "latest_version_from_pypi": None, "latest_version_upload_time": None,
    "current_version_is_outdated": False}, "label-studio-converter": {"version": "2.1.2"}, "edition": "Community"}
# a project of GET /api/projects/?page=1 ({"count", "next", "previous", "results"}), its long texts left out
PROJECT = {
    "id": 1, "title": "veritas audit 2025Q3", "description": "Judge each claim blind: the evidence is the fact-check "
    "article.", "label_config": "<View></View>", "expert_instruction": "", "show_instruction": True,
    "show_skip_button": False, "enable_empty_annotation": True, "show_annotation_history": False, "organization": 1,
    "color": "#FFFFFF", "maximum_annotations": 1, "is_published": False, "model_version": "", "is_draft": False,
    "created_by": {"id": 1, "first_name": "", "last_name": "", "email": "m@example.org", "avatar": None},
    "created_at": "2026-12-07T01:22:37.651967Z", "min_annotations_to_start_training": 0,
    "start_training_on_annotation_update": False, "show_collab_predictions": True, "num_tasks_with_annotations": 1,
    "task_number": 2, "useful_annotation_number": 1, "ground_truth_number": 0, "skipped_annotations_number": 0,
    "total_annotations_number": 1, "total_predictions_number": 0, "sampling": "Sequential sampling",
    "show_ground_truth_first": False, "annotator_evaluation_enabled": False, "show_overlap_first": False,
    "overlap_cohort_percentage": 100, "task_data_login": None, "task_data_password": None,
    "evaluate_predictions_automatically": False, "config_has_control_tags": True, "skip_queue": "REQUEUE_FOR_OTHERS",
    "reveal_preannotations_interactively": False, "pinned_at": None, "finished_task_number": 1, "queue_total": 1,
    "queue_done": 0, "config_suitable_for_bulk_annotation": True, "state": None}
# GET /api/projects/?page=2 past the last page (the SDK's pager asks for it), and any request with a wrong token
INVALID_PAGE = {"id": "1a20862f-38e7-48d9-8852-3b1f7fc5b877", "status_code": 404, "version": "1.23.2",
                "detail": "Invalid page.", "exc_info": None}
INVALID_TOKEN = {"id": "f8c8daf1-a09f-4642-8460-e3a8822d796d", "status_code": 401, "version": "1.23.2",
                 "detail": "Invalid token.", "exc_info": None}
# GET /api/projects/<id>/export?export_type=JSON&download_all_tasks=true&download_resources=true: a list of tasks,
# served as "application/.json"; an annotation's completed_by is the user's id
TASK = {"drafts": [], "predictions": [], "meta": {}, "created_at": "2026-12-07T01:22:37.792207Z", "allow_skip": True,
        "total_predictions": 0, "comment_count": 0, "unresolved_comment_count": 0, "last_comment_updated_at": None,
        "updated_by": 1, "comment_authors": []}
ANNOTATION = {"ground_truth": False, "created_at": "2026-12-07T01:22:45.645987Z", "draft_created_at": None,
              "lead_time": None, "prediction": {}, "import_id": None, "last_action": None, "bulk_created": False,
              "updated_by": 1, "parent_prediction": None, "parent_annotation": None, "last_created_by": None}


# ---- the world ------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Both quarters published in the store of a demo config (the audit's sample: 8 claims) with its own instance."""
    folder = tmp_path_factory.mktemp("audit-sensor")
    config = write_demo_config(folder, audit_sample_size=SAMPLE)
    store = StoreResource(**load_config(config)["store"])
    (folder / "media").mkdir()
    (folder / "media" / "a.jpg").write_bytes(jpeg())
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VERITAS_RELEASE_KEY", "5eed" * 16)  # the key the sample is drawn with
        mp.setenv("DAGSTER_HOME", str(folder / "dagster"))
        for quarter in (OFFLINE, POLLED):
            publish(store, MediaStore(str(folder / "media")), quarter, "v1")
        yield {"config": config, "folder": folder, "store": store}


def tasks_of(world, quarter: str) -> list[dict]:
    """The quarter's tasks, as `veritas audit export` writes them."""
    from dagster_project.commands.audit import export_files

    out = world["folder"] / f"tasks-{quarter}"
    if not out.exists():
        export_files(world["config"], quarter, out)
    return json.loads((out / "tasks.json").read_text())


def answers(world, quarter: str, annotators=ANNOTATORS, wrong: int = 0) -> dict:
    """Each annotator gives each sampled claim its release label, certain (the first ``wrong`` claims the opposite)."""
    return release_answers(world["store"].latest_release(quarter), tasks_of(world, quarter), annotators, wrong)


def import_file(world, quarter: str, given: dict, name: str) -> dict:
    """`veritas audit import FILE --no-audit`: the answers as Label Studio's export, read by audit_annotations."""
    from dagster_project.commands.audit import import_export

    path = world["folder"] / f"{name}.json"
    path.write_text(json.dumps(to_export(tasks_of(world, quarter), given)))
    got = import_export(world["config"], quarter, path, compute=False)
    assert "failed" not in got, got.get("failed")
    return got["annotations"]


def definitions(world, **stages) -> dg.Definitions:
    from dagster_project.definitions import build_definitions

    config = Path(world["config"])
    if stages:
        settings = yaml.safe_load(config.read_text())
        settings["stages"] |= stages
        config = world["folder"] / "veritas-server.yaml"
        config.write_text(yaml.safe_dump(settings))
    return build_definitions(str(config))


def instance(world) -> dg.DagsterInstance:
    from dagster_project.core.instance import project_instance

    return project_instance(load_config(world["config"]))


def tick(defs: dg.Definitions, world, cursor: str | None) -> dg.SensorResult:
    """One evaluation of the registered sensor on the project's instance, with the definitions' resources."""
    with dg.build_sensor_context(instance=instance(world), cursor=cursor,
                                 resources={key: defs.resources[key] for key in ("store", "audit")}) as context:
        result = defs.resolve_sensor_def(SENSOR)(context)
    assert isinstance(result, dg.SensorResult)
    return result


def run(defs: dg.Definitions, world, request: dg.RunRequest) -> dg.ExecuteInProcessResult:
    """What the daemon launches for the request: the registered job, the request's assets, partition and tags."""
    job = defs.resolve_job_def(AUDIT_JOB)
    result = job.execute_in_process(partition_key=request.partition_key, asset_selection=request.asset_selection,
                                    tags=request.tags, instance=instance(world))
    assert result.success
    return result


def materialized(result: dg.ExecuteInProcessResult) -> list[str]:
    return sorted(e.asset_key.path[-1] for e in result.get_asset_materialization_events())


# ---- answers imported as files -----------------------------------------------------------------------------------

def test_release_audit_is_asked_for_once_per_complete_import(world, monkeypatch):
    monkeypatch.setattr(audit_sensor_module, "SETTLE_S", 0)
    defs = definitions(world)
    sensor = defs.resolve_sensor_def(SENSOR)
    assert sensor.default_status == dg.DefaultSensorStatus.STOPPED  # no server configured: listed, not running
    assert sensor.minimum_interval_seconds == 600 and sensor.job_name == AUDIT_JOB

    first = tick(defs, world, None)
    assert not first.run_requests and "no quarter has new answers" in first.skip_reason.skip_message

    one = import_file(world, OFFLINE, answers(world, OFFLINE, ANNOTATORS[:1]), "one-annotator")
    assert one["short"] == SAMPLE
    waiting = tick(defs, world, first.cursor)
    assert not waiting.run_requests
    assert f"{OFFLINE}: {SAMPLE} of {SAMPLE} sampled claims have fewer than 2 complete annotations" in \
        waiting.skip_reason.skip_message

    def not_again(*_):
        raise AssertionError("the answers were counted again though nothing changed")

    with monkeypatch.context() as mp:  # the next tick finds the count in the cursor
        mp.setattr(audit_sensor_module, "answers_progress", not_again)
        again = tick(defs, world, waiting.cursor)
    assert not again.run_requests
    assert f"{SAMPLE} of {SAMPLE} sampled claims still short" in again.skip_reason.skip_message

    both = import_file(world, OFFLINE, answers(world, OFFLINE), "two-annotators")
    assert both["short"] == 0
    with monkeypatch.context() as mp:  # just imported: `veritas audit import` may be running release_audit itself
        mp.setattr(audit_sensor_module, "SETTLE_S", 3600)
        settling = tick(defs, world, again.cursor)
    assert not settling.run_requests and "looked at next tick" in settling.skip_reason.skip_message

    asked = tick(defs, world, again.cursor)
    assert len(asked.run_requests) == 1
    request = asked.run_requests[0]
    latest = instance(world).fetch_materializations(ANNOTATIONS_KEY, limit=1).records[0]
    assert request.asset_selection == [AUDIT_KEY] and request.asset_check_keys == [AGREEMENT_KEY]
    assert request.partition_key == to_key(OFFLINE)
    assert request.run_key == f"release_audit:{OFFLINE}:{latest.storage_id}"
    assert read_cursor(asked.cursor)["audited"] == {OFFLINE: latest.storage_id}

    assert not tick(defs, world, asked.cursor).run_requests  # no duplicate on the next tick
    # a daemon that lost the cursor asks with the same run key, which it launches only once
    assert [r.run_key for r in tick(defs, world, again.cursor).run_requests] == [request.run_key]

    done = run(defs, world, request)
    assert materialized(done) == ["release_audit"]
    assert [c.check_name for c in done.get_asset_check_evaluations()] == ["audit_agreement"]
    addendum = json.loads(world["store"].get_bytes(addendum_rel(OFFLINE, "v1")))
    assert addendum["overall"]["n"] == SAMPLE and addendum["overall"]["agreement3"] == 1.0
    assert not tick(defs, world, None).run_requests  # audited after the import: nothing to ask, even without a cursor

    # a new import (two claims relabelled) asks again, once
    import_file(world, OFFLINE, answers(world, OFFLINE, wrong=2), "relabelled")
    newer = tick(defs, world, asked.cursor)
    assert len(newer.run_requests) == 1 and newer.run_requests[0].run_key != request.run_key
    run(defs, world, newer.run_requests[0])
    addendum = json.loads(world["store"].get_bytes(addendum_rel(OFFLINE, "v1")))
    assert addendum["overall"]["agreement3"] == pytest.approx(6 / 8)
    assert not tick(defs, world, newer.cursor).run_requests


# ---- answers read from a Label Studio server ----------------------------------------------------------------------

class Server:
    """A Label Studio double on loopback: ``projects`` (id -> title) and ``exports`` (id -> list of tasks)."""

    def __init__(self, token: str):
        self.token, self.projects, self.exports, self.requests = token, {}, {}, []
        double = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_):
                pass

            def answer(self, status: int, payload, content_type: str = "application/json") -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                double.requests.append(self.path)
                path, _, query = self.path.partition("?")
                if self.headers.get("Authorization") != f"Token {double.token}":
                    return self.answer(401, INVALID_TOKEN)
                if path.rstrip("/") == "/api/version":  # the SDK asks /api/version/
                    return self.answer(200, VERSION)
                if path == "/api/projects/":
                    if "page=1" not in query.split("&"):
                        return self.answer(404, INVALID_PAGE)
                    results = [{**PROJECT, "id": pid, "title": title} for pid, title in double.projects.items()]
                    return self.answer(200, {"count": len(results), "next": None, "previous": None,
                                             "results": results})
                parts = path.strip("/").split("/")
                if len(parts) == 4 and parts[:2] == ["api", "projects"] and parts[3] == "export":
                    return self.answer(200, double.exports.get(int(parts[2]), []), "application/.json")
                return self.answer(404, {"detail": "Not found."})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def server_export(tasks: list[dict], given: dict, project: int, users: dict[str, int]) -> list[dict]:
    """The answers as the server exports them: its task and annotation fields, the users by id."""
    out, next_id = [], 1
    for n, task in enumerate(to_export(tasks, given), 1):
        annotations = []
        for a in task["annotations"]:
            annotations.append({**ANNOTATION, "id": next_id, "completed_by": users[a["completed_by"]["email"]],
                                "result": a["result"], "was_cancelled": False, "result_count": len(a["result"]),
                                "updated_at": f"2026-12-07T02:00:{next_id % 60:02d}.000000Z",
                                "unique_id": f"00000000-0000-0000-0000-{next_id:012d}", "task": n, "project": project})
            next_id += 1
        out.append({**TASK, "id": n, "annotations": annotations, "data": task["data"], "inner_id": n,
                    "updated_at": "2026-12-07T02:00:00.000000Z", "total_annotations": len(annotations),
                    "cancelled_annotations": 0, "project": project})
    return out


@pytest.fixture
def server(monkeypatch):
    double = Server("0123456789abcdef0123456789abcdef01234567")
    monkeypatch.setenv(TOKEN_ENV, double.token)
    yield double
    double.close()


def test_the_servers_changed_exports_are_read_and_audited(world, server, monkeypatch):
    monkeypatch.setattr(audit_sensor_module, "SETTLE_S", 0)
    defs = definitions(world, label_studio_url=server.url, label_studio_token_env=TOKEN_ENV)
    assert defs.resolve_sensor_def(SENSOR).default_status == dg.DefaultSensorStatus.RUNNING  # a server: it runs
    tasks = tasks_of(world, POLLED)
    server.projects = {7: f"veritas audit {POLLED}", 8: "another team's project", 9: "veritas audit 2031Q1"}
    server.exports = {7: server_export(tasks, {}, 7, {}), 9: []}
    users = {ANNOTATORS[0]: 2, ANNOTATORS[1]: 3}

    empty = tick(defs, world, None)  # tasks, no annotations: nothing to read
    assert not empty.run_requests
    assert f"{POLLED}: no annotations on the server yet ({SAMPLE} tasks of v1)" in empty.skip_reason.skip_message
    assert "2031Q1: project 9 but no release" in empty.skip_reason.skip_message
    assert not any("/projects/8/" in r for r in server.requests)  # not a veritas project: never exported

    server.exports[7] = server_export(tasks, answers(world, POLLED, ANNOTATORS[:1]), 7, users)
    first = tick(defs, world, empty.cursor)
    assert len(first.run_requests) == 1
    request = first.run_requests[0]
    assert request.asset_selection == [ANNOTATIONS_KEY] and request.asset_check_keys == []  # still short
    path = Path(request.tags[EXPORT_TAG])
    assert path.parent == Path(load_config(world["config"])["data_dir"]) / PULLS / POLLED
    assert json.loads(path.read_text()) == server.exports[7] and request.tags[REPLACE_TAG] == "false"
    assert not path.is_relative_to(world["store"].base)  # outside the store: the asset keeps its own copy
    assert read_cursor(first.cursor)["pulled"][POLLED] == hashlib.sha256(path.read_bytes()).hexdigest()
    done = run(defs, world, request)
    assert materialized(done) == ["audit_annotations"]
    meta = done.get_asset_materialization_events()[0].step_materialization_data.materialization.metadata
    assert meta["short"].value == SAMPLE and meta["export_file"].value == str(path)
    stored = world["store"].read_table(ANNOTATIONS, POLLED)
    assert set(stored["annotator"].to_list()) == {"user:2"}  # the server's user id, as `veritas audit pull` reads it

    same = tick(defs, world, first.cursor)  # the export did not change: nothing read again
    assert not same.run_requests and f"{POLLED}: the export is unchanged" in same.skip_reason.skip_message
    assert f"{POLLED}: {SAMPLE} of {SAMPLE} sampled claims have fewer than 2" in same.skip_reason.skip_message

    server.exports[7] = server_export(tasks, answers(world, POLLED), 7, users)  # the second annotator is done
    second = tick(defs, world, same.cursor)
    assert len(second.run_requests) == 1
    request = second.run_requests[0]
    assert request.asset_selection == [ANNOTATIONS_KEY, AUDIT_KEY] and request.asset_check_keys == [AGREEMENT_KEY]
    done = run(defs, world, request)
    assert materialized(done) == ["audit_annotations", "release_audit"]
    assert done.get_asset_check_evaluations()[0].passed
    assert json.loads(world["store"].get_bytes(addendum_rel(POLLED, "v1")))["annotators"] == 2
    assert not tick(defs, world, second.cursor).run_requests  # read and audited: nothing more

    # a token the server refuses, and a server that is gone, fail the tick naming the server and what to do
    monkeypatch.setenv(TOKEN_ENV, "wrong")
    with pytest.raises(LabelStudioError, match=rf"Label Studio at {server.url} refused the token in \${TOKEN_ENV} "
                                               r"\(HTTP 401\)"):
        tick(defs, world, second.cursor)
    monkeypatch.delenv(TOKEN_ENV)
    with pytest.raises(LabelStudioError, match=rf"\${TOKEN_ENV} is empty"):
        tick(defs, world, second.cursor)
    monkeypatch.setenv(TOKEN_ENV, server.token)
    server.close()
    with pytest.raises(LabelStudioError, match=rf"Label Studio at {server.url} cannot be reached .*start the server, "
                                               "or correct stages.label_studio_url"):
        tick(defs, world, second.cursor)


def test_an_export_is_hashed_as_saved_and_old_pulls_are_pruned(tmp_path, monkeypatch):
    from assets.audit.sensor import export_bytes, save_pull

    tasks = [{"id": 1, "data": {"claim_id": 3, "quarter": "2025Q3"}, "annotations": []}]
    assert export_bytes(tasks) == export_bytes([{"annotations": [], "data": {"quarter": "2025Q3", "claim_id": 3},
                                                 "id": 1}])  # the same answers in another key order: the same bytes
    monkeypatch.setattr(audit_sensor_module, "KEEP_PULLS", 2)
    paths = [save_pull(tmp_path, "2025Q3", f"{n:x}" * 64, b"[]") for n in range(3)]
    assert sorted(p.name for p in (tmp_path / "2025Q3").iterdir()) == sorted(p.name for p in paths[1:])
