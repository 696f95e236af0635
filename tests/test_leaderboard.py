"""The leaderboard: three systems over the demo quarters (2020Q2, 2026Q2), numbers checked by hand to 1e-9.

Two verifier configurations run through the assets against a scripted panel on loopback (member "cb" closed-book,
member "rt" retrieval over the demo WARC), one outside system comes as a prediction file per quarter; then the
unpartitioned leaderboard asset, the CLI over windows and the page (structure, and in headless Chromium).

Gold (written below), and what each system predicts for integrity:
  2020Q2  1 image en -1.0 | 2 text en -0.67 | 3 text en 0.0      2026Q2  1 text de -1.0 | 2 text en 0.33
  cb  (cut-off 2024Q4: 2020Q2 before, 2026Q2 clean): text -2/3 (veracity "negative, rather certain"), image -1
      (contextualization "negative, certain" decides, veracity is not asked)
  rt  (cut-off 2019-06-30: both quarters clean): 1/3 everywhere (veracity "positive, rather uncertain", coverage 2/3)
  out (cut-off 2026-05-15, inside 2026Q2: no clean quarter): 2020Q2 -0.5, -1.0, 0.25; 2026Q2 -1.0, 0.5
"""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import dagster as dg
import lxml.html
import polars as pl
import pytest
import yaml

from assets.evaluation.evaluation import evaluation
from assets.evaluation.leaderboard import (
    PAIRS_TABLE,
    SCOPE,
    TABLE,
    System,
    board_table,
    collect,
    compute_board,
    inputs_payload,
    leaderboard,
    load_inputs,
    load_systems,
    quarter_relation,
    text_ranking,
)
from assets.evaluation.leaderboard_page import render_page
from assets.evaluation.predictions import predictions
from dagster_project.cli import main
from dagster_project.config import PROJECT_ROOT, load_config
from dagster_project.resources.llm import EnsembleMember, LLMResource
from dagster_project.resources.store import StoreResource
from dagster_project.resources.web import WebResource
from dagster_project.simulation.openai_stub import serving
from dagster_project.stage_settings import (
    ErrorBudgetSettings,
    LeaderboardSettings,
    VerifierSettings,
    stage_settings,
)
from schemas.frames import to_frame
from schemas.records import Article
from tests.conftest import write_demo_config
from tests.ops_support import rating, rating_reply
from tests.test_verifier import WARC, scripted, warc_body

TOL = 1e-9
HONJO_URL = "https://fullfact.org/online/tasuku-honjo-coronavirus/"
FIVE_G_URL = "https://www.politifact.com/factchecks/2020/apr/07/viral-image/no-video-doesnt-show-people-china-destroying-5g-po/"

REMEMBERED: list[str] = []  # the Honjo article's sentences: the "cb" model reproduces them from memory


# ------------------------------------------------------------------------------------------ registry


def write_system(folder: Path, stem: str, **fields) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}.yaml"
    path.write_text(yaml.safe_dump(fields))
    return path


def test_registry_reads_one_file_per_system(tmp_path):
    systems = tmp_path / "systems"
    write_system(systems, "cb", kind="verifier", member="m1", knowledge_cutoff="2024-q4")
    write_system(systems, "rt", kind="verifier", member="m1", mode="retrieval", strategy="hybrid",
                 knowledge_cutoff="2019-06-30T00:00:00")
    write_system(systems, "out", kind="predictions", knowledge_cutoff="Unknown", name="Outside",
                 predictions={"2026-04": "files/q2.json"})
    cb, out, rt = load_systems(systems)  # sorted by file name
    assert (cb.name, cb.knowledge_cutoff, cb.prediction_system, cb.contamination_member) == ("cb", "2024Q4", "closed_book:m1", "m1")
    assert (rt.knowledge_cutoff, rt.prediction_system) == ("2019-06-30", "retrieval-hybrid:m1")
    assert (out.name, out.knowledge_cutoff, out.prediction_system, out.contamination_member) == ("Outside", "unknown", "Outside", "")
    assert out.predictions == {"2026Q2": str(systems / "files/q2.json")}  # relative to the system file
    assert out.source == str(systems / "out.yaml")

    bad = tmp_path / "bad"
    write_system(bad, "x", kind="verifier", member="m1")
    with pytest.raises(ValueError, match="knowledge_cutoff"):
        load_systems(bad)
    write_system(bad, "x", kind="verifier", knowledge_cutoff="unknown")
    with pytest.raises(ValueError, match="names its ensemble member"):
        load_systems(bad)
    write_system(bad, "x", kind="predictions", knowledge_cutoff="2024Q4")
    with pytest.raises(ValueError, match="lists its prediction files"):
        load_systems(bad)
    write_system(bad, "x", kind="verifier", member="m", knowledge_cutoff="last spring")
    with pytest.raises(ValueError, match="last spring"):
        load_systems(bad)
    write_system(bad, "x", kind="verifier", member="m", knowledge_cutoff="2024Q4")
    write_system(bad, "y", kind="verifier", member="m", knowledge_cutoff="2024Q4", name="x")
    with pytest.raises(ValueError, match="unique"):
        load_systems(bad)
    with pytest.raises(FileNotFoundError, match="no systems registered"):
        load_systems(tmp_path / "empty")


def test_clean_means_the_whole_quarter_is_after_the_cutoff():
    assert quarter_relation("2025Q1", "2024Q4") == "clean" and quarter_relation("2024Q4", "2024Q4") == "before"
    assert quarter_relation("2026Q2", "2026-05-15") == "before"  # the cut-off falls inside: part of it may be known
    assert quarter_relation("2026Q3", "2026-05-15") == "clean"
    assert quarter_relation("2019Q3", "2019-06-30") == "clean" and quarter_relation("2019Q2", "2019-06-30") == "before"
    assert quarter_relation("2020Q2", "unknown") == "unknown"


def test_the_shipped_registry_loads():
    shipped = load_systems(PROJECT_ROOT / "systems")
    assert {s.prediction_system for s in shipped} == {"closed_book:smollm2-t0", "retrieval-parallel:smollm2-t0"}
    members = {m["name"] for m in load_config(PROJECT_ROOT / "veritas.yaml")["llm"]["members"]}
    assert all(s.member in members for s in shipped)


# --------------------------------------------------------------------------------- three systems, by hand


def panel(mode: str, body: dict):
    """The scripted panel: ratings depend on the member ("cb" or "rt", the URL's first segment); planning, answers
    and evidence extraction are the verifier tests' scripted model."""
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    if "Write the fact-check article" in system:
        return 200, json.dumps({"paragraphs": REMEMBERED if "Tasuku Honjo" in user else ["I have no knowledge of this claim."]})
    if mode == "rt":
        reply = rating_reply(user, rating("positive"), rating("positive", "rather uncertain"))
    else:
        reply = rating_reply(user, rating("negative"), rating("negative", "rather certain"))
    return reply if reply[0] == 200 else scripted(mode, body)


def claim(cid, text, when, url, integrity, language="en", media=()):
    return {"id": cid, "text": text, "date": when, "language": language, "review_url": url, "media": list(media),
            "veracity": {"score": integrity, "justification": "gold"}, "context_coverage": None,
            "integrity": {"score": integrity, "decisive_property": "veracity"}}


def write_release(store: StoreResource, quarter: str, claims: list[dict], images: dict) -> None:
    release = store.base / f"releases/{quarter}/v1"
    (release / "images").mkdir(parents=True)
    for name, data in images.items():
        (release / "images" / name).write_bytes(data)
    (release / "claims.json").write_text(json.dumps({"claims": claims}))
    (release / "meta.json").write_text(json.dumps({"year": int(quarter[:4]), "quarter": int(quarter[5])}))
    (release.parent / "LATEST").write_text("v1")


def demo_releases(store: StoreResource) -> None:
    honjo_image = {"type": "image", "id": 11, "file_path": "images/11.jpg",
                   "authenticity": {"score": 1.0, "justification": ""}, "contextualization": {"score": -1.0, "justification": ""}}
    write_release(store, "2020Q2", [
        claim(1, "Nobel laureate Professor Tasuku Honjo said the coronavirus is not natural and was manufactured in "
                 "China. <image:11>", "2020-04-28", HONJO_URL, -1.0, media=[honjo_image]),
        claim(2, "A video shows people in China tearing down 5G poles because the network spreads coronavirus.",
              "2020-04-05", FIVE_G_URL, -0.67),
        claim(3, "Inhaling hot steam and drinking hot tea kills the coronavirus and cures COVID-19.", "2020-04-20",
              "https://africacheck.org/fbcheck/no-hot-steam-and-tea-cant-cure-covid-19/", 0.0),
    ], {"11.jpg": warc_body("https://web.archive.org/web/20200422093011im_/")})
    write_release(store, "2026Q2", [
        claim(1, "Der Hantavirus-Ausbruch ist eine von Globalisten geplante Pandemie.", "2026-05-13",
              "https://faktencheck.afp.com/doc.afp.com.B2LA2G3", -1.0, language="de"),
        claim(2, "The 2026 hantavirus outbreak on a cruise ship was caused by a leak from a research laboratory.",
              "2026-05-18", "https://www.morningbuzz-news.com/health/2026/05/18/hantavirus-lab-claims-what-we-know/", 0.33),
    ], {})


def real_articles(store: StoreResource) -> None:
    """The real 2020Q2 fact-check articles (demo WARC) are the contamination check's oracle."""
    import trafilatura

    real = {u: trafilatura.extract(warc_body(u).decode()) for u in (HONJO_URL, FIVE_G_URL)}
    store.write_table("articles", "2020Q2", to_frame([
        Article(review_id=f"r{i}", review_url=u, final_url=u, raw_chars=len(t), text=t) for i, (u, t) in enumerate(real.items())
    ], Article))
    REMEMBERED[:] = [s for s in re.split(r"(?<=[.!?])\s+", real[HONJO_URL]) if len(s.split()) >= 4][:8]


OUTSIDE = {"2020Q2": [(1, -0.5), (2, -1.0), (3, 0.25)], "2026Q2": [(1, -1.0), (2, 0.5)]}


@pytest.fixture(scope="module")
def board_env(tmp_path_factory):
    folder = tmp_path_factory.mktemp("board")
    systems = folder / "systems"
    write_system(systems, "cb", kind="verifier", member="cb", mode="closed_book", knowledge_cutoff="2024Q4")
    write_system(systems, "rt", kind="verifier", member="rt", mode="retrieval", knowledge_cutoff="2019-06-30")
    for quarter, preds in OUTSIDE.items():  # the `veritas evaluate` format, one file per quarter
        (folder / "outside").mkdir(exist_ok=True)
        (folder / f"outside/{quarter}.json").write_text(json.dumps(
            {"system": "their-name", "predictions": [{"claim_id": c, "integrity": s} for c, s in preds]}))
    write_system(systems, "out", kind="predictions", knowledge_cutoff="2026-05-15",
                 predictions={q: f"../outside/{q}.json" for q in OUTSIDE})
    config = write_demo_config(folder, systems_dir=str(systems), bootstrap_resamples=2000)
    store = StoreResource(**load_config(config)["store"])
    demo_releases(store)
    real_articles(store)
    with serving(panel) as stub, pytest.MonkeyPatch.context() as mp:
        mp.setenv("STUB_KEY", "sk-test")
        members = [EnsembleMember(name=m, model=f"openai/{m}", api_base=stub.base(m), api_key_env="STUB_KEY",
                                  context_window=8192)
                   for m in ("cb", "rt")]
        llm = LLMResource(members=members, cache_path=str(folder / "cache.sqlite"), num_retries=0)
        web = WebResource(warc_paths=[str(WARC)], archive_dir=str(folder / "warc"))
        configurations = [
            VerifierSettings(verifier_member="cb", verifier_mode="closed_book", contamination_check=True),
            VerifierSettings(verifier_member="rt", verifier_mode="retrieval", verifier_questions=2,
                             knowledge_warc_paths=[str(WARC)]),
        ]
        for verifier in configurations:
            for key in ("2020-04", "2026-04"):
                resources = {"verifier": verifier, "error_budget": ErrorBudgetSettings(), "store": store, "llm": llm,
                             "web": web}
                assert dg.materialize([predictions, evaluation], partition_key=key, resources=resources).success
        board = stage_settings(load_config(config)["stages"])["board"]
        result = dg.materialize([leaderboard], resources={"store": store, "board": board})
        assert result.success
    yield {"config": config, "store": store, "folder": folder,
           "meta": result.asset_materializations_for_node("leaderboard")[0].metadata}


def mean(values):
    return sum(values) / len(values)


# Squared errors by hand (gold - predicted)^2, per system and quarter, in claim order.
SE = {
    "cb": {"2020Q2": [0.0, (-0.67 + 2 / 3) ** 2, (2 / 3) ** 2], "2026Q2": [(1 / 3) ** 2, (0.33 + 2 / 3) ** 2]},
    "rt": {"2020Q2": [(4 / 3) ** 2, (0.67 + 1 / 3) ** 2, (1 / 3) ** 2], "2026Q2": [(4 / 3) ** 2, (1 / 3 - 0.33) ** 2]},
    "out": {"2020Q2": [0.25, 0.33 ** 2, 0.0625], "2026Q2": [0.0, 0.17 ** 2]},
}
AE = {s: {q: [v ** 0.5 for v in vs] for q, vs in qs.items()} for s, qs in SE.items()}
# 3 bins (C < -1/3 < U < 1/3 < I) and 7 bins 0..6 (cuts at -5/6, -3/6, -1/6, 1/6, 3/6, 5/6; a cut belongs to the
# inner bin, so bin 4 is (1/6, 1/2] and holds 0.33, 1/3 and 0.5), gold/predicted, claim by claim:
#   cb  2020Q2: C/C U(0)/C C/C -> 3-bin 1,1,0; 7-bin 0/0, 1/1 (-0.67, -2/3), 3/1 -> 1,1,0.  2026Q2: C/C, U/C -> 1,0; 0/1, 4/1 -> 0,0
#   rt  2020Q2: C/U C/U U/U -> 0,0,1; 0/4 1/4 3/4 -> 0.  2026Q2: C/U U/U -> 0,1; 0/4, 4/4 (0.33 and 1/3) -> 0,1
#   out 2020Q2: C/C(-0.5) C/C U/U -> 1,1,1; 0/2 1/0 3/4 -> 0.  2026Q2: C/C U/I -> 1,0; 0/0 4/4 (0.33 and 0.5) -> 1,1
HIT3 = {"cb": {"2020Q2": [1, 1, 0], "2026Q2": [1, 0]}, "rt": {"2020Q2": [0, 0, 1], "2026Q2": [0, 1]},
        "out": {"2020Q2": [1, 1, 1], "2026Q2": [1, 0]}}
HIT7 = {"cb": {"2020Q2": [1, 1, 0], "2026Q2": [0, 0]}, "rt": {"2020Q2": [0, 0, 0], "2026Q2": [0, 1]},
        "out": {"2020Q2": [0, 0, 0], "2026Q2": [1, 1]}}


def expected(system: str, quarters: list[str]) -> dict:
    pick = lambda table: [v for q in quarters for v in table[system][q]]  # noqa: E731
    return {"n": len(pick(SE)), "mse": mean(pick(SE)), "mae": mean(pick(AE)), "acc3": mean(pick(HIT3)),
            "acc7": mean(pick(HIT7))}


def assert_close(got: dict, want: dict) -> None:
    assert got["n"] == want["n"]
    for k in ("mse", "mae", "acc3", "acc7"):
        assert abs(got[k] - want[k]) < TOL, (k, got[k], want[k])


def test_three_systems_per_quarter_and_window_by_hand(board_env):
    board = json.loads((board_env["store"].base / "reports/leaderboard/leaderboard.json").read_text())["board"]
    systems = {s["name"]: s for s in board["systems"]}
    assert board["all_quarters"] == ["2020Q2", "2026Q2"] and set(systems) == {"cb", "rt", "out"}
    assert systems["cb"]["prediction_system"] == "closed_book:cb" and systems["rt"]["prediction_system"] == "retrieval-parallel:rt"
    for name, s in systems.items():
        for q in ("2020Q2", "2026Q2"):
            assert_close(s["quarters"][q], expected(name, [q]))
        assert_close(s["windows"]["all"], expected(name, ["2020Q2", "2026Q2"]))
    assert systems["cb"]["quarters"]["2020Q2"]["claims"] == 3 and systems["out"]["quarters"]["2026Q2"]["predicted"] == 2
    # The clean window holds only the quarters that start after each cut-off; "before" holds the rest.
    assert [systems[s]["windows"]["clean"]["quarters"] for s in ("cb", "rt", "out")] == [["2026Q2"], ["2020Q2", "2026Q2"], []]
    assert [systems[s]["windows"]["before"]["quarters"] for s in ("cb", "rt", "out")] == [["2020Q2"], [], ["2020Q2", "2026Q2"]]
    assert_close(systems["cb"]["windows"]["clean"], expected("cb", ["2026Q2"]))
    assert_close(systems["cb"]["windows"]["before"], expected("cb", ["2020Q2"]))
    assert systems["out"]["windows"]["clean"]["mse"] is None and systems["out"]["windows"]["clean"]["n"] == 0
    # Ranked on every quarter: out 0.0901 < cb 0.3098 < rt 0.9347.
    assert [(s["name"], s["rank"]) for s in board["systems"]] == [("out", 1), ("cb", 2), ("rt", 3)]
    # Two claims: every percentile-bootstrap mean is a, (a+b)/2 or b, with a quarter of them at each end: [min, max].
    assert systems["cb"]["windows"]["clean"]["ci"]["mse"] == pytest.approx(sorted(SE["cb"]["2026Q2"]), abs=TOL)
    assert systems["cb"]["windows"]["clean"]["ci"]["acc3"] == [0.0, 1.0]
    ci = systems["rt"]["windows"]["all"]["ci"]["mse"]
    assert ci[0] < systems["rt"]["windows"]["all"]["mse"] < ci[1]
    # Per modality and per language (every quarter).
    cb = systems["cb"]["windows"]["all"]
    assert cb["modality"]["image"]["n"] == 1 and cb["modality"]["image"]["mse"] == 0.0 and cb["modality"]["image"]["ci"]["mse"] is None
    assert abs(cb["modality"]["text"]["mse"] - mean(SE["cb"]["2020Q2"][1:] + SE["cb"]["2026Q2"])) < TOL
    assert abs(cb["language"]["de"]["mse"] - (1 / 3) ** 2) < TOL
    assert abs(cb["language"]["en"]["mse"] - mean(SE["cb"]["2020Q2"] + SE["cb"]["2026Q2"][1:])) < TOL
    # Contamination ran for "cb" only: 2020Q2 flags the remembered Honjo claim of the two with an oracle article.
    assert systems["cb"]["quarters"]["2020Q2"]["contamination"] == {"flagged": 1, "scored": 2}
    assert systems["cb"]["quarters"]["2026Q2"]["contamination"] == {"flagged": 0, "scored": 0}
    assert systems["cb"]["windows"]["all"]["flagged_share"] == 0.5 and systems["cb"]["windows"]["clean"]["flagged_share"] is None
    assert systems["rt"]["windows"]["all"]["flagged_share"] is None and systems["out"]["windows"]["all"]["flagged_share"] is None


def test_parquet_and_metadata(board_env):
    store = board_env["store"]
    table = store.read_table(TABLE, SCOPE)
    cb_clean = table.filter((pl.col("system") == "cb") & (pl.col("scope") == "window") & (pl.col("window") == "clean")
                            & (pl.col("axis") == "integrity")).to_dicts()
    assert len(cb_clean) == 1 and abs(cb_clean[0]["mse"] - expected("cb", ["2026Q2"])["mse"]) < TOL
    assert cb_clean[0]["claims"] == 2 and cb_clean[0]["rank"] == 2
    per_quarter = table.filter((pl.col("scope") == "quarter") & (pl.col("axis") == "integrity"))
    assert sorted(zip(per_quarter["system"], per_quarter["quarter"], per_quarter["window"])) == [
        ("cb", "2020Q2", "before"), ("cb", "2026Q2", "clean"), ("out", "2020Q2", "before"), ("out", "2026Q2", "before"),
        ("rt", "2020Q2", "clean"), ("rt", "2026Q2", "clean")]
    languages = table.filter((pl.col("system") == "out") & (pl.col("window") == "all") & (pl.col("axis") == "language"))
    assert dict(zip(languages["group"], languages["n"])) == {"de": 1, "en": 4}
    assert store.read_table(PAIRS_TABLE, SCOPE).height == 15  # 5 claims x 3 systems
    meta = board_env["meta"]
    assert meta["systems"].value == 3 and meta["claims_scored"].value == 15 and meta["missing"].value == "none"
    assert (store.base / "reports/leaderboard/leaderboard.html").is_file()


def test_cli_windows_and_after_cutoff(board_env, capsys):
    cfg = board_env["config"]
    assert main(["--config", cfg, "leaderboard", "--after-cutoff", "--json"]) == 0
    board = json.loads(capsys.readouterr().out)
    ranked = [(s["name"], s["rank"]) for s in board["systems"]]
    # cb's clean quarter 2026Q2 (0.5522) beats rt's two (0.9347); out has no quarter after its cut-off: unranked.
    assert ranked == [("cb", 1), ("rt", 2), ("out", None)]
    assert abs(board["systems"][0]["windows"]["clean"]["mse"] - expected("cb", ["2026Q2"])["mse"]) < TOL

    assert main(["--config", cfg, "leaderboard", "--from", "2020Q2", "--to", "2020Q2", "--json"]) == 0
    only = {s["name"]: s for s in json.loads(capsys.readouterr().out)["systems"]}
    assert only["cb"]["windows"]["all"]["quarters"] == ["2020Q2"]
    for name in ("cb", "rt", "out"):
        assert_close(only[name]["windows"]["all"], expected(name, ["2020Q2"]))
    assert only["rt"]["windows"]["clean"]["quarters"] == ["2020Q2"] and only["cb"]["windows"]["clean"]["quarters"] == []

    assert main(["--config", cfg, "leaderboard"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0].startswith("leaderboard 2020Q2..2026Q2, ranked by integrity MSE on every quarter")
    assert [line.split()[:2] for line in lines[2:]] == [["1", "out"], ["2", "cb"], ["3", "rt"]]
    assert f"{expected('out', ['2020Q2', '2026Q2'])['mse']:.4f}" in lines[2]

    assert main(["--config", cfg, "leaderboard", "--from", "2021Q1", "--to", "2025Q4"]) == 2
    assert main(["--config", cfg, "leaderboard", "--from", "2026Q2", "--to", "2020Q2"]) == 2
    assert main(["--config", cfg, "leaderboard", "--from", "soon"]) == 2
    err = capsys.readouterr().err
    assert "no released quarter in 2021Q1..2025Q4" in err and "is after --to" in err and "not a quarter" in err


def test_cli_materializes_and_refuses_missing_files(board_env, tmp_path, capsys):
    empty = write_demo_config(tmp_path)
    assert main(["--config", empty, "leaderboard"]) == 1
    assert "materialize it first" in capsys.readouterr().err
    # The asset stops on a registered prediction file that is missing, naming it.
    systems = tmp_path / "systems"
    write_system(systems, "ghost", kind="predictions", knowledge_cutoff="unknown", predictions={"2020Q2": "nowhere.json"})
    settings = LeaderboardSettings(systems_dir=str(systems))
    result = dg.materialize([leaderboard], resources={"store": board_env["store"], "board": settings},
                            raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert "nowhere.json" in failure.step_failure_data.error.message


# ------------------------------------------------------------------------------ recurring claims, clean window


def test_clean_window_leaves_out_recurring_claims(tmp_path):
    """An outside system (cut-off 2024Q4: 2024Q4 before, 2025Q2 clean); 2025Q2's claim 1 recurs from 2024Q4."""
    store = StoreResource(root=str(tmp_path / "data"))
    gold = {"2024Q4": [(1, -1.0), (2, 0.5)], "2025Q2": [(1, -1.0), (2, 0.5), (3, 1.0)]}
    preds = {"2024Q4": [(1, -0.5), (2, 0.5)], "2025Q2": [(1, 0.0), (2, 0.5), (3, 0.5)]}  # 2025Q2 errors: 1, 0, 0.5
    for q, claims in gold.items():
        write_release(store, q, [claim(c, f"claim {c}", "2025-05-01", f"https://x.org/{c}", x) for c, x in claims], {})
        (tmp_path / f"{q}.json").write_text(json.dumps({"predictions": [{"claim_id": c, "integrity": x} for c, x in preds[q]]}))
    system = System(name="out", kind="predictions", knowledge_cutoff="2024Q4",
                    predictions={q: str(tmp_path / f"{q}.json") for q in gold})
    plain = compute_board(collect(store, [system], list(gold)), resamples=50)["systems"][0]
    assert plain["windows"]["clean"]["n"] == 3 and plain["windows"]["clean"]["recurring_left_out"] == 0
    (store.base / "releases/2025Q2/v1/manifest.json").write_text(json.dumps({"recurring": {
        "mode": "flag", "count": 1, "share": 1 / 3, "dropped": 0, "earlier_quarters": ["2024Q4"],
        "claims": {"1": {"quarter": "2024Q4", "id": 1, "by": "media"}}}}))
    data = collect(store, [system], list(gold))
    assert data["recurring"] == {"2024Q4": [], "2025Q2": [1]}
    # Recomputed from the stored inputs (JSON and rows), as `veritas leaderboard` does.
    board = compute_board(json.loads(json.dumps({**inputs_payload(data), "rows": data["rows"]})), after_cutoff=True,
                          resamples=50)
    entry = board["systems"][0]
    clean = entry["windows"]["clean"]
    assert (clean["n"], clean["claims"], clean["recurring_left_out"]) == (2, 2, 1)
    assert abs(clean["mse"] - (0.0 + 0.25) / 2) < TOL and clean["modality"]["text"]["n"] == 2
    assert entry["windows"]["all"] == plain["windows"]["all"] and entry["windows"]["before"] == plain["windows"]["before"]
    assert entry["windows"]["all"]["n"] == 5 and entry["windows"]["all"]["recurring_left_out"] == 0
    q2 = entry["quarters"]["2025Q2"]
    assert q2["n"] == 3 and q2["recurring"] == 1 and q2["sums_fresh"]["n"] == 2 and q2["sums"]["n"] == 3
    table = board_table(board).filter((pl.col("scope") == "window") & (pl.col("axis") == "integrity"))
    assert dict(zip(table["window"], table["recurring_left_out"])) == {"all": 0, "clean": 1, "before": 0}
    assert text_ranking(board).splitlines()[2].split()[-1] == "1"


# ------------------------------------------------------------------ partial and bad submissions (issue 35)


def skipper_and_full(tmp_path: Path, skipper_body: str | None = None) -> tuple[StoreResource, Path]:
    """One quarter of 4 claims (gold -1, 1, -1, 1): "skipper" predicts claim 1 only, exactly; "full" predicts
    every claim 0.1 off (MSE 0.01); "broken" (optional) has a file with ``skipper_body``."""
    store = StoreResource(root=str(tmp_path / "data"))
    gold = [(1, -1.0), (2, 1.0), (3, -1.0), (4, 1.0)]
    write_release(store, "2025Q3", [claim(c, f"claim {c}", "2025-08-01", f"https://x.org/{c}", x) for c, x in gold], {})
    (tmp_path / "skipper.json").write_text(json.dumps([{"claim_id": 1, "integrity": -1.0}]))
    (tmp_path / "full.json").write_text(json.dumps([{"claim_id": c, "integrity": x * 0.9} for c, x in gold]))
    systems = tmp_path / "systems"
    for name in ("skipper", "full"):
        write_system(systems, name, kind="predictions", knowledge_cutoff="unknown",
                     predictions={"2025Q3": str(tmp_path / f"{name}.json")})
    write_system(systems, "silent", kind="predictions", knowledge_cutoff="unknown",  # nothing for 2025Q3
                 predictions={"2025Q4": str(tmp_path / "none.json")})
    if skipper_body is not None:
        (tmp_path / "broken.json").write_text(skipper_body)
        write_system(systems, "broken", kind="predictions", knowledge_cutoff="unknown",
                     predictions={"2025Q3": str(tmp_path / "broken.json")})
    return store, systems


def test_skipping_claims_never_ranks_first(tmp_path):
    store, systems = skipper_and_full(tmp_path)
    board = compute_board(collect(store, load_systems(systems), ["2025Q3"]), resamples=50)
    ranked = {s["name"]: s for s in board["systems"]}
    # skipper: 0 on claim 1, then each missing claim scored 0 against gold +-1: (0 + 1 + 1 + 1) / 4
    # silent answered nothing of the window: no submission, unranked (not ranked on zeros)
    assert [(s["name"], s["rank"]) for s in board["systems"]] == [("full", 1), ("skipper", 2), ("silent", None)]
    assert abs(ranked["full"]["windows"]["all"]["mse"] - 0.01) < TOL
    skipper = ranked["skipper"]["windows"]["all"]
    assert (skipper["n"], skipper["answered"], skipper["coverage"], skipper["mse"]) == (4, 1, 0.25, 0.75)
    assert ranked["skipper"]["partial"] and not ranked["full"]["partial"]
    assert ranked["skipper"]["quarters"]["2025Q3"]["coverage"] == 0.25
    # the table, the text and the page mark it
    table = board_table(board).filter((pl.col("scope") == "window") & (pl.col("window") == "all")
                                      & (pl.col("axis") == "integrity"))
    assert dict(zip(table["system"], table["partial"])) == {"full": False, "skipper": True, "silent": False}
    assert dict(zip(table["system"], table["coverage"])) == {"full": 1.0, "skipper": 0.25, "silent": 0.0}
    silent = ranked["silent"]["windows"]["all"]  # no submission: unscored, never a row of zeros
    assert (silent["n"], silent["mse"], silent["answered"], silent["coverage"]) == (0, None, 0, 0.0)
    text = text_ranking(board)
    assert "0.250*" in text.splitlines()[3] and "* partial submission" in text
    doc = lxml.html.fromstring(render_page(board))
    row = doc.xpath("//table[@id='board']/tbody/tr[@data-system='skipper']")[0]
    assert "partial" in row.get("class") and row.xpath("td[@data-field='coverage']")[0].text == "0.250 partial"
    assert doc.xpath("//table[@id='board']/tbody/tr[@data-system='full']/td[@data-field='coverage']")[0].text == "1.000"


@pytest.mark.parametrize("body, reason", [
    ('[{"claim_id": 1, "integrity": -1.0}, null]', "record 2: expected an object"),
    ('[{"claim_id": 1, "integrity": -1.0, "media": "abc"}]', 'record 1: field media: "abc" is not a list'),
    ('[{"claim_id": 9, "integrity": -1.0}]', "record 1: field claim_id: 9 is not a claim of the 2025Q3 release"),
    ("", "is empty"),
])
def test_one_bad_submission_is_reported_and_the_others_ranked(tmp_path, body, reason):
    store, systems = skipper_and_full(tmp_path, body)
    result = dg.materialize([leaderboard], resources={"store": store, "board": LeaderboardSettings(systems_dir=str(systems))})
    assert result.success
    meta = result.asset_materializations_for_node("leaderboard")[0].metadata
    board = json.loads((store.base / "reports/leaderboard/leaderboard.json").read_text())["board"]
    assert [(s["name"], s["rank"]) for s in board["systems"]] == [("full", 1), ("skipper", 2), ("broken", None),
                                                                  ("silent", None)]
    (rejected,) = board["rejected"]
    assert rejected["system"] == "broken" and rejected["file"] == str(tmp_path / "broken.json")
    assert rejected["reason"].startswith(f"{tmp_path / 'broken.json'}: ") and reason in rejected["reason"]
    assert reason in meta["rejected"].value and meta["partial"].value == "skipper"
    assert f"rejected: broken 2025Q3: {tmp_path / 'broken.json'}" in text_ranking(board)
    doc = lxml.html.fromstring((store.base / "reports/leaderboard/leaderboard.html").read_text())
    assert reason in doc.get_element_by_id("rejected").text_content()


@pytest.fixture(scope="module")
def page(board_env, tmp_path_factory):
    out = tmp_path_factory.mktemp("page") / "leaderboard.html"
    assert main(["--config", board_env["config"], "leaderboard", "--html", str(out)]) == 0
    return out


def test_page_is_self_contained_with_table_and_charts(page, board_env):
    text = page.read_text(encoding="utf-8")
    doc = lxml.html.fromstring(text)
    assert doc.xpath("//script[@src]") == [] and doc.xpath("//link") == [] and doc.xpath("//iframe") == []
    refs = doc.xpath("//@src | //@href | //@xlink:href", namespaces={"xlink": "http://www.w3.org/1999/xlink"})
    assert refs == [] and not re.search(r"https?://", text) and "url(" not in text and "@import" not in text
    rows = doc.xpath("//table[@id='board']/tbody/tr")
    assert [r.get("data-system") for r in rows] == ["out", "cb", "rt"]
    cells = {r.get("data-system"): {td.get("data-field"): td.text for td in r} for r in rows}
    assert cells["cb"]["mse"] == f"{expected('cb', ['2020Q2', '2026Q2'])['mse']:.4f}" and cells["cb"]["cutoff"] == "2024Q4"
    assert cells["cb"]["clean"] == f"{expected('cb', ['2026Q2'])['mse']:.4f}" and cells["cb"]["flagged"] == "0.500"
    assert cells["out"]["clean"] == "-" and cells["rt"]["before"] == "-"
    assert [o.get("value") for o in doc.xpath("//select[@name='from']/option")] == ["2020Q2", "2026Q2"]
    figures = doc.xpath("//figure[@class='chart']")
    assert [f.get("data-system") for f in figures] == ["out", "cb", "rt"] and all(len(f.xpath(".//svg")) == 1 for f in figures)
    cutoffs = {f.get("data-system"): f.xpath(".//line[@class='cutoff']/@data-cutoff") for f in figures}
    assert cutoffs == {"out": ["2026-05-15"], "cb": ["2024Q4"], "rt": ["2019-06-30"]}
    points = {(f.get("data-system"), c.get("data-quarter")): float(c.get("data-mse")) for f in figures
              for c in f.xpath(".//circle[@class='point']")}
    assert points == {(s, q): pytest.approx(expected(s, [q])["mse"], abs=TOL) for s in ("cb", "rt", "out")
                      for q in ("2020Q2", "2026Q2")}
    # cb's cut-off line sits between its 2020Q2 and 2026Q2 points, rt's left of both.
    x = lambda s, path: float(doc.xpath(f"//figure[@data-system='{s}']{path}")[0])  # noqa: E731
    assert x("cb", "//circle[@data-quarter='2020Q2']/@cx") < x("cb", "//line[@class='cutoff']/@x1") < x("cb", "//circle[@data-quarter='2026Q2']/@cx")
    assert x("rt", "//line[@class='cutoff']/@x1") < x("rt", "//circle[@data-quarter='2020Q2']/@cx")
    assert doc.xpath("//table[@id='language-table']//tr[@data-system='cb'][@data-group='de']/td[@data-field='mse']")[0].text == \
        f"{(1 / 3) ** 2:.4f}"
    data = json.loads(doc.get_element_by_id("board-data").text)
    assert data["window"] == {"from": "2020Q2", "to": "2026Q2", "after_cutoff": False}


def test_text_from_data_is_escaped(board_env):
    data = load_inputs(board_env["store"])
    data["systems"][0]["name"] = '<script>alert("x")</script>'
    data["rows"] = [{**r, "system": data["systems"][0]["name"]} if r["system"] == "cb" else r for r in data["rows"]]
    data["contamination"] = {}
    html_text = render_page(compute_board(data, resamples=50))
    doc = lxml.html.fromstring(html_text)
    assert all(s.text is None or "alert" not in s.text or s.get("type") == "application/json" for s in doc.xpath("//script"))
    assert "<script>alert" not in html_text and '&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;' in html_text


CHROMIUM = shutil.which("chromium")


def chromium(*args, profile: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", *args],
        check=True, timeout=300, capture_output=True, text=True,
    )


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (`chromium` not on PATH); "
                    "the page is checked structurally by the other tests")
def test_chromium_renders_and_rewindows_the_page(page, board_env, tmp_path):
    from PIL import Image

    # The script re-pools another window from the page's own sums: the same numbers as the CLI for that window.
    url = page.resolve().as_uri() + "#from=2026Q2&to=2026Q2&after=1&sort=name"
    dom = chromium("--virtual-time-budget=5000", "--dump-dom", url, profile=tmp_path / "p1").stdout
    doc = lxml.html.fromstring(dom)
    rows = doc.xpath("//table[@id='board']/tbody/tr")
    assert [r.get("data-system") for r in rows] == ["cb", "out", "rt"]  # sorted by name
    cells = {r.get("data-system"): {td.get("data-field"): td.text for td in r} for r in rows}
    board = compute_board(load_inputs(board_env["store"]), "2026Q2", "2026Q2", after_cutoff=True, resamples=50)
    for s in board["systems"]:
        m = s["windows"]["clean"]
        assert cells[s["name"]]["rank"] == (str(s["rank"]) if s["rank"] else "-")
        assert cells[s["name"]]["mse"] == (f"{m['mse']:.4f}" if m["mse"] is not None else "-")
        assert cells[s["name"]]["acc3"] == (f"{m['acc3']:.4f}" if m["acc3"] is not None else "-")
    assert cells["cb"]["rank"] == "1" and cells["out"]["rank"] == "-"
    assert "veritas leaderboard --from 2026Q2 --to 2026Q2 --after-cutoff" in doc.get_element_by_id("ci-note").text
    assert doc.xpath("//figure[@data-system='cb']//circle[@data-quarter='2020Q2']/@class") == ["point out"]

    shot = tmp_path / "leaderboard.png"
    chromium(f"--screenshot={shot}", "--window-size=1280,1400", page.resolve().as_uri(), profile=tmp_path / "p2")
    with Image.open(shot) as image:
        assert image.size == (1280, 1400)
        colors = image.convert("RGB").getcolors(maxcolors=1280 * 1400)
    near_cutoff = sum(n for n, (r, g, b) in colors if abs(r - 0xC0) + abs(g - 0x39) + abs(b - 0x2B) <= 24)
    assert near_cutoff > 100  # the dashed red cut-off lines are drawn
    artifacts = Path(os.environ.get("VERITAS_TEST_ARTIFACTS") or PROJECT_ROOT / "build" / "test-artifacts") / "leaderboard"
    artifacts.mkdir(parents=True, exist_ok=True)
    shutil.copy(page, artifacts / "leaderboard.html")
    shutil.copy(shot, artifacts / "leaderboard.png")
    assert (artifacts / "leaderboard.png").stat().st_size == shot.stat().st_size


def test_definitions_register_the_unpartitioned_leaderboard():
    from dagster_project.definitions import defs

    graph = defs.resolve_asset_graph()
    node = graph.get(dg.AssetKey("leaderboard"))
    assert node.partitions_def is None and dg.AssetKey("evaluation") in node.parent_keys
    assert graph.get(dg.AssetKey("evaluation")).partitions_def is not None
