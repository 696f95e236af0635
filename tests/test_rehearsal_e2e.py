"""The dress rehearsal, small: a simulated quarter of 300 reviews made from real records (tests/fixtures), every stage
run by Dagster (WARC replay, the litellm path against the simulated panel on loopback, the real store and gates), a
release of 100 claims checked for balance and against the planted truth. The quarter and the panel are seeded and the
panel's answers and faults depend only on the request, so the funnel's counts are exact.

The panel answers at zero latency with its faults on (429s, 5xx, malformed JSON, refusals): the Router and the
re-ask absorb them. Everything it serves is named sim/..., and the release's manifest lists those models.
"""

import json

import pytest

from dagster_project.simulation.run import agreement
from tests.simulated import RELEASE, REVIEWS


@pytest.fixture(scope="module")
def rehearsal(simulated):
    """The session's simulated quarter (tests/simulated.py): generated, run, then re-run warm."""
    return simulated


def test_the_quarter_is_made_from_real_records_with_failures_planted(rehearsal):
    truth = rehearsal["truth"]
    counts = truth["counts"]
    assert truth["simulated"] is True and counts["reviews"] == REVIEWS
    assert counts["feed_elements"] == REVIEWS + counts["duplicate_review"]
    assert {c["category"] for c in truth["claims"].values()} == {
        "intact", "compromised_veracity", "compromised_ooc", "unknown"}
    assert all(c["media"] for c in truth["claims"].values() if c["category"] == "compromised_ooc")
    assert counts == {"reviews": REVIEWS, "feed_elements": REVIEWS + 3, "bot_wall": 3, "not_found": 6, "paywall": 8,
                      "too_short": 7, "dead_appearance": 13, "duplicate_review": 3, "videos": 4, "images": 175,
                      "near_duplicates": 5, "media_claims": 179}  # the generator is seeded: every failure kind planted
    feed = json.loads((rehearsal["folder"] / "quarter" / "feed.json").read_text())
    urls = {e["url"] for e in feed["dataFeedElement"]}
    assert all("/veritas-sim/" in u for u in urls) and len(urls) == REVIEWS


def test_every_stage_ran_and_the_funnel_matches_the_planted_failures(rehearsal):
    assert rehearsal["ok"]
    stages = rehearsal["first_yields"]["stages"]
    counts = rehearsal["truth"]["counts"]
    funnel = {name: (s["rows_in"], s["rows_out"], s["drops"]) for name, s in stages.items()}
    assert funnel["reviews"] == (REVIEWS + counts["duplicate_review"], REVIEWS, {"duplicate": counts["duplicate_review"]})
    # six reviews come from real publishers that are in the registry but not as signatories
    assert funnel["trusted_reviews"] == (REVIEWS, REVIEWS - 6, {"not_a_signatory": 6})
    assert funnel["articles"] == (294, 270, {"bot_wall": counts["bot_wall"], "fetch_failed:404": counts["not_found"],
                                             "paywall": counts["paywall"], "raw_page_too_short": counts["too_short"]})
    assert funnel["appearances"] == (270, 257, {"appearances_unreachable": counts["dead_appearance"]})
    # 8 of the records' claims report a claim ("Viral message claims that ...", "نشرت حسابات ... ادعت أنه ..."): true
    # as written, no claim (issues 34 and 48: the report forms of every language, ordinary media claims no more)
    assert funnel["normalized_claims"] == (257, 249, {"reports_a_claim": 8})
    assert funnel["scored_claims"] == (249, 226, {"rater_disagreement": 23})  # the panel's noise, filtered
    # 88 of the 136 Compromised claims gain their Intact rewrite: the rules refuse the simulated writer's negation
    # template (tests/simulated.py's REWRITE_STYLES; as adds_negation, or as reports_a_claim where the claim is a
    # report form the writer kept) and the critique brings another style on the next round (13 saved by the loop);
    # the writer is told the words a claim's pictures show (issue 49) and keeps them where one of its rewrites can,
    # and 30 of the 79 whose pictures carry the claim's own words keep no rewrite that stays consistent with them;
    # 17 rewrites fail their re-score on the raters' disagreement, one stays hedged
    assert funnel["rectified_claims"] == (226, 314, {})
    extras = stages["rectified_claims"]["extras"]
    styles = rehearsal["first"]["rewrite_styles"]
    assert extras["rectify/attempted"] == extras["compromised"] == 136
    assert extras["refine/saved"] == 13
    assert extras["refine/refused/adds_negation"] + extras["refine/refused/reports_a_claim"] == styles["negation"]
    assert sum(styles.values()) == 136 + sum(rehearsal["first"]["refine_rewrite_styles"].values())
    assert {k: v for k, v in extras.items() if k.startswith("not_rectified/")} == {
        "not_rectified/adds_hedge": 1, "not_rectified/media_inconsistent": 30,
        "not_rectified/rescore_rater_disagreement": 17}
    assert (extras["rectify/media_carry/image"], extras["rectify/media_excluded/image"]) == (79, 30)
    assert styles["negation"] == 22 and styles["minimal"] > styles["negation"]
    assert extras["edit_ratio/median"] < 0.1 and extras["edit_ratio/p90"] <= 0.25
    assert funnel["release"] == (314, RELEASE, {"near_duplicate": 5, "not_selected": 209})
    assert funnel["predictions"] == funnel["evaluation"] == (RELEASE, RELEASE, {})


def test_the_release_is_balanced_and_agrees_with_the_planted_truth(rehearsal):
    folder = rehearsal["release"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert all(m["model"].startswith("openai/sim/") for m in manifest["models"])  # labelled simulated
    result = agreement(folder, rehearsal["truth"])
    result.pop("wrong")
    # Intact = Compromised; media claims at most 80%; never both variants of one claim; the planted truth recovered
    assert result == {"claims": RELEASE, "intact": 43, "compromised": 43, "unknown": 14, "media_share": 0.8,
                      "rectified": 10, "both_variants": 0, "accuracy_3bin": 1.0, "accuracy_category": 1.0,
                      "mse": 0.0112}, result


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



def test_the_release_order_carries_no_label_and_its_audit_and_reliability_are_published(rehearsal, tmp_path):
    """Issue 24 on the simulated quarter's 100-claim release: ids, file order and media ids in a random order (the
    release used to list 42 Compromised, then 42 Intact, then 16 Unknown), the shortcut audit measured and passed,
    Krippendorff's alpha per property, and every exported table in the same order."""
    import polars as pl

    from assets.release.card import export_hf
    from assets.rules.bins import bin3
    from assets.rules.release_order import order_problems, release_orders
    from assets.selection.shortcut_audit import ORDER_FEATURES

    folder = rehearsal["release"]
    claims = json.loads((folder / "claims.json").read_text())["claims"]
    labels = [bin3(c["integrity"]["score"]) for c in claims]
    assert len(claims) == RELEASE and [c["id"] for c in claims] == list(range(1, RELEASE + 1))
    assert sum(a != b for a, b in zip(labels, labels[1:])) > 20  # not three blocks of labels
    orders = release_orders(claims, bin3)
    assert order_problems(orders) == [] and all(s["n"] >= 80 and "skipped" not in s for s in orders.values())
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["order"]["statistics"] == orders
    audit = manifest["shortcut_audit"]
    assert audit["claims"] == RELEASE and audit["problems"] == [] and audit["pool"]["claims"] > RELEASE
    assert all(not audit["features"][f]["above_chance"] for f in ORDER_FEATURES)
    assert {"text", "rectified_style"} <= set(audit) and audit["features"]["publisher"]["group"] == "world"
    alphas = {scope: {p: r["alpha"] for p, r in props.items()} for scope, props in manifest["reliability"].items()}
    assert all(0.3 < alphas["scored"][p] <= 1 for p in ("veracity", "context_coverage"))
    # released: the natural claims only (the rewrites' re-scoring is no independent rating); before the filter: lower
    assert 0.3 < alphas["released"]["veracity"] <= 1 and alphas["before_filter"]["veracity"] <= alphas["scored"]["veracity"]
    card = (folder / "README.md").read_text()
    assert "## Shortcut audit" in card and "## Label reliability" in card and "## Order" in card
    summary = rehearsal["first_yields"]["stages"]["release"]["integrity_summary"]
    assert f"shortcut audit ({RELEASE} claims" in summary and "Krippendorff's alpha (scored claims): veracity" in summary
    assert rehearsal["first_yields"]["stages"]["scored_claims"]["extras"]["alpha/veracity"] == pytest.approx(
        alphas["scored"]["veracity"], abs=1e-4)
    ids = [c["id"] for c in claims]
    assert pl.read_parquet(folder / "claims.parquet")["id"].to_list() == ids
    assert pl.read_parquet(folder / "media.parquet")["claim_id"].to_list() == [c["id"] for c in claims for _ in c["media"]]
    exported = export_hf({"2025Q3": folder}, tmp_path / "hf")
    assert pl.read_parquet(exported / "2025Q3" / "claims.parquet")["id"].to_list() == ids
    assert "### Shortcut audit" in (exported / "README.md").read_text()
