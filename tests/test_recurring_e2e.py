"""Issue 24, item 4, end to end: a backfill of two simulated quarters that share source records. The later quarter
is generated from the same real records with the same seed, so its first claims are the earlier quarter's claims
again, debunked anew on other pages; the rest are new. Its release marks the claims that recur from
the earlier release, the evaluation's cut-off view leaves them out, and ``recurring: drop`` keeps them out."""

import json
from pathlib import Path

import pytest
import yaml
from rapidfuzz import fuzz

from dagster_project.simulation.run import latest_release

EARLIER, LATER = "2025Q2", "2025Q3"
SHARED, REVIEWS, RELEASE = 60, 140, 30


@pytest.fixture(scope="module")
def backfill(tmp_path_factory):
    from dagster_project.quarter_run import run_quarter
    from dagster_project.simulation.panel import PanelConfig, PanelServer
    from dagster_project.simulation.quarter import QuarterConfig, generate
    from dagster_project.simulation.records import load_records
    from dagster_project.simulation.run import write_config
    from dagster_project.yield_report import collect_yields
    from tests.ops_support import fast_router_backoff

    folder = tmp_path_factory.mktemp("recurring")
    records = load_records(prefer_shared=False)
    quarter = lambda label, n: QuarterConfig(quarter=label, reviews=n, video_share=0.0, label_mix="balanced")  # noqa: E731
    earlier = generate(folder / EARLIER, quarter(EARLIER, SHARED), records)
    later = generate(folder / LATER, quarter(LATER, REVIEWS), records)
    shared = set(earlier["claims"]) & set(later["claims"])
    # the panel answers by claim text: a shared claim takes the later quarter's planted truth (the generator may
    # have drawn it another category), and the panel knows both quarters' review pages
    truth = {"claims": {**{k: dict(v) for k, v in earlier["claims"].items()},
                        **{k: dict(v) for k, v in later["claims"].items()}}}
    for key in shared:
        truth["claims"][key]["review_urls"] = earlier["claims"][key]["review_urls"] + later["claims"][key]["review_urls"]
    panel = PanelConfig(latency_median_s=0.0, retry_after_s=0.0, faults={})
    with PanelServer(truth, panel) as server, pytest.MonkeyPatch.context() as mp, fast_router_backoff():
        mp.setenv("VERITAS_SIM_KEY", "sk-simulated")
        mp.setenv("DAGSTER_HOME", str(folder / "dagster_home"))
        config = Path(write_config(folder, folder / EARLIER, server, release_size=RELEASE, parallel_claims=4,
                                   stages={"knowledge_cutoff": EARLIER}))
        cfg = yaml.safe_load(config.read_text())
        cfg["sources"].append({"kind": "datafeed", "path": str(folder / LATER / "feed.json")})
        cfg["web"]["warc_paths"].append(str(folder / LATER / "pages.warc.gz"))
        config.write_text(yaml.safe_dump(cfg, sort_keys=False))
        ok = [run_quarter(str(config), q) for q in (EARLIER, LATER)]
        flagged = latest_release(folder / "data", LATER)
        yields = collect_yields(str(config), LATER)
        cfg["stages"]["recurring"] = "drop"
        config.write_text(yaml.safe_dump(cfg, sort_keys=False))
        dropped_ok = run_quarter(str(config), LATER, until="release")  # from the cache: no new model call
        dropped = latest_release(folder / "data", LATER)
    return {"ok": ok, "shared": shared, "folder": folder, "flagged": flagged, "dropped_ok": dropped_ok,
            "dropped": dropped, "yields": yields, "served": server.panel.counters()["served"]}


def claims_of(release: Path) -> dict[int, dict]:
    return {c["id"]: c for c in json.loads((release / "claims.json").read_text())["claims"]}


def test_the_later_release_marks_the_claims_that_recur_from_the_earlier_one(backfill):
    assert backfill["ok"] == [True, True] and len(backfill["shared"]) >= 20
    manifest = json.loads((backfill["flagged"] / "manifest.json").read_text())
    marks = manifest["recurring"]
    later, earlier = claims_of(backfill["flagged"]), claims_of(latest_release(backfill["folder"] / "data", EARLIER))
    assert marks["mode"] == "flag" and marks["earlier_quarters"] == [EARLIER] and marks["count"] >= 3
    assert marks["count"] == len(marks["claims"]) and marks["share"] == round(marks["count"] / len(later), 4)
    for cid, mark in marks["claims"].items():  # each mark names the earlier release's claim it repeats
        assert mark["quarter"] == EARLIER
        assert earlier[mark["id"]]["review_url"] != later[int(cid)]["review_url"]
        strip = lambda t: " ".join(w for w in t.split() if not w.startswith("<"))  # noqa: E731
        # the same text, or a near-duplicate by the release's rule (an earlier rectified variant holds the claim's
        # words: "There is no evidence that <claim>"), or the same media
        same = fuzz.token_set_ratio(strip(earlier[mark["id"]]["text"]), strip(later[int(cid)]["text"])) >= 92
        assert same or mark["by"] == "media"
    import polars as pl

    frame = pl.read_parquet(backfill["flagged"] / "claims.parquet")
    marked = frame.filter(pl.col("recurring_quarter").is_not_null())
    assert sorted(marked["id"].to_list()) == sorted(int(k) for k in marks["claims"])
    assert set(marked["recurring_quarter"]) == {EARLIER}
    first = json.loads((latest_release(backfill["folder"] / "data", EARLIER) / "manifest.json").read_text())
    assert first["recurring"]["count"] == 0 and first["recurring"]["earlier_quarters"] == []
    assert f"{marks['count']} of the released claims" in (backfill["flagged"] / "README.md").read_text()
    print(f"recurring: {marks['count']} of {len(later)} released claims ({marks['share']:.1%}) recur from {EARLIER}; "
          f"{len(backfill['shared'])} claims shared by the generated quarters")
    assert any(line.strip().startswith("recurring from earlier releases (flag)")
               for line in backfill["yields"]["stages"]["release"]["integrity_summary"].splitlines())


def test_the_cut_off_view_leaves_the_recurring_claims_out(backfill):
    manifest = json.loads((backfill["flagged"] / "manifest.json").read_text())
    report = json.loads((backfill["folder"] / "data" / "data" / "reports" / LATER / "evaluation.json").read_text())
    (longitudinal,) = report["longitudinal"].values()
    after = longitudinal["after"]
    assert after["recurring_left_out"] == manifest["recurring"]["count"]
    predicted = backfill["yields"]["stages"]["evaluation"]["rows_out"]
    assert after["n"] == predicted - manifest["recurring"]["count"]  # the earlier quarter is before the cut-off


def test_recurring_drop_keeps_them_out_of_the_release(backfill):
    assert backfill["dropped_ok"]
    manifest = json.loads((backfill["dropped"] / "manifest.json").read_text())
    assert manifest["recurring"]["mode"] == "drop" and manifest["recurring"]["count"] == 0
    assert manifest["recurring"]["dropped"] >= len(json.loads((backfill["flagged"] / "manifest.json").read_text())
                                                   ["recurring"]["claims"])
    earlier = {c["review_url"] for c in claims_of(latest_release(backfill["folder"] / "data", EARLIER)).values()}
    texts = {c["text"] for c in claims_of(backfill["dropped"]).values()}
    assert not texts & {c["text"] for c in claims_of(latest_release(backfill["folder"] / "data", EARLIER)).values()}
    assert earlier  # the earlier release is there to be matched
