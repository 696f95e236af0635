"""Stage 6 rules: certainty scores, bins, aggregation, integrity with its decisive property, agreement."""

from datetime import date

import pytest

from assets.ensemble import scoring
from assets.ensemble.scoring import (
    aggregate,
    agreement_failure,
    certainty_score,
    integrity_of,
    merge_justifications,
    to_rating,
)
from assets.rules.bins import bin3, bin7
from dagster_project.resources.llm import LLMAnswer
from dagster_project.stage_settings import ClaimRules, ScoreSettings
from schemas.records import Medium, NormalizedClaim, PropertyVerdict, Rating


def rating(member, prop, category, certainty, index=-1, tags=()):
    return to_rating(member, prop, {"category": category, "certainty": certainty, "justification": f"{member} says so",
                                    "tags": list(tags)}, index)


def verdict(prop, score, n=3, spread=0.0, index=-1):
    return PropertyVerdict(property=prop, medium_index=index, score=score, n_ratings=n, spread=spread)


@pytest.mark.parametrize("category,certainty,expected", [
    ("positive", "certain", 1.0), ("positive", "rather certain", 0.6667), ("positive", "rather uncertain", 0.3333),
    ("negative", "certain", -1.0), ("negative", "rather certain", -0.6667), ("negative", "rather uncertain", -0.3333),
    ("unknown", "certain", 0.0), ("unknown", "rather uncertain", 0.0),
])
def test_certainty_score(category, certainty, expected):
    assert certainty_score(category, certainty) == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("score,label", [
    (-1.0, "compromised"), (-0.34, "compromised"), (-1 / 3, "unknown"), (0.0, "unknown"), (1 / 3, "unknown"),
    (0.3334, "intact"), (1.0, "intact"),
])
def test_bin3_boundaries_belong_to_the_inner_bin(score, label):
    assert bin3(score) == label


@pytest.mark.parametrize("score,expected", [
    (-1.0, 0), (-5 / 6, 1), (-0.6, 1), (-0.5, 2), (-0.2, 2), (-1 / 6, 3), (0.0, 3), (1 / 6, 3), (0.3, 4), (0.5, 4),
    (0.6, 5), (5 / 6, 5), (0.9, 6), (1.0, 6),
])
def test_bin7_cuts_are_strict_on_the_outer_side(score, expected):
    assert bin7(score) == expected


def test_aggregate_mean_spread_tags_and_justification():
    ratings = [
        rating("a", "authenticity", "negative", "certain", 0, tags=["AI-generated"]),
        rating("b", "authenticity", "negative", "rather certain", 0, tags=["AI-generated", "Forged"]),
        rating("c", "authenticity", "unknown", "unknown", 0, tags=["Not-a-tag"]),
        rating("a", "authenticity", "positive", "certain", 1),  # another medium: not mixed in
    ]
    v = aggregate(ratings, "authenticity", 0)
    assert v.n_ratings == 3
    assert v.score == pytest.approx((-1 - 0.6667 + 0) / 3, abs=1e-4)
    assert v.spread == pytest.approx(1.0)
    assert v.tags == ["AI-generated"]  # 2 of 3 raters; "Forged" had 1 of 3; unknown tags are dropped at parse time
    # b (-0.667) and a (-1) agree with the mean -0.556, c (0) does not; "a says so" only rewords "b says so"
    assert v.justification == "b says so"
    assert aggregate(ratings, "veracity") is None


def test_justifications_merge_the_agreeing_raters_points_without_repeats():
    def said(member, category, certainty, text):
        return to_rating(member, "contextualization", {"category": category, "certainty": certainty,
                                                       "justification": text, "tags": []}, 0)

    ratings = [
        said("gpt", "negative", "certain", "The photo was taken in Santiago in 2015. It shows a protest, not the storm."),
        said("claude", "negative", "rather certain",
             "The photo is from 2015 and was taken in Santiago. Reverse image search finds it on a 2015 news site."),
        said("gemini", "negative", "certain", "It shows a protest, not the storm."),
        said("llama", "positive", "rather uncertain", "The picture could be from the storm."),  # argues the other way
    ]
    mean = sum(r.score for r in ratings) / len(ratings)  # (-1 - 2/3 - 1 + 1/3) / 4 = -7/12
    assert merge_justifications(ratings, mean) == (
        # nearest the mean first (claude, -2/3), then gpt and gemini (-1); reworded and repeated sentences once
        "The photo is from 2015 and was taken in Santiago. Reverse image search finds it on a 2015 news site. "
        "It shows a protest, not the storm."
    )
    verdict_ = aggregate(ratings, "contextualization", 0)
    assert verdict_.justification == merge_justifications(ratings, mean) and "could be" not in verdict_.justification
    # a lone rater far from a split mean still speaks (nearest first); CJK sentences split without spaces
    split = [said("a", "positive", "certain", "真的。图片来自2015年。"), said("b", "negative", "certain", "")]
    assert merge_justifications(split, 0.0) == "真的。 图片来自2015年。"
    long = [said(m, "negative", "certain", f"Point {m} " + "x" * 400 + ".") for m in "abc"]
    assert len(merge_justifications(long, -1.0)) <= 900 and merge_justifications(long, -1.0).startswith("Point a")


def test_integrity_is_the_lowest_with_tie_order():
    media = [verdict("contextualization", 0.5, index=0), verdict("contextualization", -0.2, index=1),
             verdict("authenticity", -1.0, index=0)]  # authenticity is reported, never decisive
    integrity, decisive = integrity_of(media, verdict("veracity", 0.4), verdict("context_coverage", 0.1))
    assert (integrity.score, integrity.decisive_property, integrity.label) == (-0.2, "contextualization", "unknown")
    assert decisive.medium_index == 1
    # a tie between all three goes to context coverage, then veracity, then contextualization
    tie = integrity_of([verdict("contextualization", 0.3333, index=0)], verdict("veracity", 0.3333), verdict("context_coverage", 0.3333))
    assert tie[0].decisive_property == "context_coverage"
    tie = integrity_of([verdict("contextualization", -1.0, index=0)], verdict("veracity", -1.0), None)
    assert tie[0].decisive_property == "veracity" and tie[0].label == "compromised"
    only_media = integrity_of([verdict("contextualization", -0.6667, index=0)], None, None)
    assert only_media[0].decisive_property == "contextualization"
    assert integrity_of([], None, None) is None


def test_ties_in_the_minimum_use_the_bins_epsilon():
    # two ensemble means of 4/9 reached by different float paths differ in the last bit
    low = aggregate([rating(m, "veracity", *LEVEL[s][:2]) for m, s in zip("abc", (1 / 3, 1 / 3, 2 / 3))], "veracity")
    high = aggregate([rating(m, "context_coverage", *LEVEL[s][:2]) for m, s in zip("abc", (1.0, 1.0, -2 / 3))],
                     "context_coverage")
    assert low.score < high.score and high.score - low.score < 1e-15
    integrity, decisive = integrity_of([], low, high)
    assert (integrity.decisive_property, decisive.property) == ("context_coverage", "context_coverage")
    assert integrity.score == pytest.approx(4 / 9)
    media = [verdict("contextualization", high.score, index=0)]
    assert integrity_of(media, verdict("veracity", high.score), None)[0].decisive_property == "veracity"
    # a real difference is no tie
    assert integrity_of([], verdict("veracity", 0.44), high)[0].decisive_property == "veracity"


def test_agreement_rules_apply_to_the_decisive_property():
    assert agreement_failure(verdict("veracity", -0.3, n=3, spread=1.3333), 1.0) == "rater_disagreement"
    assert agreement_failure(verdict("veracity", -0.3, n=3, spread=1.0), 1.0) == ""


def test_unknown_category_forces_zero_and_unknown_certainty():
    r = rating("a", "veracity", "unknown", "certain")
    assert (r.score, r.certainty) == (0.0, "unknown")
    assert isinstance(r, Rating)


def test_quality_check_flags_bad_scored_tables():
    from datetime import date

    from dagster_project.checks import scored_table_problems
    from schemas.frames import to_frame
    from schemas.records import Integrity, ScoredClaim

    def scored(cid, score, label):
        return ScoredClaim(claim_id=cid, review_id="r", quarter="2020Q2", text="t", original_text="t",
                           normalization="original", review_url="https://x.org", claim_date=date(2020, 5, 1),
                           integrity=Integrity.model_construct(score=score, decisive_property="veracity", label=label))

    good = to_frame([scored("a", -1.0, "compromised"), scored("b", 0.6667, "intact")], ScoredClaim)
    assert scored_table_problems(good) == []
    bad = to_frame([scored("a", -1.0, "intact"), scored("a", 0.0, "unknown")], ScoredClaim)
    problems = scored_table_problems(bad)
    assert any(p.startswith("expect_column_values_to_be_unique(claim_id)") for p in problems)
    assert any(p.startswith("expect_column_values_to_be_in_set(label_matches_score)") for p in problems)
    assert len(problems) == 2


# ---- hand-computed cases through rate()/score_claim() with scripted answers (no model, no HTTP) --------------
A, B, C = "a", "b", "c"
LEVEL = {1.0: ("positive", "certain"), 2 / 3: ("positive", "rather certain"), 1 / 3: ("positive", "rather uncertain"),
         0.0: ("unknown", "unknown"), -1 / 3: ("negative", "rather uncertain"), -2 / 3: ("negative", "rather certain"),
         -1.0: ("negative", "certain")}


def prop_answer(score):
    category, certainty = LEVEL[score]
    return {"category": category, "certainty": certainty, "justification": f"j{score:+.2f}", "tags": []}


class ScriptedEnsemble:
    """Stands in for the resource: ``script[(member, property, medium_index)]`` is a score, or None for a failure."""

    def __init__(self, script, members=(A, B, C)):
        self.script, self.members, self.asked = script, list(members), []

    def member_names(self):
        return self.members

    def member(self, name):
        from dagster_project.resources.llm import EnsembleMember

        return EnsembleMember(name=name, model="openai/scripted")

    def ask(self, llm, member, prompt, model, *, stage, media=(), media_store=None, **inputs):
        if prompt == "rate_media":
            i = inputs["medium_index"]
            self.asked.append(("media", i))
            values = {p: self.script.get((member, p, i)) for p in ("authenticity", "contextualization")}
            parsed = None if None in values.values() else {p: prop_answer(v) for p, v in values.items()}
        else:
            self.asked.append((inputs["property"], -1))
            value = self.script.get((member, inputs["property"], -1))
            parsed = None if value is None else prop_answer(value)
        return LLMAnswer(member=member, model="scripted", parsed=parsed, raw="{}", error=None if parsed else "invalid_output: x",
                         cache_hit=False, prompt_tokens=0, completion_tokens=0, cost_usd=0.0, latency_s=0.0)


def scripted_claim(n_media=0):
    media = [Medium(medium_id=f"m{i}", kind="image", path=f"images/m{i}.jpg", width=640, height=480) for i in range(n_media)]
    return NormalizedClaim(claim_id="c", review_id="r", quarter="2020Q2", text="A claim.", original_text="A claim.",
                           normalization="llm", language="en", claim_date=date(2020, 5, 1), review_url="https://x.org",
                           media=media, rating_text="Misleading")


def run_scripted(monkeypatch, script, n_media=0, members=(A, B, C)):
    ensemble = ScriptedEnsemble(script, members)
    monkeypatch.setattr(scoring, "ask", ensemble.ask)
    scored, reason = scoring.score_claim(scripted_claim(n_media), "evidence", ensemble, ScoreSettings(), ClaimRules(),
                                         None)
    return scored, reason, ensemble.asked


def media_script(i, authenticity, contextualization):
    return {**{(m, "authenticity", i): s for m, s in zip((A, B, C), authenticity)},
            **{(m, "contextualization", i): s for m, s in zip((A, B, C), contextualization)}}


def claim_script(prop, scores):
    return {(m, prop, -1): s for m, s in zip((A, B, C), scores) if s is not None}


def test_media_exactly_on_the_compromised_edge_still_get_veracity(monkeypatch):
    # contextualization mean (-1/3 -1/3 -1/3)/3 = -1/3: the boundary belongs to Unknown, so veracity is asked
    script = {**media_script(0, (1.0, 1.0, 1.0), (-1 / 3, -1 / 3, -1 / 3)), **claim_script("veracity", (-1.0, -1.0, -2 / 3))}
    scored, reason, asked = run_scripted(monkeypatch, script, n_media=1)
    assert reason == "" and asked == [("media", 0)] * 3 + [("veracity", -1)] * 3
    # integrity = min(veracity -8/9, contextualization -1/3) = -8/9, decided by veracity
    assert scored.integrity.score == pytest.approx(-8 / 9, abs=1e-6)
    assert (scored.integrity.decisive_property, scored.integrity.label) == ("veracity", "compromised")
    assert scored.context_coverage is None  # veracity <= 0


def test_one_out_of_context_medium_of_two_stops_before_veracity(monkeypatch):
    # medium 1: (-1/3 -2/3 -1/3)/3 = -4/9 < -1/3 -> Compromised bin -> no veracity, no coverage
    script = {**media_script(0, (1.0, 1.0, 1.0), (1.0, 2 / 3, 1.0)), **media_script(1, (1.0, 2 / 3, 1 / 3), (-1 / 3, -2 / 3, -1 / 3))}
    scored, reason, asked = run_scripted(monkeypatch, script, n_media=2)
    assert reason == "" and asked == [("media", 0)] * 3 + [("media", 1)] * 3
    assert scored.veracity is None and scored.context_coverage is None
    assert scored.integrity.score == pytest.approx(-4 / 9, abs=1e-6)
    assert (scored.integrity.decisive_property, scored.integrity.label) == ("contextualization", "compromised")
    # authenticity is reported (mean 2/3 of medium 1) but never decisive
    auth1 = next(v for v in scored.media_verdicts if v.property == "authenticity" and v.medium_index == 1)
    assert auth1.score == pytest.approx(2 / 3)


def test_veracity_exactly_zero_skips_coverage_and_just_above_zero_asks_it(monkeypatch):
    scored, _, asked = run_scripted(monkeypatch, claim_script("veracity", (1 / 3, 0.0, -1 / 3)))
    assert asked == [("veracity", -1)] * 3 and scored.context_coverage is None
    assert (scored.integrity.score, scored.integrity.label) == (0.0, "unknown")
    # 1/9 > 0: coverage is asked; integrity = min(1/9, coverage 2/3) = 1/9, decided by veracity
    script = {**claim_script("veracity", (1 / 3, 1 / 3, -1 / 3)), **claim_script("context_coverage", (2 / 3, 2 / 3, 2 / 3))}
    scored, _, asked = run_scripted(monkeypatch, script)
    assert asked == [("veracity", -1)] * 3 + [("context_coverage", -1)] * 3
    assert scored.integrity.score == pytest.approx(1 / 9) and scored.integrity.decisive_property == "veracity"
    assert scored.rating_text == "Misleading"  # the publisher's rating rides along, never scored


def test_integrity_minimum_over_three_parts_hand_computed(monkeypatch):
    # contextualization: medium 0 mean 1, medium 1 mean (1 + 2/3 + 2/3)/3 = 7/9 (the worst)
    # veracity (1 + 1 + 2/3)/3 = 8/9; coverage (2/3 + 1/3 + 1)/3 = 2/3 -> integrity 2/3 by context coverage
    script = {**media_script(0, (1.0,) * 3, (1.0,) * 3), **media_script(1, (1.0,) * 3, (1.0, 2 / 3, 2 / 3)),
              **claim_script("veracity", (1.0, 1.0, 2 / 3)), **claim_script("context_coverage", (2 / 3, 1 / 3, 1.0))}
    scored, reason, _ = run_scripted(monkeypatch, script, n_media=2)
    assert reason == ""
    assert scored.integrity.score == pytest.approx(2 / 3, abs=1e-6)
    assert (scored.integrity.decisive_property, scored.integrity.label) == ("context_coverage", "intact")
    # lower the coverage by one notch to 5/9 and raise nothing: still coverage; drop veracity to 5/9 too: a tie
    script.update(claim_script("context_coverage", (1 / 3, 1 / 3, 1.0)))
    script.update(claim_script("veracity", (1 / 3, 1 / 3, 1.0)))
    scored, _, _ = run_scripted(monkeypatch, script, n_media=2)
    assert scored.integrity.score == pytest.approx(5 / 9) and scored.integrity.decisive_property == "context_coverage"
    # merged: the raters nearest the mean 5/9 first (1/3, twice: said once), then the one at 1 (within 0.5)
    assert scored.context_coverage.justification == "j+0.33 j+1.00"


def test_disagreement_filter_applies_to_the_decisive_property_only(monkeypatch):
    # decisive veracity ratings 1/3 and -2/3 differ by exactly 1: kept
    scored, reason, _ = run_scripted(monkeypatch, claim_script("veracity", (1 / 3, -2 / 3, -2 / 3)))
    assert reason == "" and scored.veracity.spread == pytest.approx(1.0)
    # 1/3 and -1 differ by 4/3 > 1: dropped
    assert run_scripted(monkeypatch, claim_script("veracity", (1 / 3, -1.0, -1.0)))[:2] == (None, "rater_disagreement")
    # authenticity ratings 1 and -1 differ by 2, but authenticity is never decisive: the claim stays
    script = {**media_script(0, (1.0, -1.0, 1.0), (1.0, 1.0, 1.0)), **claim_script("veracity", (-1.0, -1.0, -1.0))}
    scored, reason, _ = run_scripted(monkeypatch, script, n_media=1)
    assert reason == "" and scored.integrity.decisive_property == "veracity"
    # a disagreement on the non-decisive coverage (2/3 vs -1/3 = 1, 1 vs -1/3 = 4/3) with veracity decisive: kept
    script = {**claim_script("veracity", (1 / 3, 1 / 3, 1 / 3)), **claim_script("context_coverage", (1.0, -1 / 3, 1.0))}
    scored, reason, _ = run_scripted(monkeypatch, script)
    assert reason == "" and scored.integrity.decisive_property == "veracity"
    assert scored.integrity.score == pytest.approx(1 / 3) and scored.context_coverage.spread == pytest.approx(4 / 3)


def test_fewer_than_three_ratings_drop_the_claim(monkeypatch):
    # member c fails (malformed/refused): two ratings of the decisive property are not enough
    assert run_scripted(monkeypatch, claim_script("veracity", (-1.0, -1.0, None)))[:2] == (None, "incomplete_ratings:veracity")
    # four members, one fails: three ratings remain and the claim stays
    script = {**claim_script("veracity", (-1.0, -1.0, None)), ("d", "veracity", -1): -2 / 3}
    scored, reason, _ = run_scripted(monkeypatch, script, members=(A, B, C, "d"))
    assert reason == "" and scored.veracity.n_ratings == 3
    assert scored.integrity.score == pytest.approx(-8 / 9)
    # nobody answers at all
    assert run_scripted(monkeypatch, {})[:2] == (None, "no_ratings")


@pytest.mark.parametrize("scores,bin3_label,bin7_index", [
    ((1 / 3, 0.0), "unknown", 3),          # mean 1/6: on the cut, the inner bin
    ((-1 / 3, 0.0), "unknown", 3),         # -1/6
    ((1 / 3, 1 / 3), "unknown", 4),        # 1/3: Unknown in 3 bins, above 1/6 in 7 bins
    ((-1 / 3, -1 / 3), "unknown", 2),      # -1/3
    ((2 / 3, 1 / 3), "intact", 4),         # 1/2: on the cut 3/6, the inner bin
    ((-2 / 3, -1 / 3), "compromised", 2),  # -1/2
    ((1.0, 2 / 3), "intact", 5),           # 5/6: on the outermost cut, still inside
    ((-1.0, -2 / 3), "compromised", 1),    # -5/6
    ((1.0, 1.0, 2 / 3), "intact", 6),      # 8/9 > 5/6
    ((2 / 3, 1 / 3, 1 / 3), "intact", 4),  # 4/9: just above 1/3
    ((-1 / 3, -1 / 3, 0.0), "unknown", 2), # -2/9: between -1/3 and -1/6
])
def test_bin_edges_reached_by_ensemble_means(scores, bin3_label, bin7_index):
    """The float mean of thirds lands on or near a cut; the cut belongs to the inner bin either way."""
    ratings = [rating(m, "veracity", *LEVEL[s][:2]) if s else rating(m, "veracity", "unknown", "unknown")
               for m, s in zip("abc", scores)]
    v = aggregate(ratings, "veracity")
    assert v.score == pytest.approx(sum(scores) / len(scores))
    assert (bin3(v.score), bin7(v.score)) == (bin3_label, bin7_index)


def test_a_required_property_without_enough_ratings_drops_the_claim(monkeypatch):
    # veracity 1 > 0 asks for coverage; every coverage call fails: integrity may not come from veracity alone
    script = claim_script("veracity", (1.0, 1.0, 1.0))
    scored, reason, asked = run_scripted(monkeypatch, script)
    assert (scored, reason) == (None, "incomplete_ratings:context_coverage")
    assert asked == [("veracity", -1)] * 3 + [("context_coverage", -1)] * 3
    # two of three coverage ratings are still too few
    script.update({(A, "context_coverage", -1): 1.0, (B, "context_coverage", -1): 1.0})
    assert run_scripted(monkeypatch, script)[:2] == (None, "incomplete_ratings:context_coverage")
    # with the third the claim stands
    script[(C, "context_coverage", -1)] = 2 / 3
    scored, reason, _ = run_scripted(monkeypatch, script)
    assert reason == "" and scored.integrity.decisive_property == "context_coverage"


def test_every_rating_of_one_medium_failing_drops_the_claim_before_veracity(monkeypatch):
    # medium 0 is rated, medium 1 gets no valid answer at all: its contextualization could be the lowest
    script = {**media_script(0, (1.0, 1.0, 1.0), (1.0, 1.0, 1.0)), **claim_script("veracity", (1.0, 1.0, 1.0)),
              **claim_script("context_coverage", (1.0, 1.0, 1.0))}
    scored, reason, asked = run_scripted(monkeypatch, script, n_media=2)
    assert (scored, reason) == (None, "incomplete_ratings:contextualization")
    assert asked == [("media", 0)] * 3 + [("media", 1)] * 3  # nothing more is paid for once the claim is lost
    # a medium out of context decides the claim: veracity is not required, so its absence drops nothing
    script = {**media_script(0, (1.0, 1.0, 1.0), (-1.0, -1.0, -1.0))}
    scored, reason, asked = run_scripted(monkeypatch, script, n_media=1)
    assert reason == "" and scored.integrity.decisive_property == "contextualization" and asked == [("media", 0)] * 3


def test_incomplete_veracity_stops_before_coverage(monkeypatch):
    # two valid veracity ratings leaning true: coverage is never asked, the claim is dropped for veracity
    scored, reason, asked = run_scripted(monkeypatch, claim_script("veracity", (1.0, 2 / 3, None)))
    assert (scored, reason) == (None, "incomplete_ratings:veracity") and asked == [("veracity", -1)] * 3
