"""The ``factcheck_api`` source kind: a Fact Check Tools ``claims:search`` answer (a dump kept as a file or
fetched from a URL, or the claims the live API gave) read into triples: ``claims_search_dump`` parses the file,
``iter_factcheck_api`` turns each claim's reviews into rows.
"""

import json
from typing import Any, Iterator

from assets.ingestion.sources.claimreview import Triple, _language, _required, _text


def iter_factcheck_api(claims: Any, origin: str) -> Iterator[Triple]:
    """Yield rows from a Fact Check Tools ``claims:search`` answer (a list, or an object with ``claims``)."""
    if isinstance(claims, dict):
        claims = claims.get("claims")
    if not isinstance(claims, list):
        yield None, "api_without_claims", claims
        return
    for i, claim in enumerate(claims):
        if not isinstance(claim, dict) or not isinstance(claim.get("claimReview"), list):
            yield None, "claim_without_claimReview", claim
            continue
        for j, review in enumerate(claim["claimReview"]):
            if not isinstance(review, dict):
                yield None, "not_an_object", review
                continue
            publisher = review.get("publisher") if isinstance(review.get("publisher"), dict) else {}
            yield {
                "review_url": _required(review.get("url")),
                "claim_text": _required(claim.get("text")),
                "claim_date": claim.get("claimDate"),
                "review_date": review.get("reviewDate"),
                "publisher_name": _text(publisher.get("name")),
                "publisher_site": _text(publisher.get("site")),
                "rating_text": _text(review.get("textualRating")),
                "language": _language(review.get("languageCode")),
                "claim_author": _text(claim.get("claimant")),
                "title": _text(review.get("title")),
                "appearance_urls": [],
                "sources": [f"api:{origin}#{i}.{j}"],
            }, "", review


def claims_search_dump(body: bytes, path: str) -> Any:
    """A ``claims:search`` answer kept as a file, parsed whole. A byte that is not UTF-8 stays in its claim as a
    lone surrogate, so that cleaning quarantines that review alone (``invalid_unicode``); a file JSON cannot read
    is an error that names it."""
    try:
        return json.loads(body.decode("utf-8", "surrogateescape").removeprefix("\ufeff"))
    except (ValueError, RecursionError) as err:
        what = "nested too deep" if isinstance(err, RecursionError) else " ".join(str(err).split())[:200]
        raise ValueError(f"{path}: not a claims:search answer JSON can read ({what}): fix the file, or remove it "
                         "from sources") from None
