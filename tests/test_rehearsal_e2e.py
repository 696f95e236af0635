"""The dress rehearsal, small: a simulated quarter of 120 reviews made from real records (tests/fixtures), every stage
run by Dagster (WARC replay, the litellm path against the simulated panel on loopback, the real store and gates), a
release of 40 claims checked for balance and against the planted truth. The quarter and the panel are seeded and the
panel's answers and faults depend only on the request, so the funnel's counts are exact.

The panel answers at zero latency with its faults on (429s, 5xx, malformed JSON, refusals): the Router and the
re-ask absorb them. Everything it serves is named sim/..., and the release's manifest lists those models.
"""

import os

# imagehash's DCT under a loaded machine: one BLAS thread (set before numpy loads, when this module is first)
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import json  # noqa: E402

import pytest  # noqa: E402

from dagster_project.simulation.panel import PanelConfig, PanelServer  # noqa: E402
from dagster_project.simulation.quarter import QuarterConfig, generate  # noqa: E402
from dagster_project.simulation.records import load_records  # noqa: E402
from dagster_project.simulation.run import agreement, latest_release, write_config  # noqa: E402
from tests.openai_stub import fast_router_backoff  # noqa: E402

QUARTER = "2025Q3"
REVIEWS, RELEASE = 120, 40


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    from dagster_project.cli import collect_yields, run_quarter

    folder = tmp_path_factory.mktemp("rehearsal")
    truth = generate(folder / "quarter", QuarterConfig(quarter=QUARTER, reviews=REVIEWS, video_share=0.03),
                     load_records(prefer_shared=False))
    panel = PanelConfig(latency_median_s=0.0, retry_after_s=0.0, faults={
        "rate_limit": 0.01, "server_error": 0.005, "malformed": 0.005, "refusal": 0.002})
    with pytest.MonkeyPatch.context() as mp, fast_router_backoff(), PanelServer(truth, panel) as server:
        mp.setenv("VERITAS_SIM_KEY", "sk-simulated")
        mp.setenv("DAGSTER_HOME", str(folder / "dagster_home"))
        config = write_config(folder, folder / "quarter", server, release_size=RELEASE, parallel_claims=4)
        ok = run_quarter(config, QUARTER)
        first = server.panel.counters()
        first_yields = collect_yields(config, QUARTER)
        rerun_ok = run_quarter(config, QUARTER, until="release")
        yield {"ok": ok, "rerun_ok": rerun_ok, "truth": truth, "folder": folder, "first": first,
               "second": server.panel.counters(), "first_yields": first_yields,
               "yields": collect_yields(config, QUARTER),
               "release": latest_release(folder / "data", QUARTER)}


def test_the_quarter_is_made_from_real_records_with_failures_planted(rehearsal):
    truth = rehearsal["truth"]
    counts = truth["counts"]
    assert truth["simulated"] is True and counts["reviews"] == REVIEWS
    assert counts["feed_elements"] == REVIEWS + counts["duplicate_review"]
    assert {c["category"] for c in truth["claims"].values()} == {
        "intact", "compromised_veracity", "compromised_ooc", "unknown"}
    assert all(c["media"] for c in truth["claims"].values() if c["category"] == "compromised_ooc")
    assert counts == {"reviews": REVIEWS, "feed_elements": REVIEWS + 2, "bot_wall": 4, "not_found": 1, "paywall": 1,
                      "too_short": 2, "dead_appearance": 5, "duplicate_review": 2, "videos": 1, "images": 73,
                      "near_duplicates": 2, "media_claims": 74}  # the generator is seeded: every failure kind planted
    feed = json.loads((rehearsal["folder"] / "quarter" / "feed.json").read_text())
    urls = {e["url"] for e in feed["dataFeedElement"]}
    assert all("/veritas-sim/" in u for u in urls) and len(urls) == REVIEWS


def test_every_stage_ran_and_the_funnel_matches_the_planted_failures(rehearsal):
    assert rehearsal["ok"]
    stages = rehearsal["first_yields"]["stages"]
    counts = rehearsal["truth"]["counts"]
    funnel = {name: (s["rows_in"], s["rows_out"], s["drops"]) for name, s in stages.items()}
    assert funnel["reviews"] == (REVIEWS + counts["duplicate_review"], REVIEWS, {"duplicate": counts["duplicate_review"]})
    # two of the real records' publishers are in the registry but not as signatories
    assert funnel["trusted_reviews"] == (REVIEWS, REVIEWS - 2, {"not_a_signatory": 2})
    assert funnel["articles"] == (118, 110, {"bot_wall": counts["bot_wall"], "fetch_failed:404": counts["not_found"],
                                             "paywall": counts["paywall"], "raw_page_too_short": counts["too_short"]})
    assert funnel["appearances"] == (110, 105, {"appearances_unreachable": counts["dead_appearance"]})
    assert funnel["normalized_claims"] == (105, 105, {})
    assert funnel["scored_claims"] == (105, 93, {"rater_disagreement": 12})  # the panel's noise, filtered
    assert funnel["rectified_claims"] == (93, 135, {})  # 42 Compromised claims gain their Intact rewrite
    assert funnel["release"] == (135, RELEASE, {"near_duplicate": 3, "not_selected": 92})
    assert funnel["predictions"] == funnel["evaluation"] == (RELEASE, RELEASE, {})


def test_the_release_is_balanced_and_agrees_with_the_planted_truth(rehearsal):
    folder = rehearsal["release"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert all(m["model"].startswith("openai/sim/") for m in manifest["models"])  # labelled simulated
    result = agreement(folder, rehearsal["truth"])
    result.pop("wrong")
    # Intact = Compromised; media claims at most 80%; never both variants of one claim; the planted truth recovered
    assert result == {"claims": RELEASE, "intact": 15, "compromised": 15, "unknown": 10, "media_share": 0.8,
                      "rectified": 0, "both_variants": 0, "accuracy_3bin": 1.0, "accuracy_category": 1.0,
                      "mse": 0.0113}, result


def test_the_panel_was_asked_every_prompt_and_knew_every_claim(rehearsal):
    first = rehearsal["first"]
    assert first["unmatched"] == {}
    kinds = {k for member in first["by_member"].values() for k in member}
    assert kinds >= {"media_filter", "normalize_claim", "rate_media", "rate_claim/veracity",
                     "rate_claim/context_coverage", "rectify_claim", "check_rectified"}
    assert any(name.endswith("/rate_limit") for name in first["faults"])


def test_a_warm_rerun_makes_no_model_call(rehearsal):
    assert rehearsal["rerun_ok"]
    assert rehearsal["second"]["served"] == rehearsal["first"]["served"]
    assert rehearsal["first"]["answered_twice"] == 0
    # nor any OCR: every image's text comes from the OCR cache the first run filled
    first = rehearsal["first_yields"]["stages"]["normalized_claims"]["extras"]
    again = rehearsal["yields"]["stages"]["normalized_claims"]["extras"]
    assert first["ocr/images_read"] > 0
    assert again["ocr/images_read"] == 0 and again["llm/model_calls"] == 0
    assert again["ocr/cache_hits"] == first["ocr/images_read"] + first["ocr/cache_hits"]

