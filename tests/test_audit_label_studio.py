"""Issue 50 with a real Label Studio server (``label-studio==1.23.2``, in a venv of its own: ``make label-studio``;
``$VERITAS_LABEL_STUDIO_VENV`` points elsewhere). The test starts it on loopback with its data in a temporary folder,
its legacy token enabled for the test, nothing reached outside (no version check, no analytics, no Sentry), and
serving the store's media (local files). Through ``label-studio-sdk``: `veritas audit push` creates the quarter's
project and its tasks, a second push adds none; simulated annotators (three users of the server) annotate every
task; `veritas audit pull` reads the export back through the pipeline and computes the audit, which must give the
same answers and the same figures as the offline import of the same annotations."""

import importlib.util
import json
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from assets.audit.annotations import to_export
from assets.audit.asset import ANNOTATIONS
from tests.simulated import QUARTER
from tests.test_audit_simulated import ANNOTATORS, annotate, release_claims, store_of, world  # noqa: F401

VENV = Path(os.environ.get("VERITAS_LABEL_STUDIO_VENV", Path.home() / ".cache" / "veritas" / "label-studio"))
SERVER = VENV / "bin" / "label-studio"
STARTUP_S = 240  # /health answers within about 90 s on 2 cores; more when the machine is busy
pytestmark = [  # checked before the simulated quarter is run for nothing
    pytest.mark.skipif(importlib.util.find_spec("label_studio_sdk") is None,
                       reason="label-studio-sdk is not installed: `make install` (its pins)"),
    pytest.mark.skipif(not SERVER.exists(), reason=f"no Label Studio server at {SERVER}: run `make label-studio` "
                                                   "(or set VERITAS_LABEL_STUDIO_VENV)"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(world, tmp_path_factory):
    """A Label Studio server on loopback for the module, its document root the copied store's folder."""
    data = tmp_path_factory.mktemp("label-studio")
    port, token = free_port(), secrets.token_hex(20)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("LABEL_STUDIO_", "DJANGO_"))},
           "LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED": "true",
           "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT": str(world["store"]),
           "LATEST_VERSION_CHECK": "false", "COLLECT_ANALYTICS": "false", "SENTRY_DSN": "", "FRONTEND_SENTRY_DSN": "",
           "LABEL_STUDIO_BASE_DATA_DIR": str(data)}
    log = open(data / "server.log", "wb")
    process = subprocess.Popen(
        [str(SERVER), "start", "--no-browser", "--host", "127.0.0.1", "--port", str(port), "--data-dir", str(data),
         "--username", "maintainer@example.org", "--password", secrets.token_hex(8), "--user-token", token,
         "--enable-legacy-api-token"],
        cwd=data, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Label Studio did not answer /health: {(data / 'server.log').read_text()[-3000:]}")
            time.sleep(2)
        yield {"url": url, "token": token, "data": data}
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()


@pytest.fixture(scope="module")
def configured(world, server):
    """The world's config pointed at the server; its token in the variable the config names."""
    config = Path(world["config"])
    settings = yaml.safe_load(config.read_text())
    settings["stages"] |= {"label_studio_url": server["url"], "label_studio_token_env": "VERITAS_TEST_LS_TOKEN"}
    config.write_text(yaml.safe_dump(settings))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VERITAS_TEST_LS_TOKEN", server["token"])
        yield {**world, "config": str(config)}


def test_push_pull_through_the_real_server_gives_the_offline_audit(configured, server, tmp_path):
    from label_studio_sdk import LabelStudio

    from dagster_project.commands.audit import export_files, import_export, pull, push

    first = push(configured["config"], QUARTER)
    assert first["created"] and first["added"] == first["tasks"] == 80
    again = push(configured["config"], QUARTER)
    assert not again["created"] and again["added"] == 0 and again["present"] == 80  # a re-run adds no duplicate

    client = LabelStudio(base_url=server["url"], api_key=server["token"])
    project = client.projects.get(first["project"])
    assert project.title == f"veritas audit {QUARTER}" and "Repeater" in project.label_config
    assert "You judge claims" in project.expert_instruction
    tasks = list(client.tasks.list(project=first["project"]))
    assert len(tasks) == 80 and len({t.data["claim_id"] for t in tasks}) == 80

    # the media come from the store, through the server's local-files serving, to a user of the project
    folder, claims = release_claims(configured["store"])
    with_media = next(t for t in tasks if t.data["media"])
    medium = claims[with_media.data["claim_id"]]["media"][0]
    src = with_media.data["media"][0]["html"].split('src="')[1].split('"')[0]
    request = urllib.request.Request(server["url"] + src.replace("&amp;", "&"),
                                     headers={"Authorization": f"Token {server['token']}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.read() == (folder / medium["file_path"]).read_bytes()

    # three annotators, users of the server, annotate every task
    sampled = {t.data["claim_id"]: claims[t.data["claim_id"]] for t in tasks}
    answers = annotate(sampled, configured["truth"], seed=5)
    users = {email: client.users.create(username=email.split("@")[0], email=email).id for email in ANNOTATORS}
    exported = {t["data"]["claim_id"]: t["annotations"]
                for t in to_export([{"data": t.data} for t in tasks], answers)}
    for task in tasks:
        for annotation in exported[task.data["claim_id"]]:
            client.annotations.create(task.id, result=annotation["result"],
                                      completed_by=users[annotation["completed_by"]["email"]])

    got = pull(configured["config"], QUARTER)
    assert "failed" not in got, got.get("failed")
    online = json.loads(Path(got["audit"]["addendum"]).read_text())
    store, _ = store_of(configured)
    table = store.read_table(ANNOTATIONS, QUARTER)
    by_user = {f"user:{uid}": email for email, uid in users.items()}
    stored = {(r["claim_id"], by_user[r["annotator"]], r["property"], r["medium_index"]): (r["category"], r["certainty"])
              for r in table.iter_rows(named=True) if r["property"] != "note"}
    given = {(cid, a, p, m): (cat, "" if cat == "unknown" else cert) for cid, by in answers.items()
             for a, given_by in by.items() for (p, m), (cat, cert) in given_by.items()}
    assert stored == given  # what the annotators gave on the server is what the store holds

    # the same annotations through the offline files give the same audit
    out = tmp_path / "offline"
    export_files(configured["config"], QUARTER, out)
    offline_tasks = json.loads((out / "tasks.json").read_text())
    (out / "export.json").write_text(json.dumps(to_export(offline_tasks, answers)))
    offline = import_export(configured["config"], QUARTER, out / "export.json", replace=True)
    offline_addendum = json.loads(Path(offline["audit"]["addendum"]).read_text())
    for part in ("overall", "properties", "by_media_kind", "by_language", "disputed", "errata"):
        assert online[part] == offline_addendum[part], part
