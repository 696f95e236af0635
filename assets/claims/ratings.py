"""What a fact-checker's textual rating says about a claim: the category a careful rater would likely give it.

The rating decides no label (the ensemble does); it predicts which questions stage 6 will ask a claim (`veritas
plan`) and plants a simulated quarter's truth (dagster_project/simulation). The words are English and Arabic, the
languages of the records the project is tested on; a rating in another language counts as "the claim is wrong",
which is what most ratings say.
"""

import re

MIXED_RATING = re.compile(r"partly|partially|half|mixture|unproven|not enough|unverified|غير مثبت|جزئي|نصف", re.I)
NEGATED_TRUE = re.compile(r"not true|untrue|غير صحيح|مش حقيقي|ليس صحيح", re.I)
TRUE_RATING = re.compile(r"^\s*(true|correct|accurate|supported|صحيح|حقيقي)\s*$", re.I)
OUT_OF_CONTEXT = re.compile(r"context|altered|manipulated|doctored|edited|miscaptioned|سياق|معدل", re.I)


def rating_category(rating: str, image_claim: bool) -> str:
    """intact, unknown, compromised_ooc (an image claim whose rating is not "true") or compromised_veracity: a mixed
    or unproven rating is Unknown, a negated "true" is not true, a true one is Intact."""
    rating = rating or ""
    if MIXED_RATING.search(rating):
        return "unknown"
    if not NEGATED_TRUE.search(rating) and TRUE_RATING.search(rating):
        return "intact"
    return "compromised_ooc" if image_claim else "compromised_veracity"


def rated_out_of_context(rating: str) -> bool:
    """The rating says the claim's media are out of context or altered (their contextualization decides)."""
    return bool(OUT_OF_CONTEXT.search(rating or ""))
