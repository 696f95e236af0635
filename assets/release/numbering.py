"""A release's claims in their published order: drawn from the secret order key until the order check passes, numbered,
their media numbered, their scores rounded as published."""



from assets.rules.bins import PUBLISHED_DECIMALS, bin3
from assets.rules.length import MEDIA_REF
from assets.rules.release_order import (
    MAX_Z,
    key_fingerprint,
    keyed,
    order_problems,
    release_orders,
    release_seed,
    seed_commitment,
    shuffled,
)
from schemas.records import (
    ReleaseClaim,
    ReleaseIntegrity,
    ReleaseMedium,
    ReleaseScore,
    ScoredClaim,
)


def _score(verdict, digits: int = PUBLISHED_DECIMALS) -> ReleaseScore | None:
    """A verdict as published: its score rounded (bin*_published bins such a score with the rounding's tolerance)."""
    return None if verdict is None else ReleaseScore(score=round(verdict.score, digits), justification=verdict.justification)


def _number(chosen: list[ScoredClaim], media_numbers: dict[str, int]) -> tuple[list[ReleaseClaim], list[tuple[int, str, str]]]:
    """Claim ids in the order of ``chosen`` (from 1), media ids from ``media_numbers``; <image:N> references point
    at the release's media ids."""
    claims, files, seen = [], [], set()
    for claim_number, claim in enumerate(chosen, 1):
        media = []
        local_to_global = {}
        for i, m in enumerate(claim.media):
            mid = media_numbers[m.medium_id]
            if mid not in seen:
                seen.add(mid)
                files.append((mid, m.kind, m.path))
            local_to_global[(m.kind, str(i))] = mid
            verdicts = {v.property: v for v in claim.media_verdicts if v.medium_index == i}
            media.append(ReleaseMedium(
                type=m.kind, id=mid, file_path=f"{'images' if m.kind == 'image' else 'videos'}/{mid}.{'jpg' if m.kind == 'image' else 'mp4'}",
                authenticity=_score(verdicts.get("authenticity")), contextualization=_score(verdicts.get("contextualization")),
            ))
        text = MEDIA_REF.sub(lambda mt, ids=local_to_global: f"<{mt.group(1)}:{ids.get((mt.group(1), mt.group(2)), mt.group(2))}>", claim.text)
        claims.append(ReleaseClaim(
            id=claim_number, text=text, date=claim.claim_date.isoformat() if claim.claim_date else None,
            language=claim.language, review_url=claim.review_url, media=media,
            veracity=_score(claim.veracity), context_coverage=_score(claim.context_coverage),
            integrity=ReleaseIntegrity(score=round(claim.integrity.score, PUBLISHED_DECIMALS), decisive_property=claim.integrity.decisive_property),
        ))
    return claims, sorted(files)


ORDER_ATTEMPTS = 20  # draws until the order passes the order check (a fair shuffle fails it ~0.3% of the time)


def ordered_release(chosen: list[ScoredClaim], key: bytes) -> tuple[list[ScoredClaim], list[ReleaseClaim], list[tuple[int, str, str]], dict]:
    """The chosen claims numbered in a random order, and their media numbered in another, both drawn from the secret
    order ``key`` and the release's content (claim ids, texts, media), so that a rebuild with the key gives the same
    bytes. The draw starts from an order that is itself secret (the ids under the key), so nothing public (review
    URLs, claim texts, the ids they hash to) lets anyone redo it. Returns the claims in release order, the release
    claims, the media files and the order's record (the seed's commitment, the draw, the statistics; never the
    seed)."""
    base = sorted(chosen, key=lambda c: keyed(key, c.claim_id))
    media = sorted({m.medium_id for c in base for m in c.media}, key=lambda m: keyed(key, m))
    keys = [f"{c.claim_id}\t{c.text}" for c in base] + media
    for attempt in range(ORDER_ATTEMPTS):
        seed = release_seed(key, [*keys, f"draw {attempt}"])
        ordered = shuffled(base, seed)
        numbers = {m: i for i, m in enumerate(shuffled(media, seed + 1), 1)}
        claims, files = _number(ordered, numbers)
        orders = release_orders([c.model_dump() for c in claims], bin3)
        if not order_problems(orders):
            break
    return ordered, claims, files, {"seed_commitment": seed_commitment(seed), "key": key_fingerprint(key),
                                    "draw": attempt, "max_z": MAX_Z, "statistics": orders}


def to_release_claims(chosen: list[ScoredClaim], key: bytes) -> tuple[list[ReleaseClaim], list[tuple[int, str, str]]]:
    """The release claims and media files of ``ordered_release``: numeric ids in a random order."""
    _, claims, files, _ = ordered_release(chosen, key)
    return claims, files


def media_phashes(chosen: list[ScoredClaim], claims: list[ReleaseClaim]) -> dict[str, str]:
    """Release medium id -> the medium's perceptual hash (where it has one)."""
    return {str(r.id): m.phash for c, rc in zip(chosen, claims) for m, r in zip(c.media, rc.media) if m.phash}
