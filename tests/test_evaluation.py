"""MSE-based evaluation: matching by claim and media id, missing properties left out, grouping, bins."""

import pytest

from assets.evaluation import evaluate, metrics, modality, pairs
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
