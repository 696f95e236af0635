"""The release's selection rules: the keyed rank that orders candidates, near-duplicate removal, media quotas per
bin, the balanced split of Intact, Compromised and Unknown claims, and the adversarial filter's inputs. Stages 6 and 7
plan with these rules (``demand``) and the release applies them, so they sit below all three."""

import math

import numpy as np

from assets.rules.bins import EPS
from assets.rules.near_duplicates import (
    compared_length,
    compared_text,
    first_near_duplicate,
    polarity_id,
    repeats_media,
)
from assets.rules.release_order import (
    keyed,
)
from assets.selection.adversarial import filter_detectable
from dagster_project.stage_settings import ClaimRules, ReleaseSettings
from schemas.records import (
    ScoredClaim,
)


def selection_rank(key: bytes):
    """The order the selection takes claims in: their ids under the secret order key. A public order (the ids'
    plain hashes) let anyone rank the released claims as the selection did, and the selection takes its
    Compromised half from the front of that order and its rewrites from the back: the rank told the label."""
    return lambda claim: keyed(key, "selection\x1f" + claim.claim_id)


def remove_near_duplicates(
    claims: list[ScoredClaim], similarity: float, phash_max_distance: int = -1
) -> tuple[list[ScoredClaim], int]:
    """Drop claims whose text nearly repeats an earlier claim, or whose media all belong to earlier claims
    (``recurring.repeats_media``, the rule across quarters too).

    A medium belongs to an earlier claim when it is the same file or, with ``phash_max_distance`` >= 0, when its
    perceptual hash is within that Hamming distance of one of the earlier claim's media (re-encoded, resized).
    An original and its rectified variant share their media by design and are never each other's duplicates.
    """
    kept: list[ScoredClaim] = []
    texts: list[str] = []  # the kept claims' texts as compared
    place: dict[str, int] = {}  # kept claim id -> its index in kept
    sizes, signs = np.zeros(len(claims)), np.zeros(len(claims), dtype=int)  # of the kept texts (first_near_duplicate)
    media_owner: dict[str, set[str]] = {}  # medium id -> ids of the kept claims that show it
    hashes: list[tuple[int, int, str]] = []  # (hex width, phash as an integer, owner claim id) of the kept claims' media

    def owners(m) -> set[str]:
        found = set(media_owner.get(m.medium_id, set()))
        if phash_max_distance >= 0 and m.phash:
            width, value = len(m.phash), int(m.phash, 16)  # Hamming distance: the set bits of the XOR
            found |= {cid for w, h, cid in hashes if w == width and (h ^ value).bit_count() <= phash_max_distance}
        return found

    for claim in claims:
        pair = {claim.claim_id, claim.variant_of}
        text = compared_text(claim.text)
        twin = first_near_duplicate(text, texts, similarity, sizes, signs,  # SCORER and the length guard
                                    skip=[place[c] for c in pair if c in place]) is not None
        reused = repeats_media(claim.media, lambda m: owners(m) - pair)
        if twin or reused:
            continue
        place[claim.claim_id] = len(kept)
        sizes[len(kept)], signs[len(kept)] = compared_length(text), polarity_id(text)
        kept.append(claim)
        texts.append(text)
        for m in claim.media:
            media_owner.setdefault(m.medium_id, set()).add(claim.claim_id)
            if m.phash:
                hashes.append((len(m.phash), int(m.phash, 16), claim.claim_id))
    return kept, len(claims) - len(kept)


MEDIA_BALANCE_SLACK = 0.02  # the halves' media claims may differ by this share of a half (at least one claim)


def media_limit(total: int, media_share: float) -> int:
    """The most claims with media a release of ``total`` claims may hold: media_share is a hard limit."""
    return math.floor(media_share * total + EPS)


def media_quotas(bins: list[tuple[int, int, int]], media_share: float) -> list[int] | None:
    """How many media claims each bin (size, media claims available, text claims available) takes: what its text
    claims cannot fill, then media preferred up to the bin's own share, then up to the release's limit; None when
    the bins cannot be filled within the limit."""
    limit = media_limit(sum(k for k, _, _ in bins), media_share)
    quotas = [max(0, k - text) for k, _, text in bins]
    if sum(quotas) > limit or any(q > media for q, (_, media, _) in zip(quotas, bins)):
        return None
    left = limit - sum(quotas)
    for wanted in ([media_limit(k, media_share) for k, _, _ in bins], [k for k, _, _ in bins]):
        for i, (_, media, _) in enumerate(bins):
            extra = max(0, min(left, min(media, wanted[i]) - quotas[i]))
            quotas[i] += extra
            left -= extra
    return quotas


def _pick(candidates: list[ScoredClaim], k: int, n_media: int) -> list[ScoredClaim]:
    """k claims: the first n_media with media, the rest without."""
    media = [c for c in candidates if c.media]
    text = [c for c in candidates if not c.media]
    return media[:n_media] + text[: k - n_media]


def _variants_after(claims: list[ScoredClaim], by_id: dict) -> list[int]:
    """[k] = how many of ``claims[k:]`` have a variant in the pool (a suffix count, so each lookup is O(1))."""
    out = [0] * (len(claims) + 1)
    for k in range(len(claims) - 1, -1, -1):
        out[k] = out[k + 1] + (claims[k].variant_of in by_id)
    return out


def _split(claims: list[ScoredClaim]) -> tuple[int, int]:
    n_media = sum(bool(c.media) for c in claims)
    return n_media, len(claims) - n_media


def plan_sizes(size: int, n_pairs: int, n_unknown_natural: int, unknown_available: int, fits) -> tuple[int, int, list[int]]:
    """(pairs, Unknown claims, media quotas) of the largest release up to ``size`` that balance, the Unknown share
    (within one claim, to reach the exact size) and the media limit allow. ``fits(pairs, unknown)`` gives the media
    quotas of such a release, or None where it cannot be filled."""
    capacity = 2 * n_pairs + n_unknown_natural
    for target in range(min(size, capacity), 0, -1):
        ideal = n_unknown_natural * target / capacity
        for n_unknown in sorted(range(max(0, math.floor(ideal) - 1), math.ceil(ideal) + 2), key=lambda u: abs(u - ideal)):
            n = (target - n_unknown) // 2
            if n_unknown > unknown_available or 2 * n + n_unknown != target or n > n_pairs:
                continue
            quotas = fits(n, n_unknown)
            if quotas is not None:
                return n, n_unknown, quotas
    return 0, 0, [0, 0, 0]


def _stratified_media(c_media: list[ScoredClaim], n_media: int, inside_count: int, stratum) -> list[ScoredClaim]:
    """``n_media`` of the media Compromised claims of which ``inside_count`` are in ``stratum`` (as near as the pool
    allows), each stratum taken from the front of the secret rank: no claim is taken for its variant."""
    inside = [c for c in c_media if stratum(c)]
    outside = [c for c in c_media if not stratum(c)]
    b = min(n_media - min(inside_count, len(inside)), len(outside))
    return inside[: n_media - b] + outside[:b]


def select_release(
    claims: list[ScoredClaim], size: int, media_share: float, similarity: float, phash_max_distance: int = -1,
    dedupe: bool = True, *, key: bytes, order: dict[str, float] | None = None, stratum=None,
) -> tuple[list[ScoredClaim], dict]:
    """Intact and Compromised exactly balanced, Unknown at the originals' share, never an original with its variant;
    exactly ``size`` claims when the pool allows it, and never more than media_share of them with media.

    Claims are taken in the secret ``selection_rank`` of ``key``. The Compromised half is the first Compromised
    claims of that rank, media and text apart, whether or not their rewrite held: it must not depend on it (taking
    the claims without a variant first put every failed rewrite in the Compromised half, 50% of it against a 15%
    base rate). The Intact half is the natural Intact claims, then the variants of the Compromised claims left in
    ``order`` (rectified claim id -> its place, the adversarial filter's: every prefix matches the natural claims'
    scores, neither the least nor the most detectable first; see assets/selection/adversarial.py), else in the
    secret rank. ``dedupe`` off: the claims are free of near-duplicates already.

    ``stratum`` (claim -> bool): the Compromised half's media claims are then drawn again per stratum, each from the
    front of the secret rank, so that the stratum's share of them is that of the Intact half's media claims as first
    drawn, or as near as leaves the Intact half whole (it keeps the variants of the claims the Compromised half
    leaves). The release passes "its media carry its own wording" (``channels.carries_wording``): stage 7 cannot
    rewrite every claim whose media show its words (a rewrite must keep them), so its rewrites carry their words less
    often than natural claims do (on the default rehearsal 46% against 53% of the Compromised half: that told
    rewrites from natural Compromised claims at balanced accuracy 0.56 against 0.50 +- 0.05). The stratum never
    changes the release's size.
    """
    rank = selection_rank(key)
    if dedupe:
        pool, duplicates = remove_near_duplicates(sorted(claims, key=rank), similarity, phash_max_distance)
    else:
        pool, duplicates = sorted(claims, key=rank), 0
    order = order or {}
    originals = [c for c in pool if c.variant == "original"]
    by_id = {c.claim_id: c for c in pool}
    compromised = [c for c in originals if c.integrity.label == "compromised"]
    natural_intact = [c for c in originals if c.integrity.label == "intact"]
    unknown = [c for c in originals if c.integrity.label == "unknown"]
    c_media, c_text = [c for c in compromised if c.media], [c for c in compromised if not c.media]

    def compromised_half(pairs: int, n_media: int) -> list[ScoredClaim]:
        return c_media[:n_media] + c_text[: pairs - n_media]

    def intact_for(chosen: list[ScoredClaim]) -> list[ScoredClaim]:
        ids = {c.claim_id for c in chosen}
        variants = [by_id[c.variant_of] for c in compromised if c.claim_id not in ids and c.variant_of in by_id]
        return natural_intact + sorted(variants, key=lambda v: order.get(v.claim_id, 0.0))  # stable: rank within

    # variants of the media (text) Compromised claims after the first k of their kind: what the Intact half keeps
    n_nat_media, n_nat_text = _split(natural_intact)
    left_media, left_text = _variants_after(c_media, by_id), _variants_after(c_text, by_id)
    um, ut = _split(unknown)

    def fits(pairs: int, n_unknown: int) -> list[int] | None:
        """The media quotas (Compromised, Intact, Unknown) of a release with ``pairs`` pairs and ``n_unknown`` Unknown
        claims, or None where it cannot be filled: the two halves' media as equal as the pool allows (within
        MEDIA_BALANCE_SLACK), then as many media claims as the media limit allows (the Compromised half's media quota decides which of its claims it
        takes, and so which variants the Intact half keeps)."""
        limit = media_limit(2 * pairs + n_unknown, media_share)
        slack = max(1, round(MEDIA_BALANCE_SLACK * pairs))  # a difference this small between the halves tells nothing
        qu = min(um, max(n_unknown - ut, media_limit(n_unknown, media_share)))
        if n_unknown - ut > um:
            return None
        best = None
        for q0 in range(max(0, pairs - len(c_text)), min(len(c_media), pairs) + 1):
            im, it = n_nat_media + left_media[q0], n_nat_text + left_text[pairs - q0]
            q1_low, q1_high = max(0, pairs - it), min(im, pairs)
            if q1_low > q1_high:
                continue
            q1 = min(max(q0, q1_low), q1_high)
            u = min(qu, limit - q0 - q1)
            if u < max(0, n_unknown - ut):
                continue
            score = (max(0, abs(q0 - q1) - slack), -(q0 + q1 + u), abs(q0 - q1))
            if best is None or score < best[0]:
                best = (score, [q0, q1, u])
        return None if best is None else best[1]

    def intact_supply(pairs: int) -> int:
        """The most Intact claims a Compromised half of ``pairs`` claims leaves (over its media/text splits)."""
        splits = range(max(0, pairs - len(c_text)), min(len(c_media), pairs) + 1)
        return max((left_media[q] + left_text[pairs - q] for q in splits), default=-1) + len(natural_intact)

    # the most pairs: a Compromised half whose claims leave at least as many Intact ones
    n_pairs = next((p for p in range(min(len(compromised), len(natural_intact) + left_media[0] + left_text[0]), 0, -1)
                    if intact_supply(p) >= p), 0)
    # the quarter's share of Unknown originals: weighted, as claims scored on demand stand for their rating stratum
    total = sum(c.weight for c in originals)
    share = sum(c.weight for c in unknown) / total if total else 0.0
    n_unknown_natural = min(len(unknown), round(share * 2 * n_pairs / (1 - share))) if share < 1 else len(unknown)
    n, n_unknown, quotas = plan_sizes(size, n_pairs, n_unknown_natural, len(unknown), fits)
    chosen_compromised = compromised_half(n, quotas[0])
    chosen_intact = _pick(intact_for(chosen_compromised), n, quotas[1])
    strata = None
    intact_media = [c for c in chosen_intact if c.media]
    if stratum is not None and quotas[0] and intact_media:
        def draw(count: int) -> tuple[list, list] | None:
            """The halves with ``count`` Compromised media claims in the stratum; None where the Intact half falls
            short of its claims or its media quota."""
            media = _stratified_media(c_media, quotas[0], count, stratum)
            half = media + c_text[: n - len(media)]
            intact = _pick(intact_for(half), n, quotas[1])
            ok = len(half) == n and len(intact) == n and sum(bool(c.media) for c in intact) >= quotas[1]
            return (half, intact) if ok else None

        have = sum(map(stratum, (c for c in chosen_compromised if c.media)))
        want = round(quotas[0] * sum(map(stratum, intact_media)) / len(intact_media))
        step = 1 if want > have else -1
        for count in range(want, have, -step):  # the nearest count to the share that leaves the Intact half whole
            if (found := draw(count)) is not None:
                chosen_compromised, chosen_intact = found
                break
        strata = {half: round(sum(map(stratum, m)) / len(m), 4) if (m := [c for c in cs if c.media]) else None
                  for half, cs in (("compromised", chosen_compromised), ("intact", chosen_intact))}
    chosen = chosen_compromised + chosen_intact + _pick(unknown, n_unknown, quotas[2])
    report = {
        "near_duplicates": duplicates,
        "available": {"intact": len(natural_intact), "compromised": len(compromised), "unknown": len(unknown),
                      "rectified": sum(c.variant == "rectified" for c in pool)},
        "selected": {"intact": len(chosen_intact), "compromised": len(chosen_compromised), "unknown": n_unknown},
        "unknown_share_of_originals": round(share, 4),
        "release_size": size,
        "media_share": media_share,
        # the largest release the pool allows (balance, Unknown share, media limit); the release has exactly this
        "feasible_size": 2 * n + n_unknown,
        "balanced_capacity": 2 * n_pairs + n_unknown_natural,
        "media_claims": sum(bool(c.media) for c in chosen),
        **({"stratum_share_of_media": strata} if strata else {}),
    }
    return chosen, report


def filter_inputs(pool: list[ScoredClaim], first: list[ScoredClaim]) -> tuple[list, list, int]:
    """What the adversarial filter reads, given the selection ``first`` made on ``pool`` without it: the natural
    Compromised claims the rewrites must hide among (not their own originals), the rewrites the Intact half can use
    (the Compromised half does not depend on the variants: those of its claims can serve no Intact half), and how
    many rewrites the selection used."""
    used = sum(c.variant == "rectified" for c in first)
    taken = {c.claim_id for c in first if c.integrity.label == "compromised"}
    usable = [c for c in pool if c.variant == "rectified" and c.variant_of not in taken]
    hidden = {c.variant_of for c in usable}
    natural = [c for c in pool if c.variant == "original" and c.integrity.label == "compromised"
               and c.claim_id not in hidden]
    return natural, usable, used


def shown(first: list[ScoredClaim]) -> set[str]:
    """The natural Compromised claims the selection ``first`` shows: the rewrites it keeps must look like them."""
    return {c.claim_id for c in first if c.variant == "original" and c.integrity.label == "compromised"}


def filter_spare(used: int) -> int:
    """The rewrites the adversarial filter keeps at least: a few more than the selection used (with exactly as many
    the pairs' upper bound, and so the Unknown claims the share allows, can come out one lower: 999 of 1,000 on the
    4,000-review rehearsal)."""
    return used + max(2, math.ceil(0.02 * used))


def filter_seed(key: bytes) -> int:
    return int(keyed(key, "adversarial filter")[:8], 16)


def carrying(media_text):
    """claim -> do its media carry its own wording (``channels.carries_wording`` of what ``media_text`` reads),
    worked out once per claim."""
    from assets.selection.channels import carries_wording

    seen: dict[str, bool] = {}

    def stratum(claim: ScoredClaim) -> bool:
        if claim.claim_id not in seen:
            seen[claim.claim_id] = bool(claim.media) and carries_wording(media_text(claim.media), claim.text)
        return seen[claim.claim_id]
    return stratum


def select_undetectable(pool: list[ScoredClaim], release_rules: ReleaseSettings, claim_rules: ClaimRules,
                        key: bytes, media_text=None) -> tuple[list, dict, dict]:
    """``select_release`` after adversarial filtering: the rewrites are kept so that a classifier's scores of them
    match the natural Compromised claims' (the text and the channels beyond it, the media's text with
    ``media_text``, a ``channels.MediaTexts``), as many as match and at least as many as the selection uses (unless
    a short release is allowed), and taken in the filter's matched order. With ``media_text``, the final selection
    draws the Compromised half's media claims stratified to the share of the Intact half's whose media carry their
    own wording (``select_release``'s ``stratum``). Returns the chosen claims, the selection's report and the
    filter's."""
    args = (release_rules.release_size, release_rules.media_share, release_rules.text_duplicate_similarity,
            claim_rules.near_duplicate_distance)
    if not any(c.variant == "rectified" for c in pool):
        chosen, report = select_release(pool, *args, key=key)
        return chosen, report, {"skipped": "no rewrite in the pool", "variants": 0, "left_out": 0}
    first, unfiltered = select_release(pool, *args, key=key)
    natural, usable, needed = filter_inputs(pool, first)
    # a short release allowed, the filter keeps only the rewrites that match, even fewer than the selection uses: a
    # smaller release, not a blocked one (a 25-quarter world's small quarter ran out of candidates, kept them all,
    # and its gate read 0.69 against 0.51 + 0.16)
    spare = 0 if release_rules.allow_short_release else filter_spare(needed)
    corpus = [c for c in pool if c.variant == "original"]
    order, left_out, adversarial = filter_detectable(natural, usable, keep_at_least=spare, seed=filter_seed(key),
                                                     corpus=corpus, media_text=media_text, reference=shown(first))

    comeback = sorted(left_out, key=lambda i: (order[i], i))  # in the matched order: the next ones first

    def select(back: int, stratum=None) -> tuple[list, dict]:
        out = set(comeback[back:])
        return select_release([c for c in pool if c.claim_id not in out], *args, key=key, order=order,
                              stratum=stratum)

    # where what it kept cannot fill the selection's quotas (near-duplicates and the media quotas take some), the
    # next ones it left out come back, as few as bring the size back (the stratum never changes the size)
    carry = carrying(media_text) if media_text is not None else None  # the halves' media carry their words alike
    chosen, report = select(0, carry)
    restored = 0
    if report["feasible_size"] < unfiltered["feasible_size"] and not release_rules.allow_short_release:
        restored, high = 1, len(left_out)
        while restored < high:  # the fewest that bring the size back (all of them do: the pool is then whole)
            mid = (restored + high) // 2
            if select(mid)[1]["feasible_size"] >= unfiltered["feasible_size"]:
                high = mid
            else:
                restored = mid + 1
        chosen, report = select(restored, carry)
    return chosen, report, {**adversarial, "needed": needed, "restored": restored}
