"""What a fact-checker's textual rating says about a claim: the category a careful rater would likely give it.

The rating decides no label (the ensemble does); it predicts which questions stage 6 will ask a claim (`veritas
plan`, demand's sampling) and plants a simulated quarter's truth (dagster_project/simulation). The words are the
label scheme's (prompts/label_scheme.yaml: ``rating_words`` and ``verdict_words``), in every language it lists, all
languages at once: a rating's language is often not its claim's ("misleading" on an Arabic claim). A rating in none
of them counts as "the claim is wrong", which is what most ratings say.
"""

import re

from assets.rules.once import once
from prompts import label_scheme

OUT_OF_CONTEXT = re.compile(r"context|altered|manipulated|doctored|edited|miscaptioned|سياق|معدل", re.I)
_ARABIC_MARKS = re.compile(r"[\u0640\u064b-\u065f\u0670]")  # tatweel and harakat: "جزئياً" reads as "جزئيا"
_TRAILING = re.compile(r"^[\W_]+|[\W_]+$")


def normal_rating(rating: str) -> str:
    """Casefolded, Arabic marks dropped, "-" and "_" as spaces, outer punctuation gone: "TRUE." -> "true",
    "mostly-true" -> "mostly true", "não_é_bem_assim" -> "não é bem assim"."""
    text = _ARABIC_MARKS.sub("", (rating or "").casefold()).replace("_", " ").replace("-", " ")
    return " ".join(_TRAILING.sub("", text).split())


@once
def _words(kind: str) -> re.Pattern:
    """One pattern of a kind's words in every language; a word matches whole (not inside another word)."""
    scheme = label_scheme()
    lists = scheme["verdict_words"] if kind == "verdict" else scheme["rating_words"][kind]
    words = {normal_rating(w) for language in lists.values() for w in language}
    alternatives = [rf"(?<!\w){re.escape(w)}(?!\w)" for w in sorted(words, key=len, reverse=True) if w]
    return re.compile("|".join(alternatives))


def rating_category(rating: str, image_claim: bool) -> str:
    """intact, unknown, compromised_ooc (an image claim whose rating is not true) or compromised_veracity: a mixed or
    unproven rating is Unknown; a true word ("Verdadero", "Wahr", "TRUE.", "Mostly True") is Intact unless a
    negation or a verdict word stands beside it ("not true", "true but misleading")."""
    text = normal_rating(rating)
    if _words("mixed").search(text):
        return "unknown"
    if _words("true").search(text) and not _words("negated_true").search(text) and not _words("verdict").search(text):
        return "intact"
    return "compromised_ooc" if image_claim else "compromised_veracity"


def rated_out_of_context(rating: str) -> bool:
    """The rating says the claim's media are out of context or altered (their contextualization decides)."""
    return bool(OUT_OF_CONTEXT.search(rating or ""))
