"""Issue 50, the audit's parts one by one: the secret stratified sample, the blind tasks, the labelling config and the
guide, Label Studio's export read back, the agreement figures and the errata, and where `veritas audit export` may
write. The whole audit on a simulated quarter is tests/test_audit_simulated.py."""

import json
import random
import re
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from assets.audit.agreement import annotator_integrity, audit, public, summary_line, wilson
from assets.audit.annotations import ExportError, merge, read_export, score_of, to_export
from assets.audit.card import audit_card, leaderboard_line
from assets.audit.errata import accumulate, read_errata, without_errata
from assets.audit.labelling import (
    CERTAINTIES,
    GUIDE,
    labelling_config,
    read_answer_name,
)
from assets.audit.pool import audit_claims
from assets.audit.sample import NATURAL, RECTIFIED, AuditClaim, allocate, draw_sample
from assets.audit.tasks import SHOWN, build_tasks, media_link
from schemas.records import Integrity, ReleaseClaim, ReleaseIntegrity, ReleaseMedium, ReleaseScore, ScoredClaim

ROOT = Path(__file__).resolve().parents[1]
KEY = bytes.fromhex("5eed" * 16)
SECRET = "SECRET-JUSTIFICATION"
SCORE = {"intact": 1.0, "unknown": 0.0, "compromised": -1.0}


def release_claim(cid: int, label: str = "intact", kind: str = "", language: str = "en") -> ReleaseClaim:
    s = SCORE[label]
    media = [ReleaseMedium(type=kind, id=100 + cid, file_path=f"{kind}s/{100 + cid}.{'jpg' if kind == 'image' else 'mp4'}",
                           authenticity=ReleaseScore(score=1.0, justification=SECRET),
                           contextualization=ReleaseScore(score=s, justification=SECRET))] if kind else []
    return ReleaseClaim(id=cid, text=f"{f'<{kind}:{100 + cid}> ' if kind else ''}Claim number {cid} says a thing.",
                        date="2025-07-02", language=language, review_url=f"https://factcheck.example/{cid}",
                        media=media, veracity=ReleaseScore(score=s, justification=SECRET),
                        context_coverage=ReleaseScore(score=s, justification=SECRET) if s > 0 else None,
                        integrity=ReleaseIntegrity(score=s, decisive_property="veracity"))


def population(n: int = 200) -> list[AuditClaim]:
    """A release's mix: 3 labels, text/image/video, two languages, one claim in ten rectified."""
    rng = random.Random(3)
    out = []
    for cid in range(1, n + 1):
        label = rng.choice(["intact", "intact", "compromised", "compromised", "unknown"])
        kind = rng.choice(["", "image", "image", "image", "video"])
        out.append(AuditClaim(release_claim(cid, label, kind, rng.choice(["en", "en", "de"])),
                              RECTIFIED if cid % 10 == 0 else NATURAL, review_id=f"r{cid}"))
    return out


# ---- the sample ----------------------------------------------------------------------------------------------

def test_allocation_is_proportional_with_largest_remainders():
    assert allocate({"a": 50, "b": 30, "c": 20}, 10, str) == {"a": 5, "b": 3, "c": 2}
    assert allocate({"a": 5, "b": 3, "c": 2}, 5, str) == {"a": 3, "b": 1, "c": 1}  # remainders .5 .5 .0: ties by order
    assert allocate({"a": 1, "b": 2}, 10, str) == {"a": 1, "b": 2}  # never more than a stratum holds
    assert sum(allocate({i: i + 1 for i in range(40)}, 100, str).values()) == 100


def test_the_sample_is_stratified_and_drawn_from_the_secret_key():
    claims = population()
    ids = draw_sample(claims, KEY, "2025Q3", 100)
    assert len(ids) == len(set(ids)) == 100
    assert draw_sample(list(reversed(claims)), KEY, "2025Q3", 100) == ids  # the release's order plays no part
    other = draw_sample(claims, bytes.fromhex("ab" * 32), "2025Q3", 100)
    assert set(other) != set(ids)  # without the key, another sample: nobody can redo it from the release
    assert set(draw_sample(claims, KEY, "2025Q4", 100)) != set(ids)  # each quarter its own draw
    chosen = [c for c in claims if c.id in set(ids)]
    for dim in ("label", "media_kind", "language", "variant"):
        whole = Counter(getattr(c, dim) for c in claims)
        part = Counter(getattr(c, dim) for c in chosen)
        for value, n in whole.items():  # each stratum's share within rounding of the whole release's
            assert abs(part[value] - n * 100 / len(claims)) <= 3.5, (dim, value, part[value], n)
    assert Counter(c.variant for c in chosen)[RECTIFIED] == 10
    assert sorted(draw_sample(claims[:30], KEY, "2025Q3", 100)) == list(range(1, 31))  # a small release: all of it
    assert ids != sorted(ids)  # the tasks come in the keyed order, not by id


def test_released_claims_are_found_in_the_pool_with_their_variant():
    def pooled(cid: str, text: str, variant: str) -> ScoredClaim:
        return ScoredClaim(claim_id=cid, review_id=f"r-{cid}", quarter="2025Q3", text=text, original_text=text,
                           normalization="original", review_url="https://factcheck.example/7", variant=variant,
                           integrity=Integrity(score=1.0, decisive_property="veracity", label="intact"))

    released = [release_claim(7, "intact", "image")]  # the release renumbers the medium: <image:107>
    pool = [pooled("o", "<image:0> Claim number 7 says another thing.", "original"),
            pooled("r", "<image:0> Claim number 7 says a thing.", "rectified")]
    found, missing = audit_claims(released, pool)
    assert missing == [] and found[0].variant == RECTIFIED and found[0].review_id == "r-r"
    assert audit_claims([release_claim(8)], pool) == ([], [8])


# ---- what an annotator sees ---------------------------------------------------------------------------------

def test_tasks_show_the_claim_media_date_and_article_and_never_a_score():
    claims = [AuditClaim(release_claim(1, "compromised", "image"), RECTIFIED, "r1"),
              AuditClaim(release_claim(2, "intact", "video"), NATURAL, "r2"), AuditClaim(release_claim(3), NATURAL, "r3")]
    articles = {"r1": {"title": "Photo is from 2019", "text": "The photo was taken in 2019.\nNot in 2025."},
                "r2": {"title": "", "text": "Video checked."}}
    tasks = build_tasks(claims, "2025Q3", "v1", "releases/2025Q3/v1", articles,
                        lambda rel, _: media_link("url", rel, base_url="http://127.0.0.1:9/store"))
    assert [t["data"]["claim_id"] for t in tasks] == [1, 2, 3]
    image, video, text = (t["data"] for t in tasks)
    assert image["claim"] == "<image:101> Claim number 1 says a thing." and "2025-07-02" in image["context_line"]
    assert 'src="http://127.0.0.1:9/store/releases/2025Q3/v1/images/101.jpg"' in image["media"][0]["html"]
    assert "<video controls" in video["media"][0]["html"] and text["media"] == []
    assert "<p>The photo was taken in 2019.</p><p>Not in 2025.</p>" in image["article_html"]
    assert "could not be shown" in text["article_html"]  # no article in the store: said, not hidden
    dumped = json.dumps(tasks)
    for leak in (SECRET, "score", "justification", "variant", "rectified", "integrity", "decisive"):
        assert leak not in dumped, leak
    assert set(image) == {*SHOWN, "quarter", "release_version", "claim_id"}


def test_media_links_for_each_way_of_serving_them(tmp_path):
    jpg = tmp_path / "a.jpg"
    jpg.write_bytes(b"\xff\xd8\xff")
    assert media_link("local_files", "releases/2025Q3/v1/images/1.jpg") == \
        "/data/local-files/?d=releases/2025Q3/v1/images/1.jpg"
    assert media_link("inline", "x", local_path=jpg) == "data:image/jpeg;base64,/9j/"
    assert media_link("presigned", "k", presign=lambda rel: f"https://s3.example/{rel}?sig") == "https://s3.example/k?sig"
    with pytest.raises(ValueError, match="audit_media_url"):
        media_link("url", "x")


def test_the_labelling_config_asks_every_question_on_the_ensembles_scale():
    config = labelling_config()
    root = ET.fromstring(config)
    controls = {e.get("name"): e for e in root.iter("Choices")}
    assert set(controls) == {"veracity", "veracity_certainty", "context_coverage", "context_coverage_certainty",
                             "authenticity_{{idx}}", "authenticity_certainty_{{idx}}",
                             "contextualization_{{idx}}", "contextualization_certainty_{{idx}}"}
    for name, element in controls.items():
        aliases = [c.get("alias") for c in element.iter("Choice")]
        assert aliases == (list(CERTAINTIES) if "certainty" in name else ["positive", "negative", "unknown"])
        assert read_answer_name(name.replace("{{idx}}", "2")) is not None
    assert root.find("TextArea").get("name") == "note"
    assert root.find("Repeater").get("on") == "$media"  # as many media questions as the claim has media
    data_keys = set(re.findall(r'"\$(\w+)', config))
    assert data_keys <= set(SHOWN)  # the config shows nothing a task does not hold for the annotator
    assert read_answer_name("authenticity_3") == ("authenticity", 3, False)
    assert read_answer_name("veracity_certainty") == ("veracity", -1, True)
    assert read_answer_name("veracity_1") is None and read_answer_name("authenticity") is None


def test_the_guide_is_in_the_docs_as_it_is_in_the_project():
    guide = " ".join(GUIDE.read_text(encoding="utf-8").split())
    page = " ".join((ROOT / "docs" / "how-to" / "audit.md").read_text(encoding="utf-8").split())
    assert guide in page


# ---- what comes back ----------------------------------------------------------------------------------------

def test_a_category_and_a_certainty_make_the_ensembles_score():
    assert score_of("positive", "certain") == 1.0 and score_of("negative", "rather certain") == pytest.approx(-2 / 3)
    assert score_of("unknown", None) == 0.0 and score_of("positive", "rather uncertain") == pytest.approx(1 / 3)
    assert score_of("positive", None) is None and score_of(None, "certain") is None


def _tasks(n=3):
    return build_tasks([AuditClaim(release_claim(i, "intact", "image"), NATURAL, f"r{i}") for i in range(1, n + 1)],
                       "2025Q3", "v1", "releases/2025Q3/v1", {}, lambda rel, _: media_link("local_files", rel))


def test_an_export_reads_back_the_answers_it_holds():
    answers = {1: {"a@x": {("veracity", -1): ("negative", "rather certain"), ("authenticity", 0): ("unknown", ""),
                           ("contextualization", 0): ("positive", "certain")}},
               2: {"a@x": {("veracity", -1): ("positive", "certain")}, "b@x": {("veracity", -1): ("positive", "certain")}}}
    exported = to_export(_tasks(), answers, notes={(1, "a@x"): "the image did not load"})
    frame, read = read_export(json.loads(json.dumps(exported)), "2025Q3")
    assert read == {"tasks": 3, "annotations": 3, "cancelled": 0}
    got = {(r["claim_id"], r["annotator"], r["property"], r["medium_index"]): (r["category"], r["certainty"], r["score"])
           for r in frame.iter_rows(named=True) if r["property"] != "note"}
    assert got[(1, "a@x", "veracity", -1)] == ("negative", "rather certain", pytest.approx(-2 / 3))
    assert got[(1, "a@x", "authenticity", 0)] == ("unknown", "", 0.0)
    assert got[(2, "b@x", "veracity", -1)] == ("positive", "certain", 1.0) and len(got) == 5
    assert frame.filter(pl.col("property") == "note")["note"].to_list() == ["the image did not load"]


def test_an_export_in_label_studios_own_shapes():
    task = {"id": 9, "data": _tasks(1)[0]["data"], "annotations": [
        {"id": 4, "completed_by": 2, "was_cancelled": False, "result": [  # a user id; choices stored by their text
            {"from_name": "veracity", "to_name": "claim", "type": "choices",
             "value": {"choices": ["Negative: at least one central assertion is false"]}},
            {"from_name": "veracity_certainty", "to_name": "claim", "type": "choices",
             "value": {"choices": ["Certainty: rather uncertain"]}}]},
        {"id": 5, "completed_by": 3, "was_cancelled": True, "result": []}]}
    frame, read = read_export([task], "2025Q3")
    assert read["cancelled"] == 1 and read["annotations"] == 1
    row = frame.row(0, named=True)
    assert (row["annotator"], row["category"], row["certainty"]) == ("user:2", "negative", "rather uncertain")
    assert row["score"] == pytest.approx(-1 / 3)


def test_other_files_are_refused_with_a_reason():
    with pytest.raises(ExportError, match="JSON_MIN"):
        read_export({"not": "tasks"}, "2025Q3")
    with pytest.raises(ExportError, match="not a veritas audit task"):
        read_export([{"data": {"text": "x"}}], "2025Q3")
    with pytest.raises(ExportError, match="of 2025Q3, not 2025Q4"):
        read_export(to_export(_tasks(1), {}), "2025Q4")


def test_a_later_import_replaces_the_annotations_it_names_and_keeps_the_others():
    first = to_export(_tasks(2), {1: {"a": {("veracity", -1): ("positive", "certain")}},
                                  2: {"a": {("veracity", -1): ("positive", "certain")}}})
    earlier, _ = read_export(first, "2025Q3")
    edited = json.loads(json.dumps(first))
    edited[0]["annotations"][0]["result"][0]["value"]["choices"] = ["negative"]
    edited = edited[:1]  # only the first task exported again
    new, _ = read_export(edited, "2025Q3")
    merged = merge(earlier, new)
    assert merged.height == 2
    assert sorted(zip(merged["claim_id"], merged["category"])) == [(1, "negative"), (2, "positive")]


# ---- the figures --------------------------------------------------------------------------------------------

def test_an_annotators_integrity_follows_the_ensembles_rule():
    assert annotator_integrity({("veracity", -1): 1.0, ("context_coverage", -1): -2 / 3}) == pytest.approx(-2 / 3)
    # veracity not true: context coverage is no question
    assert annotator_integrity({("veracity", -1): -1 / 3, ("context_coverage", -1): -1.0}) == pytest.approx(-1 / 3)
    # a medium out of context decides: veracity is not asked
    assert annotator_integrity({("veracity", -1): -1.0, ("contextualization", 0): -2 / 3,
                                ("contextualization", 1): 1.0}) == pytest.approx(-2 / 3)
    assert annotator_integrity({("authenticity", 0): 1.0}) is None


def _answers(claims, flip=None):
    """Three annotators who give each claim's release label as certain; ``flip`` claim ids they all call the
    opposite."""
    out = {}
    for c in claims:
        label = c.label if c.id not in (flip or ()) else {"intact": "compromised", "compromised": "intact",
                                                          "unknown": "intact"}[c.label]
        s = SCORE[label]
        given = {("veracity", -1): s, **({("context_coverage", -1): s} if s > 0 else {})}
        given |= {("contextualization", i): s for i in range(len(c.claim.media))}
        out[c.id] = {a: dict(given) for a in ("a", "b", "c")}
    return out


def test_people_who_agree_with_every_label_give_agreement_1_and_mse_0():
    claims = population(60)
    report = audit(claims, _answers(claims), min_annotators=2, min_agreement=0.8)
    o = report["overall"]
    assert (o["n"], o["mse"], o["agreement3"], report["passed"]) == (60, 0.0, 1.0, True)
    assert o["alpha_with_ensemble"] == 1.0 and report["disputed"] == [] and report["annotators"] == 3
    assert set(report["by_media_kind"]) == {"text", "image", "video"} and set(report["by_variant"]) == {NATURAL, RECTIFIED}
    assert "by_variant" not in public(report) and "by_media_kind" in public(report)
    assert summary_line(report).startswith("people agree with the labels: 3-bin 100%, MSE 0.000, n 60 claims")


def test_claims_people_label_otherwise_are_disputed_and_errata_when_they_agree():
    claims = population(60)
    wrong = [c.id for c in claims if c.label == "compromised"][:9]
    answers = _answers(claims, flip=wrong)
    answers[wrong[0]]["c"] = _answers(claims)[wrong[0]]["c"]  # one annotator sides with the release there
    report = audit(claims, answers, min_annotators=2, min_agreement=0.9)
    assert [d["claim_id"] for d in report["disputed"]] == sorted(wrong)
    assert report["errata"] == sorted(wrong[1:])  # unanimous only
    assert report["overall"]["agreement3"] == pytest.approx(51 / 60, abs=1e-4) and not report["passed"]
    lo, hi = report["overall"]["agreement3_ci"]
    assert lo < 51 / 60 < hi


def test_too_few_annotations_are_listed_short():
    claims = population(10)
    answers = _answers(claims)
    answers[claims[0].id] = {"a": answers[claims[0].id]["a"]}
    assert audit(claims, answers, 2, 0.8)["short"] == [claims[0].id]


def test_wilson_interval():
    assert wilson(0, 0) is None
    lo, hi = wilson(90, 100)
    assert lo == pytest.approx(0.8256, abs=1e-4) and hi == pytest.approx(0.9448, abs=1e-4)


# ---- the command -------------------------------------------------------------------------------------------

def test_audit_export_refuses_a_folder_in_the_store(tmp_path, capsys):
    from dagster_project.cli import main

    config = tmp_path / "veritas.yaml"
    config.write_text(f"data_dir: {tmp_path / 'state'}\n")
    for out in (tmp_path / "state" / "data" / "audit", tmp_path / "state" / "data", tmp_path):
        assert main(["--config", str(config), "audit", "export", "--quarter", "2025Q3", "--out", str(out)]) == 2
        assert "choose a folder outside the store" in capsys.readouterr().err
    assert main(["--config", str(config), "audit", "export", "--quarter", "2025Q3", "--out",
                 str(tmp_path / "elsewhere")]) == 2
    assert "no release for 2025Q3" in capsys.readouterr().err
    assert not (tmp_path / "elsewhere").exists()


# ---- errata and the card ------------------------------------------------------------------------------------

def test_errata_accumulate_and_leave_the_pool_with_their_other_variant():
    def pooled(cid: str, variant: str = "original", variant_of: str = "") -> ScoredClaim:
        return ScoredClaim(claim_id=cid, review_id=f"r-{cid}", quarter="2025Q3", text=f"claim {cid}",
                           original_text="x", normalization="original", review_url=f"https://f.example/{cid}",
                           variant=variant, variant_of=variant_of,
                           integrity=Integrity(score=1.0, decisive_property="veracity", label="intact"))

    pool = [pooled("a", variant_of="a-r"), pooled("a-r", "rectified", "a"), pooled("b"), pooled("c", variant_of="c-r"),
            pooled("c-r", "rectified", "c")]
    first = accumulate(None, [{"claim_id": "a", "variant_of": "a-r", "release_version": "v1", "release_id": 4}])
    both = accumulate(first, [{"claim_id": "c-r", "variant_of": "c", "release_version": "v2", "release_id": 9},
                              {"claim_id": "a", "variant_of": "a-r", "release_version": "v2", "release_id": 1}])
    assert list(both["claims"]) == ["a", "c-r"] and both["claims"]["a"]["release_version"] == "v1"  # the first stays
    kept, out = without_errata(pool, both)
    assert [c.claim_id for c in kept] == ["b"] and out == ["a", "a-r", "c", "c-r"]
    assert read_errata(lambda rel: (_ for _ in ()).throw(FileNotFoundError(rel)), "2025Q3") == {"claims": {}}


def test_the_card_and_the_leaderboard_line_say_how_far_people_agree():
    claims = population(60)
    wrong = [c.id for c in claims if c.label == "compromised"][:9]
    report = audit(claims, _answers(claims, flip=wrong), min_annotators=2, min_agreement=0.9)
    addendum = {**public(report), "quarter": "2025Q3", "sample": {"drawn_from": 1000},
                "release": {"version": "v1", "content_id": "abc", "manifest_sha256": "f" * 64}}
    assert leaderboard_line(addendum) == ("people agree with the labels: 3-bin 85%, MSE 0.600, 60 claims "
                                          "(below the gate 90%)")
    card = audit_card(addendum)
    assert card.startswith("# Human audit of release 2025Q3 (v1)") and "Below the gate" in card
    assert "| integrity | 60 | 0.600 | 85% |" in card and "| de |" in card and "| video |" in card
    assert ", ".join(map(str, sorted(wrong))) in card
    assert "| natural |" not in card and "| rectified |" not in card  # no breakdown that tells rewrites apart
