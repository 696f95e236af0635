"""MSE-based evaluation: matching by claim and media id, missing properties left out, grouping, bins."""

import json

import pytest

from assets.evaluation.evaluation import evaluate, metrics, modality, pairs
from schemas.records import PredictedMedium, Prediction, ReleaseClaim


def gold(cid, integrity, veracity=None, coverage=None, media=(), language="en"):
    return ReleaseClaim.model_validate({
        "id": cid, "text": "t", "date": "2020-05-01", "language": language, "review_url": "https://x.org",
        "media": [{"type": t, "id": mid, "file_path": f"images/{mid}.jpg",
                   "authenticity": {"score": a, "justification": ""}, "contextualization": None} for t, mid, a in media],
        "veracity": None if veracity is None else {"score": veracity, "justification": ""},
        "context_coverage": None if coverage is None else {"score": coverage, "justification": ""},
        "integrity": {"score": integrity, "decisive_property": "veracity"},
    })


def pred(cid, integrity=None, veracity=None, coverage=None, media=()):
    return Prediction(claim_id=cid, quarter="2020Q2", system="s", integrity=integrity, veracity=veracity,
                      context_coverage=coverage, media=[PredictedMedium(id=i, authenticity=a) for i, a in media])


def test_pairs_leave_out_what_either_side_misses():
    g = [gold(1, -1.0, veracity=-1.0, media=[("image", 7, 0.5)]), gold(2, 0.5, veracity=0.5, coverage=0.5), gold(3, 0.0)]
    p = [pred(1, integrity=-0.5, veracity=None, media=[(7, 1.0)]), pred(2, integrity=1.0, coverage=0.0)]
    rows = pairs(g, p)
    got = sorted((r["claim_id"], r["property"], r["gold"], r["pred"]) for r in rows)
    assert got == [(1, "authenticity", 0.5, 1.0), (1, "integrity", -1.0, -0.5),
                   (2, "context_coverage", 0.5, 0.0), (2, "integrity", 0.5, 1.0)]


def test_metrics_values():
    rows = [{"gold": -1.0, "pred": -0.5}, {"gold": 0.5, "pred": 1.0}, {"gold": 0.0, "pred": 0.6667}]
    m = metrics(rows)
    assert m["n"] == 3
    assert m["mse"] == pytest.approx((0.25 + 0.25 + 0.4444889) / 3, abs=1e-4)
    assert m["mae"] == pytest.approx((0.5 + 0.5 + 0.6667) / 3, abs=1e-4)
    # 3 bins: compromised/compromised, intact/intact, unknown/intact -> 2 of 3
    assert m["acc3"] == pytest.approx(0.6667, abs=1e-4)
    # 7 bins: -1.0 -> 0 vs -0.5 -> 2; 0.5 -> 4 vs 1.0 -> 6; 0.0 -> 3 vs 0.667 -> 5
    assert m["acc7"] == 0.0
    assert metrics([])["mse"] is None


def test_grouping_by_modality_and_language():
    g = [gold(1, -1.0, media=[("video", 1, 0.0)], language="de"), gold(2, 1.0, language="ar"), gold(3, 0.3333)]
    p = [pred(1, integrity=-1.0), pred(2, integrity=0.0)]
    report = evaluate(g, p)
    assert report["claims"] == 3 and report["predicted"] == 2 and report["coverage"] == pytest.approx(0.6667, abs=1e-4)
    assert report["modality"]["video"]["mse"] == 0.0
    assert report["modality"]["text"]["mse"] == 1.0
    assert set(report["language"]) == {"de", "ar"}
    assert modality(g[0]) == "video" and modality(g[1]) == "text"


# ------------------------------------------------------------------ hand-computed set, exact to 1e-9


def hand_set():
    """Four gold claims (text, image, video+image, text) and three predictions; worked out by hand below."""
    g = [
        gold(1, -1.0, veracity=-1.0),
        ReleaseClaim.model_validate({
            "id": 2, "text": "t <image:10>", "date": "2025-11-02", "language": "de", "review_url": "https://x.org/2",
            "media": [{"type": "image", "id": 10, "file_path": "images/10.jpg",
                       "authenticity": {"score": 1.0, "justification": ""},
                       "contextualization": {"score": 0.5, "justification": ""}}],
            "veracity": {"score": 0.5, "justification": ""}, "context_coverage": {"score": 0.5, "justification": ""},
            "integrity": {"score": 0.5, "decisive_property": "contextualization"},
        }),
        gold(3, 0.0, media=[("video", 20, 0.0), ("image", 21, -0.5)]),
        gold(4, 1.0),
    ]
    p = [
        pred(1, integrity=-0.25, veracity=-0.75),
        Prediction(claim_id=2, quarter="2025Q4", system="s", integrity=1.0, veracity=None, context_coverage=0.0,
                   media=[PredictedMedium(id=10, authenticity=0.25, contextualization=None)]),
        pred(3, integrity=0.1, media=[(21, -1.0), (20, 0.5)]),  # media listed in the other order: matched by id
    ]
    return g, p


def test_hand_computed_metrics_exact():
    g, p = hand_set()
    report = evaluate(g, p, "2025Q4")
    prop = report["property"]
    # integrity: (-1,-0.25) (0.5,1.0) (0,0.1): squares .5625 .25 .01; bins3 C/U I/I U/U; bins7 0/2 4/6 3/3
    assert prop["integrity"]["n"] == 3
    assert abs(prop["integrity"]["mse"] - 0.2741666666666667) < 1e-9
    assert abs(prop["integrity"]["mae"] - 0.45) < 1e-9
    assert abs(prop["integrity"]["acc3"] - 2 / 3) < 1e-9
    assert abs(prop["integrity"]["acc7"] - 1 / 3) < 1e-9
    # veracity: only claim 1 (claim 2's prediction lacks it): (-1,-0.75); bins7 0 vs 1
    assert prop["veracity"] == {"n": 1, "mse": 0.0625, "mae": 0.25, "acc3": 1.0, "acc7": 0.0}
    assert prop["context_coverage"] == {"n": 1, "mse": 0.25, "mae": 0.5, "acc3": 0.0, "acc7": 0.0}
    # authenticity by medium id: (1.0,0.25) (0.0,0.5) (-0.5,-1.0): squares .5625 .25 .25; only the last 3-bin matches
    assert prop["authenticity"]["n"] == 3
    assert abs(prop["authenticity"]["mse"] - 1.0625 / 3) < 1e-9
    assert abs(prop["authenticity"]["mae"] - 1.75 / 3) < 1e-9
    assert abs(prop["authenticity"]["acc3"] - 1 / 3) < 1e-9
    assert prop["authenticity"]["acc7"] == 0.0
    assert "contextualization" not in prop  # gold has it, the prediction does not: left out
    assert report["modality"]["text"]["mse"] == 0.5625
    assert report["modality"]["image"]["mse"] == 0.25
    assert abs(report["modality"]["video"]["mse"] - 0.01) < 1e-9
    assert abs(report["language"]["en"]["mse"] - 0.28625) < 1e-9 and report["language"]["de"]["mse"] == 0.25
    assert report["coverage"] == 0.75 and report["gold_modalities"] == {"text": 2, "image": 1, "video": 1}
    assert report["confusion3"] == {"labels": ["compromised", "unknown", "intact"],
                                    "matrix": [[0, 1, 0], [0, 1, 0], [0, 0, 1]]}
    assert sum(map(sum, report["confusion7"]["matrix"])) == 3 and report["confusion7"]["matrix"][3][3] == 1


def test_longitudinal_against_the_cutoff():
    from assets.evaluation.evaluation import (
        cutoff_position,
        evaluate_quarters,
        quarter_number,
        relation_to_cutoff,
    )

    g, p = hand_set()
    later_gold = [gold(1, 1.0), gold(2, -1.0)]
    later = [Prediction(claim_id=1, quarter="2026Q1", system="s", integrity=0.0),
             Prediction(claim_id=2, quarter="2026Q1", system="s", integrity=0.0)]
    full = evaluate_quarters({"2026Q1": (later_gold, later), "2025Q4": (g, p)}, cutoff="2025Q4", system="s")
    assert list(full["quarters"]) == ["2025Q4", "2026Q1"]
    lon = full["longitudinal"]
    assert [(x["quarter"], x["relation"]) for x in lon["by_quarter"]] == [("2025Q4", "before"), ("2026Q1", "after")]
    assert abs(lon["before"]["mse"] - 0.2741666666666667) < 1e-9
    assert lon["after"] == {"n": 2, "mse": 1.0, "mae": 1.0, "acc3": 0.0, "acc7": 0.0, "recurring_left_out": 0}
    assert abs(full["overall"]["property"]["integrity"]["mse"] - (0.8225 + 2.0) / 5) < 1e-9
    assert full["overall"]["claims"] == 6 and full["overall"]["predicted"] == 5
    assert quarter_number("2025Q1") - quarter_number("2024Q4") == 1
    assert cutoff_position("2025Q4") == quarter_number("2025Q4") + 0.5
    assert relation_to_cutoff("2025Q4", "2025-11-15") == "after"  # a mid-quarter cut-off: that quarter may leak
    assert relation_to_cutoff("2025Q3", "2025-11-15") == "before"
    assert relation_to_cutoff("2025Q3", "") == "unknown"


def write_release(folder, quarter, claims):
    folder.mkdir(parents=True)
    (folder / "meta.json").write_text(json.dumps({"year": int(quarter[:4]), "quarter": int(quarter[5])}))
    (folder / "claims.json").write_text(json.dumps({"claims": [c.model_dump() for c in claims]}))
    return folder


def test_cli_evaluates_outside_predictions(tmp_path, capsys):
    from PIL import Image

    from dagster_project.cli import main

    g, _ = hand_set()
    releases = tmp_path / "export"
    write_release(releases / "2025Q4", "2025Q4", g)
    write_release(releases / "2026Q1", "2026Q1", [gold(1, 1.0), gold(2, -1.0)])
    outside = {"system": "outside-sys", "predictions": [
        {"claim_id": 1, "quarter": "2025Q4", "integrity": -0.25, "veracity": {"score": -0.75}},
        {"claim_id": 2, "quarter": "2025Q4", "integrity": 1.0, "context_coverage": 0.0,
         "media": [{"id": 10, "authenticity": 0.25}]},
        {"claim_id": 3, "quarter": "2025Q4", "integrity": 0.1,
         "media": [{"id": 21, "authenticity": -1.0}, {"id": 20, "authenticity": 0.5}]},
        {"claim_id": 1, "quarter": "2026Q1", "integrity": 0.0},
        {"claim_id": 2, "quarter": "2026Q1", "integrity": 0.0},
    ]}
    pfile = tmp_path / "preds.json"
    pfile.write_text(json.dumps(outside))
    out = tmp_path / "report"
    assert main(["evaluate", "--predictions", str(pfile), "--release", str(releases), "--out", str(out),
                 "--cutoff", "2025Q4"]) == 0
    printed = capsys.readouterr().out
    assert "2025Q4   property  integrity" in printed and "integrity after cut-off: n=2 MSE=1.0000" in printed
    report = json.loads((out / "evaluation.json").read_text())
    assert report["system"] == "outside-sys" and report["knowledge_cutoff"] == "2025Q4"
    assert abs(report["quarters"]["2025Q4"]["property"]["integrity"]["mse"] - 0.2741666666666667) < 1e-9
    assert report["quarters"]["2025Q4"]["property"]["veracity"]["mse"] == 0.0625
    for name in ("mse_by_quarter.png", "confusion_integrity.png"):
        with Image.open(out / name) as im:
            assert im.format == "PNG" and im.size[0] >= 400
    assert (out / "evaluation.csv").read_text().count("2026Q1") == 3  # integrity, text, en

    # One release folder, JSON Lines without quarter or system: both are filled in.
    lines = tmp_path / "flat.jsonl"
    lines.write_text("\n".join(json.dumps({"id": c, "integrity": s}) for c, s in [(1, -1.0), (2, 0.5), (3, 0.0)]))
    out2 = tmp_path / "r2"
    assert main(["evaluate", "--predictions", str(lines), "--release", str(releases / "2025Q4"),
                 "--out", str(out2), "--cutoff", ""]) == 0
    flat = json.loads((out2 / "evaluation.json").read_text())
    assert flat["system"] == "flat" and flat["quarters"]["2025Q4"]["property"]["integrity"]["mse"] == 0.0


# ------------------------------------------------------------------ recurring claims and the cut-off view


def two_quarters():
    """2025Q4 (before a 2025Q4 cut-off): the hand set; 2026Q1 (after): three claims, squared errors 1, 0.25, 0."""
    g, p = hand_set()
    later = [Prediction(claim_id=c, quarter="2026Q1", system="s", integrity=x) for c, x in [(1, 0.0), (2, -0.5), (3, 0.5)]]
    return {"2025Q4": (g, p), "2026Q1": ([gold(1, 1.0), gold(2, -1.0), gold(3, 0.5)], later)}


def test_after_cutoff_leaves_out_recurring_claims():
    from assets.evaluation.evaluation import evaluate_quarters, text_table

    plain = evaluate_quarters(two_quarters(), cutoff="2025Q4", system="s")
    assert plain["longitudinal"]["after"] == {**metrics([{"gold": 1.0, "pred": 0.0}, {"gold": -1.0, "pred": -0.5},
                                                         {"gold": 0.5, "pred": 0.5}]), "recurring_left_out": 0}
    # 2026Q1's claim 2 recurs (so may 2025Q4's claim 1, before the cut-off: that side keeps it); claim 9 has no pair.
    marked = evaluate_quarters(two_quarters(), cutoff="2025Q4", system="s",
                               recurring={"2026Q1": {2, 9}, "2025Q4": {1}})
    lon = marked["longitudinal"]
    assert lon["after"] == {**metrics([{"gold": 1.0, "pred": 0.0}, {"gold": 0.5, "pred": 0.5}]), "recurring_left_out": 1}
    assert lon["before"] == plain["longitudinal"]["before"] and lon["by_quarter"] == plain["longitudinal"]["by_quarter"]
    assert marked["quarters"] == plain["quarters"] and marked["overall"] == plain["overall"]
    assert "integrity after cut-off: n=2 MSE=0.5000 acc3=0.5000 recurring left out=1" in text_table(marked)


def test_evaluation_asset_reads_the_recurring_marks(tmp_path):
    import dagster as dg

    from assets.evaluation.evaluation import evaluation
    from dagster_project.resources.llm import EnsembleMember, LLMResource
    from dagster_project.resources.store import StoreResource
    from dagster_project.stage_settings import VerifierSettings
    from schemas.frames import to_frame

    store = StoreResource(root=str(tmp_path / "data"))
    for quarter, (g, p) in two_quarters().items():
        folder = write_release(store.base / "releases" / quarter / "v1", quarter, g)
        (folder.parent / "LATEST").write_text("v1")
        if quarter == "2026Q1":  # the release writer's mark: claim 2 recurs from 2025Q4's claim 4
            (folder / "manifest.json").write_text(json.dumps({"recurring": {
                "mode": "flag", "count": 1, "share": 1 / 3, "dropped": 0, "earlier_quarters": ["2025Q4"],
                "claims": {"2": {"quarter": "2025Q4", "id": 4, "by": "text"}}}}))
        store.write_table("predictions", quarter, to_frame(p, Prediction))
    llm = LLMResource(members=[EnsembleMember(name="m", model="openai/m", api_base="http://127.0.0.1:9/v1")],
                      cache_path=str(tmp_path / "cache.sqlite"))
    resources = {"store": store, "verifier": VerifierSettings(knowledge_cutoff="2025Q4"), "llm": llm}
    result = dg.materialize([evaluation], partition_key="2026-01", resources=resources)
    assert result.success
    after = json.loads((store.base / "reports/2026Q1/evaluation.json").read_text())["longitudinal"]["s"]["after"]
    assert after["n"] == 2 and after["recurring_left_out"] == 1 and after["mse"] == 0.5
    assert result.asset_materializations_for_node("evaluation")[0].metadata["claims_recurring"].value == 1


def published_scores() -> list[float]:
    """Every score a release can publish: a mean of 1 to 4 raters' thirds, rounded to 2 decimals (+-1/6 as +-0.17,
    +-1/3 as +-0.33, +-5/6 as +-0.83, the rounded cuts among them)."""
    from itertools import combinations_with_replacement

    thirds = [k / 3 for k in range(-3, 4)]
    return sorted({round(sum(c) / n, 2) for n in range(1, 5) for c in combinations_with_replacement(thirds, n)})


def test_a_copy_of_the_gold_scores_1_on_every_metric():
    """Issue 34: gold was binned with the rounding's tolerance and predictions strictly, so a system that submits
    the release's own scores got 7-bin 0.999 on integrity (a claim at -0.17, -1/6 published) and 0.9986 on
    veracity. Both sides are binned by one rule now."""
    scores = published_scores()
    assert {-0.17, 0.17, -0.33, 0.33, -0.83, 0.83} <= set(scores)
    claims = [ReleaseClaim.model_validate({
        "id": i, "text": "t <image:0>", "date": "2025-08-01", "language": "en", "review_url": f"https://x.org/{i}",
        "media": [{"type": "image", "id": 1000 + i, "file_path": f"images/{1000 + i}.jpg",
                   "authenticity": {"score": s, "justification": ""},
                   "contextualization": {"score": s, "justification": ""}}],
        "veracity": {"score": s, "justification": ""}, "context_coverage": {"score": s, "justification": ""},
        "integrity": {"score": s, "decisive_property": "veracity"},
    }) for i, s in enumerate(scores)]
    copy = [Prediction(claim_id=c.id, quarter="2025Q3", system="gold", integrity=c.integrity.score,
                       veracity=c.veracity.score, context_coverage=c.context_coverage.score,
                       media=[PredictedMedium(id=m.id, authenticity=m.authenticity.score,
                                              contextualization=m.contextualization.score) for m in c.media])
            for c in claims]
    report = evaluate(claims, copy, "2025Q3")
    assert set(report["property"]) == {"integrity", "veracity", "context_coverage", "authenticity", "contextualization"}
    for prop, m in report["property"].items():
        assert (m["n"], m["mse"], m["mae"], m["acc3"], m["acc7"]) == (len(scores), 0.0, 0.0, 1.0, 1.0), prop
    for matrix in (report["confusion3"]["matrix"], report["confusion7"]["matrix"]):
        assert sum(v for i, row in enumerate(matrix) for j, v in enumerate(row) if i != j) == 0
