"""Issue 50, the audit shown with the release without changing it: the card of an export, `veritas export`, the
leaderboard and its page, the longitudinal view, `veritas yields` and the dashboard.

Two quarters' releases (10 claims each, one with an image) are published in a store; each is audited the way a
maintainer audits it: `veritas audit export` writes the tasks of its secret sample, two annotators' answers go back as
Label Studio's export through `veritas audit import`, which runs the real `release_audit` asset on the project's
instance. In 2025Q3 the annotators give every claim its release label (3-bin 100%, the gate passes); in 2025Q4 they
label the first four sampled claims otherwise (3-bin 50%, below the 80% gate).
"""

import hashlib
import io
import json
import shutil
import subprocess
from pathlib import Path

import dagster as dg
import lxml.html
import pytest
import yaml
from PIL import Image

from assets.audit.annotations import to_export
from assets.audit.asset import addendum_rel, release_audit
from assets.audit.card import audit_card, card_line, leaderboard_line
from assets.audit.errata import changelog_rel
from assets.evaluation.leaderboard import collect, compute_board, leaderboard, load_systems
from assets.evaluation.leaderboard_page import render_page
from assets.evaluation.longitudinal import AUDIT_COLOUR, audit_rows, longitudinal_text, plot_longitudinal
from assets.release.writing import write_release
from dagster_project.cli import main
from dagster_project.config import PROJECT_ROOT, load_config
from dagster_project.core.dashboard import render_html
from dagster_project.resources.media import MediaStore
from dagster_project.resources.store import StoreResource
from dagster_project.stage_settings import LeaderboardSettings
from dagster_project.yield_report import AUDIT_ASSET, collect_range, format_range
from schemas.frames import to_frame
from schemas.records import Integrity, ReleaseClaim, ReleaseIntegrity, ReleaseMedium, ReleaseScore, ScoredClaim
from tests.conftest import write_demo_config

QUARTERS = ("2025Q3", "2025Q4")
ANNOTATORS = ("ann-1@example.org", "ann-2@example.org")
SAMPLE = 8
WRONG = {"2025Q3": 0, "2025Q4": 4}  # sampled claims the annotators label otherwise
CATEGORY = {1.0: "positive", -1.0: "negative", 0.0: "unknown"}
LABEL = {1.0: "intact", -1.0: "compromised", 0.0: "unknown"}


def jpeg() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 30, 30)).save(buf, "JPEG")
    return buf.getvalue()


def publish(store: StoreResource, media: MediaStore, quarter: str, version: str, n: int = 10) -> Path:
    """A release of ``n`` claims (claim 1 with an image) built by write_release from a rectified_claims version that
    holds the same claims, as the audit finds each released claim in the pool the release names."""
    claims, pool = [], []
    for i in range(1, n + 1):
        s = (1.0, -1.0, 0.0)[i % 3]
        score = ReleaseScore(score=s, justification="the ensemble's justification")
        image = [ReleaseMedium(type="image", id=1, file_path="images/1.jpg", authenticity=ReleaseScore(score=1.0),
                               contextualization=score)] if i == 1 else []
        text = f"{'<image:1> ' if image else ''}Claim {i} of {quarter} {version} says a thing."
        url = f"https://factcheck.example/{quarter}/{version}/{i}"
        claims.append(ReleaseClaim(id=i, text=text, date=f"{quarter[:4]}-08-0{i % 9 + 1}", language="en" if i % 2 else "de",
                                   review_url=url, media=image, veracity=score, context_coverage=score if s > 0 else None,
                                   integrity=ReleaseIntegrity(score=s, decisive_property="veracity")))
        pool.append(ScoredClaim(claim_id=f"{version}-{i}", review_id=f"r{i}", quarter=quarter, text=text, original_text=text,
                                normalization="original", review_url=url, variant="original",
                                integrity=Integrity(score=s, decisive_property="veracity", label=LABEL[s])))
    table = store.write_table("rectified_claims", quarter, to_frame(pool, ScoredClaim))
    staging = store.release_staging(quarter, version)
    write_release(staging, quarter, claims, [(1, "image", "a.jpg")], media,
                  {"version": version, "inputs": {"rectified_claims": table}})
    return store.publish_release(quarter, staging)


def release_answers(release: Path, tasks: list[dict], annotators, wrong: int = 0) -> dict:
    """Each annotator gives each task's claim its release label, certain (the first ``wrong`` tasks the opposite)."""
    claims = {c["id"]: c for c in json.loads((release / "claims.json").read_text())["claims"]}
    answers = {}
    for n, task in enumerate(tasks):
        claim = claims[task["data"]["claim_id"]]
        s = claim["integrity"]["score"]
        s = (-1.0 if s >= 0 else 1.0) if n < wrong else s
        given = {("veracity", -1): (CATEGORY[s], "certain"), ("context_coverage", -1): (CATEGORY[s], "certain")}
        for i, _ in enumerate(claim["media"]):
            given |= {("authenticity", i): ("positive", "certain"), ("contextualization", i): (CATEGORY[s], "certain")}
        answers[claim["id"]] = {a: dict(given) for a in annotators}
    return answers


def annotate(config: str, folder: Path, quarter: str, wrong: int) -> None:
    """`veritas audit export`, two annotators' answers (the first ``wrong`` sampled claims labelled otherwise) and
    `veritas audit import`, which computes the audit."""
    out = folder / f"tasks-{quarter}"
    assert main(["--config", config, "audit", "export", "--quarter", quarter, "--out", str(out)]) == 0
    tasks = json.loads((out / "tasks.json").read_text())
    release = StoreResource(**load_config(config)["store"]).latest_release(quarter)
    (out / "export.json").write_text(json.dumps(to_export(tasks, release_answers(release, tasks, ANNOTATORS, wrong))))
    assert main(["--config", config, "audit", "import", str(out / "export.json"), "--quarter", quarter]) == 0


def fingerprint(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    folder = tmp_path_factory.mktemp("audit-display")
    config = write_demo_config(folder, audit_sample_size=SAMPLE)
    store = StoreResource(**load_config(config)["store"])
    media = MediaStore(str(folder / "media"))
    (folder / "media").mkdir()
    (folder / "media" / "a.jpg").write_bytes(jpeg())
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VERITAS_RELEASE_KEY", "5eed" * 16)  # the key the sample is drawn with
        mp.setenv("DAGSTER_HOME", str(folder / "dagster"))  # the project's instance: yields reads the audit there
        releases = {q: publish(store, media, q, "v1") for q in QUARTERS}
        before = {q: fingerprint(f) for q, f in releases.items()}
        for q in QUARTERS:
            annotate(config, folder, q, WRONG[q])
        addenda = {q: json.loads(store.get_bytes(addendum_rel(q, "v1"))) for q in QUARTERS}
        yield {"config": config, "folder": folder, "store": store, "media": media, "releases": releases,
               "before": before, "addenda": addenda}


def store_copy(audited, tmp_path) -> tuple[str, StoreResource]:
    """A config over a copy of the audited store, to change it without touching the module's."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = write_demo_config(tmp_path)
    store = StoreResource(**load_config(config)["store"])
    shutil.copytree(audited["store"].base, store.base)
    return config, store


def test_the_audits_are_what_the_annotators_said_and_the_releases_are_unchanged(audited):
    q3, q4 = (audited["addenda"][q] for q in QUARTERS)
    assert (q3["overall"]["n"], q3["overall"]["agreement3"], q3["passed"]) == (SAMPLE, 1.0, True)
    assert (q4["overall"]["n"], q4["overall"]["agreement3"], q4["passed"]) == (SAMPLE, 0.5, False)
    for q, folder in audited["releases"].items():
        assert fingerprint(folder) == audited["before"][q]  # the release folder, its README.md too, never changes
        assert "Human audit" not in (folder / "README.md").read_text()
        assert sorted(p.name for p in folder.parent.iterdir()) == [
            "LATEST", "v1", "v1.audit.json", "v1.audit.json.sha256", "v1.audit.md"]


# ---- the card and `veritas export` ---------------------------------------------------------------------------


def test_the_export_card_shows_each_quarters_audit(audited, tmp_path, monkeypatch):
    out = tmp_path / "hf"
    assert main(["--config", audited["config"], "export", "--from", QUARTERS[0], "--to", QUARTERS[-1], "--out", str(out),
                 "--format", "hf"]) == 0
    card = (out / "README.md").read_text()
    q3, q4 = (audited["addenda"][q] for q in QUARTERS)
    assert "people agree with the labels: 3-bin 100%, MSE 0.000, 8 claims; Krippendorff's alpha" in card_line(q3)
    assert card_line(q3).endswith("the gate (3-bin agreement at least 80%) passed")
    assert card_line(q4).endswith("the gate (3-bin agreement at least 80%) failed, look at the disputed claims")
    assert f"- 2025Q3 (release v1): {card_line(q3)}." in card and f"- 2025Q4 (release v1): {card_line(q4)}." in card
    for q in QUARTERS:  # each quarter's audit card, as published beside its release (.audit.md), in the export's card
        published = audited["store"].get_bytes(addendum_rel(q, "v1").removesuffix(".json") + ".md").decode()
        assert published == audit_card(audited["addenda"][q])
        assert published.replace("# Human audit", "### Human audit", 1).rstrip("\n") in card
    # the quarter below its gate is flagged before anything else; the one that passed is not
    head = card.split("## Loading")[0]
    assert "**2025Q4: below the human audit's gate.** people agree with the labels: 3-bin 50%" in head
    assert "2025Q3" not in head.split("# VeriTaS")[1]
    for q in QUARTERS:  # the files beside, next to the quarter's folder
        assert (out / f"{q}.audit.json").read_bytes() == audited["store"].get_bytes(addendum_rel(q, "v1"))
    # read without Dagster, as every export with a local store
    from tests.test_cli_fast import probe

    result, _ = probe("--config", audited["config"], "export", "--quarter", "2025Q4", "--out", str(tmp_path / "light"),
                      "--format", "hf")
    assert result["rc"] == 0 and "dagster" not in result["loaded"] and (tmp_path / "light" / "2025Q4.audit.json").exists()
    # datasets still loads the folder as one dataset: the files beside the quarter folders are not splits
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    from datasets import load_dataset

    loaded = load_dataset(str(out), cache_dir=str(tmp_path / "cache"))
    assert sorted(loaded) == list(QUARTERS) and loaded["2025Q4"].num_rows == 10


def test_the_export_copies_what_is_published_beside_each_release(audited, tmp_path, capsys):
    out = tmp_path / "plain"
    assert main(["--config", audited["config"], "export", "--quarter", *QUARTERS, "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [*QUARTERS, *(f"{q}.audit{x}" for q in QUARTERS for x in (".json", ".json.sha256", ".md"))])
    store = audited["store"]
    for q in QUARTERS:
        assert fingerprint(out / q) == audited["before"][q]  # the release as released
        assert (out / f"{q}.audit.json").read_bytes() == store.get_bytes(addendum_rel(q, "v1"))
        assert (out / f"{q}.audit.md").read_bytes() == store.get_bytes(f"releases/{q}/v1.audit.md")
    # the hashes name the copies: sha256sum checks them where they are
    checked = subprocess.run(["sha256sum", "-c", *sorted(p.name for p in out.glob("*.sha256"))], cwd=out,
                             capture_output=True, text=True, check=True)
    assert checked.stdout.splitlines() == ["2025Q3.audit.json: OK", "2025Q4.audit.json: OK"]

    # A next version of 2025Q4 (the errata left out), with its changelog: the export copies the current version's
    # changelog, and no longer the audit of the version before it.
    config, copy = store_copy(audited, tmp_path / "next")
    folder = publish(copy, audited["media"], "2025Q4", "v2")
    log = (json.dumps({"previous_version": "v1", "errata_applied": [1, 2]}, indent=2) + "\n").encode()
    copy.put_bytes(changelog_rel("2025Q4", folder.name), log)
    copy.put_bytes(changelog_rel("2025Q4", folder.name) + ".sha256",
                   f"{hashlib.sha256(log).hexdigest()}  v2.changelog.json\n".encode())
    capsys.readouterr()
    assert main(["--config", config, "export", "--quarter", "2025Q4", "--out", str(tmp_path / "v2")]) == 0
    assert sorted(p.name for p in (tmp_path / "v2").iterdir()) == [
        "2025Q4", "2025Q4.changelog.json", "2025Q4.changelog.json.sha256"]
    assert (tmp_path / "v2" / "2025Q4.changelog.json").read_bytes() == log

    # An addendum edited after it was published no longer matches its hash: nothing is exported
    (copy.base / addendum_rel("2025Q3", "v1")).write_text(json.dumps({**audited["addenda"]["2025Q3"], "passed": True,
                                                                       "overall": {"agreement3": 1.0}}))
    capsys.readouterr()
    assert main(["--config", config, "export", "--quarter", "2025Q3", "--out", str(tmp_path / "tampered")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("veritas: releases/2025Q3/v1.audit.json does not match its hash (v1.audit.json.sha256)")
    assert len(err.splitlines()) == 1 and not (tmp_path / "tampered").exists()


def test_an_export_from_s3_copies_what_the_bucket_holds_beside_each_release(audited, tmp_path, monkeypatch):
    """The same export from an S3 store (a real SeaweedFS on loopback) whose bucket holds the audited releases."""
    from tests.ops_support import S3_KEYS, seaweedfs

    for name, value in S3_KEYS.items():
        monkeypatch.setenv(name, value)
    local = tmp_path / "local"
    assert main(["--config", audited["config"], "export", "--quarter", *QUARTERS, "--out", str(local)]) == 0
    with seaweedfs(tmp_path / "s3") as endpoint:
        config = Path(write_demo_config(tmp_path))
        settings = yaml.safe_load(config.read_text())
        settings["store"] = {"kind": "s3", "bucket": "veritas-display", "endpoint_url": endpoint, "create_bucket": True,
                             "access_key_env": "VERITAS_TEST_S3_KEY", "secret_key_env": "VERITAS_TEST_S3_SECRET"}
        config.write_text(yaml.safe_dump(settings))
        bucket = StoreResource(**load_config(str(config))["store"])
        assert bucket.push_dir(audited["store"].base / "releases", "releases") > 0
        assert not (bucket.base / "releases").exists()  # the working copy is empty: all comes from the bucket
        out = tmp_path / "from-s3"
        assert main(["--config", str(config), "export", "--quarter", *QUARTERS, "--out", str(out)]) == 0
    exported = {p.name: fingerprint(p) if p.is_dir() else p.read_bytes() for p in out.iterdir()}
    assert exported == {p.name: fingerprint(p) if p.is_dir() else p.read_bytes() for p in local.iterdir()}
    assert exported["2025Q4.audit.json"] == audited["store"].get_bytes(addendum_rel("2025Q4", "v1"))


# ---- the leaderboard and the longitudinal view ---------------------------------------------------------------------


def systems_folder(audited, folder: Path) -> Path:
    """An outside system, given the inputs only, that predicts every claim's release score halved."""
    folder.mkdir(parents=True)
    files = {}
    for q, release in audited["releases"].items():
        claims = json.loads((release / "claims.json").read_text())["claims"]
        (folder / f"{q}.json").write_text(json.dumps([{"claim_id": c["id"], "integrity": c["integrity"]["score"] / 2}
                                                      for c in claims]))
        files[q] = f"{q}.json"
    (folder / "halver.yaml").write_text(yaml.safe_dump({"kind": "predictions", "knowledge_cutoff": "2024Q4",
                                                        "input": "inputs_only", "predictions": files}))
    return folder


def test_the_leaderboard_shows_the_audit_of_each_quarters_latest_release(audited, tmp_path, capsys):
    store, systems = audited["store"], systems_folder(audited, tmp_path / "systems")
    board = compute_board(collect(store, load_systems(systems), list(QUARTERS)), resamples=50)
    addenda = audited["addenda"]
    assert board["audit"] == {q: leaderboard_line(addenda[q]) for q in QUARTERS}
    assert board["audit"]["2025Q3"] == "people agree with the labels: 3-bin 100%, MSE 0.000, 8 claims"
    mse = addenda["2025Q4"]["overall"]["mse"]  # which claims were sampled, and so flipped, is the key's
    assert board["audit"]["2025Q4"] == f"people agree with the labels: 3-bin 50%, MSE {mse:.3f}, 8 claims (below the gate 80%)"
    assert board["release_versions"] == {q: "v1" for q in QUARTERS}
    assert board["systems"][0]["input"] == "inputs_only"

    # the asset writes it, and `veritas leaderboard` renders it again from the stored inputs
    assert dg.materialize([leaderboard], resources={"store": store, "board": LeaderboardSettings(
        systems_dir=str(systems), bootstrap_resamples=50)}).success
    page = tmp_path / "board.html"
    capsys.readouterr()
    assert main(["--config", audited["config"], "leaderboard", "--html", str(page)]) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == [f"human audit {q} (release v1): {board['audit'][q]}"
                                                         for q in QUARTERS]
    doc = lxml.html.fromstring(page.read_text(encoding="utf-8"))
    rows = {r.get("data-quarter"): r for r in doc.xpath("//table[@id='audit-table']/tbody/tr")}
    assert list(rows) == list(QUARTERS)
    cells = {q: {td.get("data-field"): td.text for td in r} for q, r in rows.items()}
    assert cells["2025Q3"]["line"] == board["audit"]["2025Q3"] and cells["2025Q3"]["gate"] == "passed"
    assert (cells["2025Q4"]["agreement3"], cells["2025Q4"]["mse"], cells["2025Q4"]["n"]) == ("0.500", f"{mse:.4f}", "8")
    assert cells["2025Q4"]["gate"] == "below 80%" and rows["2025Q4"].get("class") == "warn"
    assert [td.text for td in rows["2025Q3"]][:2] == ["2025Q3", "v1"]  # the version scored
    # the page states which input file each system was given
    assert doc.xpath("//table[@id='board']/tbody/tr[@data-system='halver']/td[@data-field='input']")[0].text == "inputs_only"

    # a next version of 2025Q4, not audited yet: the leaderboard shows the audit of the version it scores only
    _, copy = store_copy(audited, tmp_path / "next")
    publish(copy, audited["media"], "2025Q4", "v2")
    board = compute_board(collect(copy, load_systems(systems), list(QUARTERS)), resamples=50)
    assert list(board["audit"]) == ["2025Q3"] and board["release_versions"]["2025Q4"] == "v2"
    doc = lxml.html.fromstring(render_page(board))
    row = doc.xpath("//table[@id='audit-table']/tbody/tr[@data-quarter='2025Q4']")[0]
    assert [td.text for td in row] == ["2025Q4", "v2", "not audited yet"]

    # an addendum that is not one stops the board with one line naming it
    (copy.base / addendum_rel("2025Q3", "v1")).write_text("{not json")
    with pytest.raises(ValueError, match=r"releases/2025Q3/v1\.audit\.json: not a human audit's addendum") as caught:
        collect(copy, load_systems(systems), list(QUARTERS))
    assert "\n" not in str(caught.value)


def test_an_audit_published_after_the_board_shows_without_materializing_it_again(audited, tmp_path, capsys):
    """The board was materialized before 2025Q4's audit was published: `veritas leaderboard` shows it anyway."""
    config, copy = store_copy(audited, tmp_path / "later")
    systems = systems_folder(audited, tmp_path / "systems")
    rel = addendum_rel("2025Q4", "v1")
    held = copy.get_bytes(rel)
    (copy.base / rel).unlink()  # not audited yet when the board is materialized
    assert dg.materialize([leaderboard], resources={"store": copy, "board": LeaderboardSettings(
        systems_dir=str(systems), bootstrap_resamples=50)}).success
    capsys.readouterr()
    assert main(["--config", config, "leaderboard"]) == 0
    assert [line for line in capsys.readouterr().out.splitlines() if line.startswith("human audit")] == [
        f"human audit 2025Q3 (release v1): {leaderboard_line(audited['addenda']['2025Q3'])}"]
    copy.put_bytes(rel, held)  # the audit is published
    assert main(["--config", config, "leaderboard"]) == 0
    assert [line for line in capsys.readouterr().out.splitlines() if line.startswith("human audit")] == [
        f"human audit {q} (release v1): {leaderboard_line(audited['addenda'][q])}" for q in QUARTERS]


def test_evaluate_names_the_release_version_it_scored_and_its_audit(audited, tmp_path, capsys):
    """`veritas evaluate` names the version of each release it scored, from the store and from an export (whose
    folders are named after their quarters), and that version's human audit when it is published beside it."""
    systems = systems_folder(audited, tmp_path / "systems")
    exported = tmp_path / "export"
    assert main(["--config", audited["config"], "export", "--quarter", *QUARTERS, "--out", str(exported)]) == 0
    for release, quarter in ((audited["store"].base / "releases" / "2025Q3", "2025Q3"), (exported, None)):
        out = tmp_path / f"report-{quarter or 'all'}"
        capsys.readouterr()
        assert main(["--config", audited["config"], "evaluate", "--predictions", str(systems / "2025Q3.json"),
                     "--release", str(release), "--quarter", "2025Q3", "--system", "halver", "--out", str(out)]) == 0
        printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("release ")]
        report = json.loads((out / "evaluation.json").read_text())
        for q in ([quarter] if quarter else QUARTERS):
            scored = report["releases"][q]
            assert (scored["version"], scored["human_audit"]) == ("v1", audited["addenda"][q]["summary"])
            assert scored["content_id"] == audited["addenda"][q]["release"]["content_id"]
            assert f"release {q}: version v1 (content id {scored['content_id']}); human audit: " \
                   f"{audited['addenda'][q]['summary']}" in printed


def gold_pixels(path: Path) -> int:
    r0, g0, b0 = (int(AUDIT_COLOUR[i:i + 2], 16) for i in (1, 3, 5))
    with Image.open(path) as image:
        colours = image.convert("RGB").getcolors(maxcolors=4_000_000)
    return sum(n for n, (r, g, b) in colours if abs(r - r0) + abs(g - g0) + abs(b - b0) <= 30)


def test_the_longitudinal_view_plots_the_audits_agreement(audited, tmp_path):
    store, systems = audited["store"], systems_folder(audited, tmp_path / "systems")
    board = compute_board(collect(store, load_systems(systems), list(QUARTERS)), resamples=50)
    mse = audited["addenda"]["2025Q4"]["overall"]["mse"]
    assert audit_rows(board) == [
        {"quarter": "2025Q3", "release_version": "v1", "agreement3": 1.0, "mse": 0.0, "claims": 8, "passed": True},
        {"quarter": "2025Q4", "release_version": "v1", "agreement3": 0.5, "mse": mse, "claims": 8, "passed": False}]
    text = longitudinal_text(board)
    assert "People's agreement with the labels" in text and f"2025Q4   0.5000  {mse:.4f}      8  below" in text
    with_audit = plot_longitudinal(board, tmp_path / "with.png")
    without = plot_longitudinal({**board, "audit": {}, "audit_figures": {}}, tmp_path / "without.png")
    assert gold_pixels(with_audit) > 100 and gold_pixels(without) == 0

    assert dg.materialize([leaderboard], resources={"store": store, "board": LeaderboardSettings(
        systems_dir=str(systems), bootstrap_resamples=50)}).success
    written = json.loads(store.get_bytes("reports/leaderboard/longitudinal.json"))
    assert [r["agreement3"] for r in written["audit"]] == [1.0, 0.5]


# ---- `veritas yields` and the dashboard -------------------------------------------------------------------------


def test_yields_and_the_dashboard_show_each_quarters_latest_audit(audited, capsys):
    assert AUDIT_ASSET == release_audit.key.to_user_string()  # the light name is the code location's
    reports = collect_range(audited["config"], *QUARTERS)
    for report in reports:
        addendum, audit = audited["addenda"][report["quarter"]], report["audit"]
        assert (audit["release_version"], audit["summary"], audit["passed"]) == ("v1", addendum["summary"],
                                                                                addendum["passed"])
        assert (audit["agreement3"], audit["claims"], audit["annotators"]) == (addendum["overall"]["agreement3"], 8, 2)
    text = format_range(reports)
    assert ("human audit of release v1: people agree with the labels: 3-bin 100%, MSE 0.000, n 8 claims, "
            "2 annotators; Krippendorff's alpha 1.000 among the annotators; gate passed") in text
    mse = audited["addenda"]["2025Q4"]["overall"]["mse"]
    assert (f"human audit of release v1: people agree with the labels: 3-bin 50%, MSE {mse:.3f}, n 8 claims, "
            "2 annotators (below the gate 80%); Krippendorff's alpha 1.000 among the annotators; gate FAILED") in text
    assert "Nothing materialized for" not in text  # an audited quarter has something to show

    assert main(["--config", audited["config"], "yields", "--quarter", "2025Q4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["audit"]["summary"] == audited["addenda"]["2025Q4"]["summary"]

    doc = lxml.html.fromstring(render_html(reports))
    rows = doc.xpath("//table[@id='audit-table']/tbody/tr")
    assert [r.xpath("td")[0].text for r in rows] == list(QUARTERS) and [r.get("class") for r in rows] == [None, "warn"]
    field = lambda q, f: doc.xpath(f"//td[@data-quarter='{q}'][@data-field='{f}']")[0].text  # noqa: E731
    assert (field("2025Q3", "agreement3"), field("2025Q3", "gate")) == ("100.0%", "passed")
    assert (field("2025Q4", "agreement3"), field("2025Q4", "gate")) == ("50.0%", "FAILED")
    assert float(field("2025Q4", "mse")) == pytest.approx(mse)
    # beside a quarter's funnel too (these quarters' releases were written without the pipeline's stages)
    staged = [{**r, "stages": {"reviews": {"rows_in": 20, "rows_out": 16, "dropped": 4, "drops": {}, "extras": {}}}}
              for r in reports]
    doc = lxml.html.fromstring(render_html(staged))
    assert doc.xpath("//figure[@id='chart-funnel']") and len(doc.xpath("//table[@id='audit-table']/tbody/tr")) == 2
    assert "No release in these quarters has been audited" in lxml.html.fromstring(render_html(
        [{"quarter": "2019Q1", "stages": {}, "checks": {}}])).text_content()


# ---- the handbook ----------------------------------------------------------------------------------------------------


def test_the_handbook_lists_the_audit_check_and_where_the_audit_shows():
    operations = (PROJECT_ROOT / "docs/operations.md").read_text()
    checks = operations.split("## Asset checks")[1].split("\n## ")[0]
    assert "| `audit_agreement` | `release_audit` | WARN |" in checks
    audit = (PROJECT_ROOT / "docs/how-to/audit.md").read_text()
    for where in ("veritas yields", "veritas export", "leaderboard", "longitudinal", "dashboard"):
        assert where in audit.split("## Where the audit shows")[1].split("\n## ")[0], where
