"""Issue 50 on the simulated quarter (tests/simulated.py): the whole offline audit, as a maintainer runs it.

`veritas audit export` writes the tasks of a secret sample of the release; three simulated annotators judge them from
the quarter's planted truth with a known noise (each answer the planted category, but with probability ``FLIP`` one of
the other two; certain, but with probability ``SHIFT`` only rather certain); their answers go back as Label Studio's
JSON export through `veritas audit import`, first one annotator's (the audit waits), then all three (it is computed).

The noise implies how far the audit may stray from the release: the same annotators drawn ``DRAWS`` times against the
same release give the distribution of the audit's MSE and 3-bin agreement, and the audit of the one draw that went
through export and import must fall within its 99.8% interval. A planted fault, a panel that calls every image claim
Intact, must show in the breakdown by media kind (image agreement below the honest release's interval, text claims
untouched) and fail the audit's check, with the faulty claims as errata.
"""

import hashlib
import json
import random
import shutil
import statistics
from pathlib import Path

import pytest
import yaml

from assets.audit.agreement import units_of
from assets.audit.annotations import score_of, to_export
from assets.audit.asset import ANNOTATIONS, sampled_claims
from assets.rules.bins import bin3, bin3_published
from dagster_project.simulation.panel import TARGET
from dagster_project.simulation.run import agreement as planted_agreement
from dagster_project.simulation.run import planted
from tests.simulated import QUARTER, SIM_KEY

ANNOTATORS = ("ann-1@example.org", "ann-2@example.org", "ann-3@example.org")
FLIP, SHIFT = 0.05, 0.3  # the annotators' known noise
SAMPLE = 80  # of the release's 100 claims
DRAWS = 1000  # draws of the same noise that give its interval
TAIL = 0.001  # the interval leaves this share out on each side: 99.8%
OTHER = {"positive": ("negative", "unknown"), "negative": ("positive", "unknown"), "unknown": ("positive", "negative")}


@pytest.fixture(scope="module")
def world(simulated, tmp_path_factory):
    """A copy of the simulated quarter's store (the session's stays as it is) and a config for it, with its own
    Dagster instance; the environment holds the release order key the release was drawn with."""
    assert simulated["ok"], "the simulated quarter's run failed"
    folder = tmp_path_factory.mktemp("audit")
    shutil.copytree(simulated["folder"] / "data" / "data", folder / "state" / "data")
    config = folder / "veritas.yaml"  # the quarter's own stage settings (its release size), and the audit's sample
    stages = yaml.safe_load(Path(simulated["config"]).read_text())["stages"]
    config.write_text(yaml.safe_dump({"data_dir": str(folder / "state"),
                                      "stages": {**stages, "audit_sample_size": SAMPLE}}))
    with pytest.MonkeyPatch.context() as mp:
        for name, value in SIM_KEY.items():
            mp.setenv(name, value)
        mp.setenv("DAGSTER_HOME", str(folder / "dagster"))
        yield {"config": str(config), "folder": folder, "truth": simulated["truth"], "store": folder / "state" / "data"}


def store_of(world):
    from dagster_project.config import load_config
    from dagster_project.resources.store import StoreResource
    from dagster_project.stage_settings import stage_settings

    config = load_config(world["config"])
    return StoreResource(**config["store"]), stage_settings(config["stages"])["audit"]


def planted_category(claim: dict, truth: dict) -> str:
    """The planted category a careful rater judges a released claim by (a rewrite is Intact by construction)."""
    by_url = {u: t for t in truth["claims"].values() for u in t["review_urls"]}
    _, _, rectified = planted(claim, truth, by_url)
    return "intact" if rectified else by_url[claim["review_url"]]["category"]


def targets_of(claims: dict[int, dict], truth: dict) -> dict[int, tuple[dict, int, str]]:
    """claim id -> (the category a careful rater gives each property, its media count, its text)."""
    return {cid: (TARGET[planted_category(c, truth)], len(c["media"]), c["text"]) for cid, c in claims.items()}


def annotate(claims: dict[int, dict], truth: dict, seed: int, annotators=ANNOTATORS, targets=None) -> dict:
    """claim id -> annotator -> (property, medium) -> (category, certainty): the planted truth with the known noise,
    drawn per claim from ``seed`` and the claim's text (the same claim gets the same answers whatever its id)."""
    out = {}
    for cid, (target, media, text) in sorted((targets or targets_of(claims, truth)).items()):
        rng = random.Random(f"{seed}\x1f{text}")
        questions = [("veracity", -1), ("context_coverage", -1)] + [
            (p, i) for i in range(media) for p in ("authenticity", "contextualization")]
        for name in annotators:
            given = {}
            for prop, medium in questions:
                category = target[prop] if rng.random() >= FLIP else rng.choice(OTHER[target[prop]])
                given[(prop, medium)] = (category, "rather certain" if rng.random() < SHIFT else "certain")
            out.setdefault(cid, {})[name] = given
    return out


def as_scores(answers: dict) -> dict:
    return {cid: {a: {k: score_of(*v) for k, v in given.items()} for a, given in by.items()}
            for cid, by in answers.items()}


def overall(sampled, scores, kind: str | None = None) -> tuple[float, float]:
    """(MSE, 3-bin agreement) of the annotators' mean integrity against the release (on one media kind)."""
    units = [u for u in units_of(sampled, scores) if u["property"] == "integrity" and u["humans"]
             and (kind is None or u["media_kind"] == kind)]
    means = [statistics.fmean(u["humans"].values()) for u in units]
    return (statistics.fmean((m - u["release"]) ** 2 for m, u in zip(means, units)),
            sum(bin3(m) == bin3_published(u["release"]) for m, u in zip(means, units)) / len(units))


def noise_interval(sampled, claims, truth, kind: str | None = None) -> dict:
    """The 99.8% interval of the audit's MSE and 3-bin agreement that the annotators' noise alone implies."""
    targets = targets_of(claims, truth)
    draws = [overall(sampled, as_scores(annotate(claims, truth, 1000 + i, targets=targets)), kind)
             for i in range(DRAWS)]
    mse, agree = sorted(d[0] for d in draws), sorted(d[1] for d in draws)
    lo, hi = int(TAIL * DRAWS), int((1 - TAIL) * DRAWS) - 1
    return {"mse": (mse[lo], mse[hi]), "agreement3": (agree[lo], agree[hi]),
            "mean_mse": statistics.fmean(mse), "mean_agreement3": statistics.fmean(agree),
            "rank": lambda name, value: sum(v <= value for v in (mse if name == "mse" else agree)) / DRAWS}


def release_claims(store: Path) -> tuple[Path, dict[int, dict]]:
    root = store / "releases" / QUARTER
    folder = root / (root / "LATEST").read_text().strip()
    return folder, {c["id"]: c for c in json.loads((folder / "claims.json").read_text())["claims"]}


def fingerprint(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def run_audit(world, seed: int, tag: str, first_alone: bool = True) -> dict:
    """Export the tasks, annotate them, import one annotator's answers and then all three's (as Label Studio's
    export grows); what the second import gave, with the tasks, the answers and the sampled claims."""
    from dagster_project.commands.audit import export_files, import_export

    out = world["folder"] / f"tasks-{tag}"
    export_files(world["config"], QUARTER, out)
    tasks = json.loads((out / "tasks.json").read_text())
    _, claims = release_claims(world["store"])
    sampled = {t["data"]["claim_id"]: claims[t["data"]["claim_id"]] for t in tasks}
    answers = annotate(sampled, world["truth"], seed)
    if first_alone:
        one = {cid: {ANNOTATORS[0]: by[ANNOTATORS[0]]} for cid, by in answers.items()}
        (out / "export-1.json").write_text(json.dumps(to_export(tasks, one)))
        early = import_export(world["config"], QUARTER, out / "export-1.json")
        assert "failed" not in early and early["annotations"]["short"] == SAMPLE and "audit" not in early
    (out / "export-3.json").write_text(json.dumps(to_export(tasks, answers)))
    got = import_export(world["config"], QUARTER, out / "export-3.json")
    assert "failed" not in got, got.get("failed")
    return {**got, "tasks": tasks, "answers": answers, "sampled": sampled}


def test_the_audit_recovers_the_panels_error_within_what_the_noise_implies(world, capsys):
    folder, claims = release_claims(world["store"])
    before = fingerprint(folder)
    got = run_audit(world, seed=1, tag="honest")
    assert len(got["tasks"]) == SAMPLE and len({t["data"]["claim_id"] for t in got["tasks"]}) == SAMPLE
    meta = got["audit"]
    addendum_path = Path(meta["addendum"])
    assert addendum_path == folder.parent / f"{folder.name}.audit.json"  # beside the release, not in it
    data = addendum_path.read_bytes()
    assert (folder.parent / f"{folder.name}.audit.json.sha256").read_text().split()[0] == \
        hashlib.sha256(data).hexdigest() == meta["addendum_sha256"]
    assert fingerprint(folder) == before  # the release itself is unchanged
    addendum = json.loads(data)
    assert addendum["release"]["version"] == folder.name and "by_variant" not in addendum
    assert "variant" not in addendum["sample"]["strata"] and set(addendum["by_media_kind"]) <= {"text", "image", "video"}

    store, settings = store_of(world)
    _, _, sampled = sampled_claims(store, settings, QUARTER)
    interval = noise_interval(sampled, got["sampled"], world["truth"])
    o = addendum["overall"]
    panel = planted_agreement(folder, world["truth"])
    with capsys.disabled():
        print(f"\n[audit] {QUARTER}, {SAMPLE} of 100 claims, 3 annotators (flip {FLIP}, shift {SHIFT}): MSE {o['mse']:.4f}"
              f" (noise interval {interval['mse'][0]:.4f}-{interval['mse'][1]:.4f}, mean {interval['mean_mse']:.4f}), "
              f"3-bin {o['agreement3']:.3f} (interval {interval['agreement3'][0]:.3f}-{interval['agreement3'][1]:.3f}, "
              f"mean {interval['mean_agreement3']:.3f}); percentiles of the draws: MSE "
              f"{interval['rank']('mse', o['mse']):.1%}, 3-bin {interval['rank']('agreement3', o['agreement3']):.1%}; "
              f"alpha annotators {o['alpha_annotators']}, with the ensemble "
              f"{o['alpha_with_ensemble']}; the panel against the planted truth: MSE {panel['mse']}, 3-bin "
              f"{panel['accuracy_3bin']}")
    # the path through Label Studio's files and the pipeline adds nothing: the same answers computed directly agree
    direct = overall(sampled, as_scores(got["answers"]))
    assert (o["mse"], o["agreement3"]) == (round(direct[0], 4), round(direct[1], 4))
    assert interval["mse"][0] <= o["mse"] <= interval["mse"][1]
    assert interval["agreement3"][0] <= o["agreement3"] <= interval["agreement3"][1]
    assert o["n"] == SAMPLE and addendum["annotators"] == 3 and addendum["passed"] and got["check_passed"] is True
    assert panel["accuracy_3bin"] >= 0.97  # the release itself is right: what the audit sees is the annotators' noise

    # the offline round trip: the store holds exactly the answers the annotators gave
    table = store.read_table(ANNOTATIONS, QUARTER)
    stored = {(r["claim_id"], r["annotator"], r["property"], r["medium_index"]): (r["category"], r["certainty"])
              for r in table.iter_rows(named=True) if r["property"] != "note"}
    given = {(cid, a, p, m): (cat, "" if cat == "unknown" else cert)
             for cid, by in got["answers"].items() for a, answers in by.items()
             for (p, m), (cat, cert) in answers.items()}
    assert stored == given


def fault_release(store: Path, kind: str = "image") -> Path:
    """A new version of the quarter's release whose panel was wrong on one media kind: every claim with an image
    published as Intact on every property (as a panel that trusts every picture would). LATEST points at it."""
    folder, _ = release_claims(store)
    faulty = folder.parent / f"{folder.name}-fault"
    shutil.copytree(folder, faulty)
    payload = json.loads((faulty / "claims.json").read_text())
    for c in payload["claims"]:
        if {m["type"] for m in c["media"]} == {kind}:
            for m in c["media"]:
                for prop in ("authenticity", "contextualization"):
                    m[prop] = {"score": 1.0, "justification": m[prop]["justification"] if m.get(prop) else ""}
            c["veracity"] = {"score": 1.0, "justification": (c["veracity"] or {}).get("justification", "")}
            c["context_coverage"] = {"score": 1.0, "justification": (c["context_coverage"] or {}).get("justification", "")}
            c["integrity"] = {"score": 1.0, "decisive_property": "context_coverage"}
    (faulty / "claims.json").write_text(json.dumps(payload, indent=1, ensure_ascii=False))
    manifest = json.loads((faulty / "manifest.json").read_text())
    manifest["files"]["claims.json"] = hashlib.sha256((faulty / "claims.json").read_bytes()).hexdigest()
    (faulty / "manifest.json").write_text(json.dumps(manifest, indent=2))
    (folder.parent / "LATEST").write_text(faulty.name)
    return faulty


def test_a_panel_wrong_on_images_shows_in_the_breakdown_fails_the_check_and_its_errata_are_fixed(
        world, capsys):
    store, settings = store_of(world)
    _, honest_claims = release_claims(world["store"])
    _, _, honest_sample = sampled_claims(store, settings, QUARTER)
    honest = {c.id: honest_claims[c.id] for c in honest_sample}
    image_interval = noise_interval(honest_sample, honest, world["truth"], kind="image")
    faulty = fault_release(world["store"])
    got = run_audit(world, seed=2, tag="fault", first_alone=False)
    addendum = json.loads(Path(got["audit"]["addendum"]).read_text())
    assert addendum["release"]["version"] == faulty.name
    image = addendum["by_media_kind"]["image"]["integrity"]
    text = addendum["by_media_kind"]["text"]["integrity"]
    with capsys.disabled():
        print(f"\n[audit] panel wrong on images: overall 3-bin {addendum['overall']['agreement3']:.3f}, "
              f"MSE {addendum['overall']['mse']:.4f}; image 3-bin {image['agreement3']:.3f} (n {image['n']}; the honest "
              f"release's noise interval {image_interval['agreement3'][0]:.3f}-{image_interval['agreement3'][1]:.3f}), "
              f"MSE {image['mse']:.4f}; text 3-bin {text['agreement3']:.3f} (n {text['n']}); "
              f"{len(addendum['errata'])} errata")
    assert image["agreement3"] < image_interval["agreement3"][0]  # far outside what the noise explains
    assert text["agreement3"] >= 0.8 and text["agreement3"] - image["agreement3"] > 0.3
    assert got["check_passed"] is False and not addendum["passed"]
    claims = json.loads((faulty / "claims.json").read_text())["claims"]
    kinds = {c["id"]: {m["type"] for m in c["media"]} for c in claims}
    assert addendum["errata"] and all(kinds[cid] == {"image"} for cid in addendum["errata"])
    # each erratum is a claim the panel called Intact against its planted Compromised or Unknown label
    by_id = {c["id"]: c for c in claims}
    assert all(planted_category(by_id[cid], world["truth"]) != "intact" for cid in addendum["errata"])

    # the errata build the next version: the release asset leaves them out of its pool (with their other variants),
    # its selection replaces them, release_errata writes the changelog; the faulty version stays as it was
    before = fingerprint(faulty)
    from dagster_project.commands.audit import errata

    fixed = errata(world["config"], QUARTER)
    assert "failed" not in fixed, fixed.get("failed")
    new_folder, new_claims = release_claims(world["store"])
    assert new_folder.name == fixed["version"] != faulty.name and fingerprint(faulty) == before
    log = json.loads(Path(fixed["changelog"]).read_text())
    assert log["previous_version"] == faulty.name and sorted(log["errata_applied"]) == sorted(addendum["errata"])
    removed = {r["id"]: r for r in log["removed"]}
    assert set(addendum["errata"]) <= set(removed)
    assert all(removed[cid]["reason"].startswith("erratum: 3 annotators label it") for cid in addendum["errata"])
    erratum_texts = {by_id[cid]["text"] for cid in addendum["errata"]}
    assert not erratum_texts & {c["text"] for c in new_claims.values()}
    assert len(new_claims) == len(claims) and len(log["added"]) == len(log["removed"])  # replaced from the pool
    meta = json.loads((new_folder / "meta.json").read_text())["claim_counts"]
    assert meta["intact"] == meta["compromised"]  # still balanced
    with capsys.disabled():
        print(f"[audit] errata: {fixed['version']} leaves out {len(log['errata_applied'])} errata of {faulty.name}: "
              f"{len(log['removed'])} claims removed, {len(log['added'])} added, {log['kept']} kept; {meta}")
