"""Issue 50 with a real Label Studio server (``label-studio==1.23.2``, in a venv of its own: ``make label-studio``;
``$VERITAS_LABEL_STUDIO_VENV`` points elsewhere). The test starts it on loopback with its data in a temporary folder,
its legacy token enabled for the test, nothing reached outside (no version check, no analytics, no Sentry), and
serving the store's media (local files). Through ``label-studio-sdk``: `veritas audit push` creates the quarter's
project and its tasks, a second push adds none; simulated annotators (three users of the server) annotate every
task; `veritas audit pull` reads the export back through the pipeline and computes the audit, which must give the
same answers and the same figures as the offline import of the same annotations. Headless Chromium, logged in as
the server's user, takes the labelling page of a task with an image (the handbook's picture of it,
``audit-labelling/labelling.png`` among the test artifacts)."""

import base64
import http.cookiejar
import importlib.util
import json
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from assets.audit.annotations import to_export
from assets.audit.asset import ANNOTATIONS
from assets.audit.labelling import labelling_config
from tests.simulated import QUARTER
from tests.test_audit_simulated import ANNOTATORS, annotate, release_claims, store_of, world  # noqa: F401
from tests.test_screenshots import artifacts

VENV = Path(os.environ.get("VERITAS_LABEL_STUDIO_VENV", Path.home() / ".cache" / "veritas" / "label-studio"))
SERVER = VENV / "bin" / "label-studio"
STARTUP_S = 240  # /health answers within about 90 s on 2 cores; more when the machine is busy
CHROMIUM = shutil.which("chromium")
VIEWPORT = (1280, 1500)  # the claim, a medium and its questions, and the claim's veracity, without scrolling
USER = "maintainer@example.org"
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
def server(world, tmp_path_factory):  # noqa: F811 - the imported fixture
    """A Label Studio server on loopback for the module, its document root the copied store's folder."""
    data = tmp_path_factory.mktemp("label-studio")
    port, token, password = free_port(), secrets.token_hex(20), secrets.token_hex(8)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("LABEL_STUDIO_", "DJANGO_"))},
           "LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED": "true",
           "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT": str(world["store"]),
           "LATEST_VERSION_CHECK": "false", "COLLECT_ANALYTICS": "false", "SENTRY_DSN": "", "FRONTEND_SENTRY_DSN": "",
           "LABEL_STUDIO_BASE_DATA_DIR": str(data)}
    log = open(data / "server.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [str(SERVER), "start", "--no-browser", "--host", "127.0.0.1", "--port", str(port), "--data-dir", str(data),
         "--username", USER, "--password", password, "--user-token", token,
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
        yield {"url": url, "token": token, "data": data, "password": password}
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()


@pytest.fixture(scope="module")
def configured(world, server):  # noqa: F811
    """The world's config pointed at the server; its token in the variable the config names."""
    config = Path(world["config"])
    settings = yaml.safe_load(config.read_text())
    settings["stages"] |= {"label_studio_url": server["url"], "label_studio_token_env": "VERITAS_TEST_LS_TOKEN"}
    config.write_text(yaml.safe_dump(settings))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VERITAS_TEST_LS_TOKEN", server["token"])
        yield {**world, "config": str(config)}


@pytest.fixture(scope="module")
def pushed(configured):
    """The quarter's first push (the screenshot test takes a task before any annotation)."""
    from dagster_project.commands.audit import push

    return push(configured["config"], QUARTER)


def login(url: str, email: str, password: str) -> dict[str, str]:
    """The cookies of a browser session of the user: Label Studio's login form, with Django's CSRF token."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    opener.open(f"{url}/user/login/", timeout=30).close()  # sets the csrftoken cookie
    csrf = next(c.value for c in jar if c.name == "csrftoken")  # Django takes the unmasked secret as the form token
    form = urllib.parse.urlencode({"csrfmiddlewaretoken": csrf, "email": email, "password": password}).encode()
    opener.open(urllib.request.Request(f"{url}/user/login/", data=form), timeout=30).close()
    cookies = {c.name: c.value for c in jar}
    assert "sessionid" in cookies, "Label Studio refused the login"
    return cookies


class DevTools:
    """Chromium's DevTools protocol over --remote-debugging-pipe: JSON messages ended by NUL; the events are kept."""

    def __init__(self, process: subprocess.Popen):
        self.process, self.buffer, self.last, self.events = process, b"", 0, []

    def __call__(self, method: str, session: str | None = None, timeout: float = 60, **params) -> dict:
        self.last += 1
        message = {"id": self.last, "method": method, "params": params} | ({"sessionId": session} if session else {})
        self.process.stdin.write(json.dumps(message).encode() + b"\0")
        self.process.stdin.flush()
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self.buffer:
                raw, self.buffer = self.buffer.split(b"\0", 1)
                reply = json.loads(raw)
                if "method" in reply:
                    self.events.append(reply)
                elif reply.get("id") == self.last:
                    assert "error" not in reply, f"{method}: {reply['error']}"
                    return reply["result"]
            ready = select.select([self.process.stdout], [], [], max(0.0, deadline - time.monotonic()))[0]
            chunk = os.read(self.process.stdout.fileno(), 1 << 20) if ready else b""
            if not chunk:
                raise TimeoutError(f"{method}: no answer from Chromium (exit {self.process.poll()})")
            self.buffer += chunk


@contextmanager
def chromium(profile: Path):
    """Headless Chromium driven over a pipe (no port opened), a fresh profile, no name resolved but loopback's."""
    log = open(f"{profile}.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(  # the protocol's pipe is the browser's fds 3 and 4: sh puts ours there
        ["sh", "-c", 'exec "$@" 3<&0 4>&1 </dev/null >/dev/null', "sh", CHROMIUM, "--headless", "--no-sandbox",
         "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-default-apps", "--metrics-recording-only",
         "--hide-scrollbars", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--remote-debugging-pipe",
         f"--user-data-dir={profile}", "about:blank"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, start_new_session=True)
    try:
        yield DevTools(process)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)
        log.close()


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (`chromium` not on PATH); the "
                    "server's tasks and media are checked by "
                    "test_push_pull_through_the_real_server_gives_the_offline_audit")
def test_chromium_shows_the_labelling_page_of_a_claim_with_its_image(configured, server, pushed, tmp_path):
    from label_studio_sdk import LabelStudio
    from PIL import Image

    client = LabelStudio(base_url=server["url"], api_key=server["token"])
    tasks = [t for t in client.tasks.list(project=pushed["project"])
             if t.data["media"] and t.data["media"][0]["kind"] == "image"]
    # one image if any (the picture shows all its questions), in English if any (the handbook's language)
    task = min(tasks, key=lambda t: (len(t.data["media"]), "language: en " not in t.data["context_line"], t.id))
    src = task.data["media"][0]["html"].split('src="')[1].split('"')[0].replace("&amp;", "&")
    # the config's headers: the claim, its media, each question (its title and definition), the note, the evidence
    headers = [h.get("value") for h in ET.fromstring(labelling_config()).iter("Header")]
    cookies = login(server["url"], USER, server["password"])
    # the data manager opens a task's labelling as its rows link it: ./?task=<id>
    page = f"{server['url']}/projects/{pushed['project']}/data/?task={task.id}"
    probe = """(src => { if (!document.body) return null;
        const img = [...document.querySelectorAll('img')].find(i => i.getAttribute('src') === src);
        const box = img && img.getBoundingClientRect(), text = document.body.innerText.replace(/\\s+/g, ' ');
        return {text, loaded: !!img && img.complete && img.naturalWidth > 0,
                box: box && [box.left, box.top, box.right, box.bottom]}; })"""
    with chromium(tmp_path / "profile") as cdp:
        target = next(t for t in cdp("Target.getTargets")["targetInfos"] if t["type"] == "page")
        session = cdp("Target.attachToTarget", targetId=target["targetId"], flatten=True)["sessionId"]
        cdp("Storage.setCookies", cookies=[{"name": k, "value": v, "url": server["url"]} for k, v in cookies.items()])
        cdp("Network.enable", session)
        cdp("Emulation.setDeviceMetricsOverride", session, width=VIEWPORT[0], height=VIEWPORT[1], deviceScaleFactor=1,
            mobile=False)
        cdp("Page.navigate", session, url=page)
        deadline, seen = time.monotonic() + 120, None
        while time.monotonic() < deadline:  # the app loads its bundle, then the task, then the image
            seen = cdp("Runtime.evaluate", session, expression=f"({probe})({json.dumps(src)})",
                       returnByValue=True)["result"].get("value")
            if seen and seen["loaded"] and " ".join(task.data["claim"].split()) in seen["text"]:
                break
            time.sleep(1)
        assert seen and seen["loaded"], f"the image {src} did not load: {(seen or {}).get('text', '')[:2000]}"
        time.sleep(1)  # the fonts and the last layout
        shot = base64.b64decode(cdp("Page.captureScreenshot", session, format="png")["data"])
        requested = {e["params"]["request"]["url"] for e in cdp.events if e["method"] == "Network.requestWillBeSent"}
    assert " ".join(task.data["claim"].split()) in seen["text"]
    missing = [h for h in headers if " ".join(h.split()) not in seen["text"]]
    assert not missing, f"the page lacks the config's {missing}"
    # the whole page came from the server (and data: URIs of its bundle)
    assert requested and all(u.startswith((server["url"] + "/", "data:", "blob:")) for u in requested), requested

    picture = artifacts("audit-labelling") / "labelling.png"
    picture.write_bytes(shot)
    with Image.open(picture) as image:
        assert image.size == VIEWPORT
        rgb = image.convert("RGB")
    colors = rgb.getcolors(maxcolors=VIEWPORT[0] * VIEWPORT[1])
    assert len(colors) > 200  # text, buttons, the image: not a blank or loading page
    left, top, right, bottom = (round(v) for v in seen["box"])
    assert 0 <= left < right <= VIEWPORT[0] and 0 <= top < bottom <= VIEWPORT[1], seen["box"]  # in the picture
    # where the image is, the picture shows it: mostly not the page's background
    background, area = max(colors)[1], (right - left) * (bottom - top)
    plain = sum(n for n, c in rgb.crop((left, top, right, bottom)).getcolors(maxcolors=area) if c == background)
    assert plain < area / 2, f"the image's place in the screenshot is {plain}/{area} background"


def test_push_pull_through_the_real_server_gives_the_offline_audit(configured, server, pushed, tmp_path):
    from label_studio_sdk import LabelStudio

    from dagster_project.commands.audit import export_files, import_export, pull, push

    first = pushed
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
