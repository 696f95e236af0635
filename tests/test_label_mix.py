"""Issue 27: a simulated quarter's planted labels follow the real records' own ratings by default (label_mix real),
as one-sided as fact-checkers are; the balanced mix stays a switch."""

from collections import Counter

import pytest

from dagster_project.simulation.quarter import QuarterConfig, generate, planted_category
from dagster_project.simulation.records import load_records


@pytest.mark.parametrize("rating,image_claim,category", [
    ("True", False, "intact"), ("صحيح", False, "intact"), ("False", False, "compromised_veracity"),
    ("غير صحيح", False, "compromised_veracity"),  # "not true": the negation wins over "true"
    ("صحيح جزئياً", False, "unknown"), ("Unproven", False, "unknown"), ("misleading", False, "compromised_veracity"),
    ("مضلل", False, "compromised_veracity"), ("Missing context", True, "compromised_ooc"), ("True", True, "intact"),
])
def test_a_textual_rating_gives_its_planted_category(rating, image_claim, category):
    assert planted_category({"rating": rating, "image_claim": image_claim}) == category


def test_the_real_mix_is_the_records_own_and_the_balanced_one_a_switch(tmp_path):
    records = load_records(prefer_shared=False)  # the committed excerpt of the three real sources
    by_claim = {" ".join(r["claim"].split()).casefold(): planted_category(r) for r in records}
    real = generate(tmp_path / "real", QuarterConfig(reviews=80, video_share=0.0), records)
    planted = Counter(t["category"] for t in real["claims"].values())
    assert all(t["category"] == by_claim[" ".join(t["claim"].split()).casefold()] for t in real["claims"].values())
    assert planted["intact"] / sum(planted.values()) < 0.15  # the real ratings are one-sided
    balanced = generate(tmp_path / "balanced", QuarterConfig(reviews=80, video_share=0.0, label_mix="balanced"), records)
    shares = Counter(t["category"] for t in balanced["claims"].values())
    assert shares["intact"] / sum(shares.values()) > 0.15
    with pytest.raises(ValueError, match="label_mix must be real or balanced"):
        generate(tmp_path / "x", QuarterConfig(reviews=10, label_mix="kind"), records)
