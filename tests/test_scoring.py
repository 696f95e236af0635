"""Stage 6 rules: certainty scores, bins, aggregation, integrity with its decisive property, agreement."""

import pytest

from assets.scored_claims import (
    agreement_failure, aggregate, bin3, bin7, certainty_score, integrity_of, to_rating,
)
from schemas.records import PropertyVerdict, Rating


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
    assert v.justification == "b says so"  # -0.667 is the rating nearest the mean -0.556
    assert aggregate(ratings, "veracity") is None


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


def test_agreement_rules_apply_to_the_decisive_property():
    assert agreement_failure(verdict("veracity", -1.0, n=2), 3, 1.0) == "too_few_ratings"
    assert agreement_failure(verdict("veracity", -0.3, n=3, spread=1.3333), 3, 1.0) == "rater_disagreement"
    assert agreement_failure(verdict("veracity", -0.3, n=3, spread=1.0), 3, 1.0) == ""


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
