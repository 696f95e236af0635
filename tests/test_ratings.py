"""The rating reader (assets/rules/ratings.py) in every language of the label scheme, on real rating strings: the
ClaimReview ratings of the real fact-check pages in tests/fixtures/factcheck_pages and FACTors' 68 mapped verdicts
(tests/fixtures/factors_mapped_verdicts.txt; origins in tests/fixtures/README.md)."""

import gzip
import json
import re
from pathlib import Path

import pytest

from assets.rules.ratings import normal_rating, rating_category

FIXTURES = Path(__file__).parent / "fixtures"


def page_ratings() -> dict[str, str]:
    """file -> the reviewRating alternateName of each real fact-check page that has one."""
    out = {}
    for path in sorted((FIXTURES / "factcheck_pages").glob("*.html.gz")):
        html = gzip.decompress(path.read_bytes()).decode("utf-8", "replace")
        match = re.search(r'"alternateName"\s*:\s*("(?:[^"\\]|\\.)*")', html)
        if match:
            out[path.name] = json.loads(match.group(1))
    return out


@pytest.mark.parametrize("rating", ["Verdadero", "Vrai", "Richtig", "Wahr", "Mostly True", "TRUE.", "true",
                                    "mostly-true", "Verdadeiro", "Vero", "صحيح", "صحيح.", "Verdadeiro, mas"])
def test_true_ratings_in_every_language_are_intact(rating):
    """Lupa's "Verdadeiro, mas" (true, but) reads as "mostly true" does: Intact."""
    assert rating_category(rating, False) == "intact"
    assert rating_category(rating, True) == "intact"  # an image claim rated true is not out of context


@pytest.mark.parametrize("rating", ["Falso", "Falsa", "Faux", "Falsch", "Falso.", "FALSE", "Engañoso", "Incorrect",
                                    "Mostly false", "Not true", "No es cierto", "Nicht wahr", "Pas vrai",
                                    "Não é verdade", "Non è vero", "No longer true", "barely-true", "True but misleading",
                                    "غير صحيح", "مش حقيقي", "زائف", "pants-fire", "Missing context"])
def test_false_ratings_in_those_languages_stay_false(rating):
    assert rating_category(rating, False) == "compromised_veracity"
    assert rating_category(rating, True) == "compromised_ooc"


@pytest.mark.parametrize("rating", ["Half true", "Partly false", "Teilweise richtig", "Parcialmente falso",
                                    "En partie faux", "Verdad a medias", "صحيح جزئياً", "Unproven"])
def test_mixed_ratings_are_unknown(rating):
    assert rating_category(rating, False) == "unknown"


def test_the_real_pages_ratings_read_as_their_publishers_meant():
    ratings = page_ratings()
    assert len(ratings) >= 25 and {"Falso", "Faux", "Falsch", "Engañoso", "Falso."} <= set(ratings.values())
    for name, rating in ratings.items():
        got = rating_category(rating, False)
        if rating == "Half true":
            assert got == "unknown", name
        else:  # every other page rates its claim false, misleading or incorrect (a language without lists: false)
            assert got == "compromised_veracity", (name, rating, got)


def test_factors_verdicts_read_true_only_when_they_say_so():
    verdicts = [line.strip() for line in (FIXTURES / "factors_mapped_verdicts.txt").read_text().splitlines() if line.strip()]
    assert len(verdicts) == 68
    intact = sorted(v for v in verdicts if rating_category(v, False) == "intact")
    assert intact == ["accurate", "correct", "fact", "legitimate", "mostly accurate", "mostly correct", "mostly true",
                      "mostly-true", "true"]
    unknown = {v for v in verdicts if rating_category(v, False) == "unknown"}
    assert {"half true", "half-true", "halftrue", "partly true", "mixture", "unproven", "insufficient evidence"} <= unknown
    assert not {"untrue", "no truth", "no longer true", "barely-true", "incorrect", "inaccurate", "mostly inaccurate",
                "mostly false"} & (unknown | set(intact))


def test_the_rating_words_cover_every_language_of_the_verdict_lists():
    from prompts import label_scheme

    scheme = label_scheme()
    for kind in ("true", "mixed", "negated_true"):
        assert set(scheme["rating_words"][kind]) == set(scheme["verdict_words"]), kind
    assert normal_rating("  TRUE. ") == "true" and normal_rating("não_é_bem_assim") == "não é bem assim"
