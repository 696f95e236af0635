"""The label bins of an integrity score (3 and 7 bins, from the label scheme), exact and as published (rounded).

Apart from stage 6 so that the release, its audit and checks read them without importing the stage."""

from fractions import Fraction

from prompts import label_scheme

EPS = 1e-9  # scores are means of thirds: a value this close to a cut is on it, and cuts belong to the inner bin


def _num(value) -> float:
    return float(Fraction(str(value)))


PUBLISHED_DECIMALS = 2  # the release rounds every score to 2 decimals (release._score)
# A published score this close to a cut was on it before rounding (half the last published digit): scores are means
# of thirds over n raters, multiples of 1/(6n), so any other score lies at least 1/(6n) from a cut, and more than the
# rounding can move it (0.005) plus this tolerance for up to 16 raters. With 2 raters +-1/6 is published as +-0.17.
PUBLISHED_TOLERANCE = 0.5 * 10 ** -PUBLISHED_DECIMALS


def bin3(score: float, tolerance: float = EPS) -> str:
    """Compromised below -1/3, Intact above 1/3; the boundaries belong to the inner bin (Unknown). A score within
    ``tolerance`` of a cut is on it (EPS for exact scores; ``bin3_published`` for rounded, published ones)."""
    bins = label_scheme()["bins3"]
    if score < _num(bins["compromised_below"]) - tolerance:
        return "compromised"
    return "intact" if score > _num(bins["intact_above"]) + tolerance else "unknown"


def bin7(score: float, tolerance: float = EPS) -> int:
    """0..6; cuts at -5/6, -3/6, -1/6, 1/6, 3/6, 5/6, strict on the outer side; within ``tolerance`` of a cut is on it."""
    cuts = [_num(c) for c in label_scheme()["bins7"]]
    for i, cut in enumerate(cuts[:3]):
        if score < cut - tolerance:
            return i
    for i, cut in enumerate(reversed(cuts[3:])):
        if score > cut + tolerance:
            return 6 - i
    return 3


def bin3_published(score: float) -> str:
    """The 3-bin of a score as the release publishes it (rounded): the rounding's tolerance at the cuts."""
    return bin3(score, PUBLISHED_TOLERANCE + EPS)


def bin7_published(score: float) -> int:
    """The 7-bin of a published (rounded) score: 0.17 published for 1/6 is on the cut, as 1/6 is."""
    return bin7(score, PUBLISHED_TOLERANCE + EPS)
