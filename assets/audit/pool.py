"""Which of the pipeline's claims each released claim is: the release publishes no claim id nor whether a claim was
rewritten, so the audit finds each released claim among the claims the release was built from (its manifest names
that version of ``rectified_claims``) by its fact-check URL and text. Plain functions, no Dagster."""

import json
from pathlib import Path

from assets.audit.sample import NATURAL, RECTIFIED, AuditClaim
from assets.rules.length import MEDIA_REF
from schemas.records import ReleaseClaim, ScoredClaim


def release_claims(folder: Path) -> list[ReleaseClaim]:
    """A published release's claims (claims.json), validated."""
    payload = json.loads((Path(folder) / "claims.json").read_text(encoding="utf-8"))
    return [ReleaseClaim.model_validate(c) for c in payload["claims"]]


def _text_key(review_url: str, text: str) -> tuple[str, str]:
    """A claim's text with its media references' numbers left out: the release renumbers them."""
    return review_url, " ".join(MEDIA_REF.sub(r"<\1>", text).split())


def release_key(claim: dict) -> tuple[str, str]:
    """A published claim (claims.json's record) named across release versions, which number claims afresh."""
    return _text_key(claim["review_url"], claim["text"])


def audit_claims(released: list[ReleaseClaim], pool: list[ScoredClaim]) -> tuple[list[AuditClaim], list[int]]:
    """Each released claim with its variant and review, and the ids of released claims not found in ``pool``."""
    by_key: dict[tuple[str, str], list[ScoredClaim]] = {}
    for c in pool:
        by_key.setdefault(_text_key(c.review_url, c.text), []).append(c)
    found, missing = [], []
    for claim in released:
        matches = by_key.get(_text_key(claim.review_url, claim.text), [])
        # the same text twice in the pool: the one with as many media of each kind
        kinds = sorted(m.type for m in claim.media)
        matches = [m for m in matches if sorted(x.kind for x in m.media) == kinds] or matches
        if not matches:
            missing.append(claim.id)
            continue
        match = matches[0]
        found.append(AuditClaim(claim=claim, variant=RECTIFIED if match.variant == "rectified" else NATURAL,
                                review_id=match.review_id, claim_id=match.claim_id, variant_of=match.variant_of))
    return found, missing
