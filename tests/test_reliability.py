"""Issue 24, item 3: the ensemble's inter-rater reliability, Krippendorff's alpha (interval) per property."""

import math

import krippendorff
import numpy as np

from assets.rules.reliability import alpha_line, alpha_metadata, ensemble_alpha
from schemas.records import Rating
from tests.test_release import claim

MEMBERS = ("a", "b", "c")


def rated(cid: str, scores: dict[str, tuple[float, ...]], media: dict[int, tuple[float, ...]] | None = None):
    """A scored claim with each member's veracity/context_coverage scores, and contextualization per medium."""
    c = claim(cid, 0.0, f"claim {cid}")
    ratings = [Rating(member=m, property=prop, category="unknown", certainty="unknown", score=s)
               for prop, row in scores.items() for m, s in zip(MEMBERS, row) if not math.isnan(s)]
    ratings += [Rating(member=m, property="contextualization", medium_index=i, category="unknown",
                       certainty="unknown", score=s) for i, row in (media or {}).items() for m, s in zip(MEMBERS, row)]
    c.ratings = ratings
    return c


def test_alpha_matches_the_krippendorff_package_on_the_same_matrix():
    rows = [(1.0, 0.6667, 1.0), (-1.0, -0.6667, -1.0), (0.0, 0.3333, -0.3333), (0.6667, 1.0, float("nan")),
            (-0.3333, -1.0, -0.6667)]
    claims = [rated(f"c{i}", {"veracity": row}) for i, row in enumerate(rows)]
    got = ensemble_alpha(claims)["veracity"]
    expected = krippendorff.alpha(reliability_data=np.array(rows).T, level_of_measurement="interval")
    assert got["units"] == 5 and got["raters"] == 3
    assert got["alpha"] == round(float(expected), 4) and 0.5 < got["alpha"] < 1


def test_members_that_disagree_give_a_low_alpha_and_units_are_per_medium():
    agree = [rated(f"g{i}", {"veracity": (s, s, s)}, {0: (s, s, s), 1: (-s, -s, -s)})
             for i, s in enumerate((1.0, -1.0, 0.3333, -0.6667))]
    disagree = [rated(f"d{i}", {"context_coverage": row}) for i, row in
                enumerate([(1.0, -1.0, 0.0), (-1.0, 1.0, 0.3333), (0.6667, -0.6667, 1.0), (0.0, 1.0, -1.0)])]
    out = ensemble_alpha(agree + disagree)
    assert out["veracity"]["alpha"] == 1.0
    assert out["contextualization"]["units"] == 8  # two media of four claims
    assert out["context_coverage"]["alpha"] < 0.1
    assert out["authenticity"] == {"alpha": None, "units": 0, "raters": 0,
                                   "note": "fewer than 2 units rated by at least 2 members"}
    assert alpha_metadata(out) == {"alpha/veracity": 1.0, "alpha/context_coverage": out["context_coverage"]["alpha"],
                                   "alpha/contextualization": 1.0}
    assert alpha_line(out).startswith("veracity 1.00 (n=4), context_coverage ")


def test_a_unit_rated_by_one_member_does_not_count_and_constant_scores_say_why():
    single = [rated(f"s{i}", {"veracity": (1.0, float("nan"), float("nan"))}) for i in range(3)]
    assert ensemble_alpha(single)["veracity"]["units"] == 0
    same = [rated(f"k{i}", {"veracity": (0.0, 0.0, 0.0)}) for i in range(3)]
    out = ensemble_alpha(same)["veracity"]
    assert out["alpha"] is None and "same score" in out["note"]
