"""The release: a balanced split per quarter in the VeriTaS format, with a manifest, checked before it is published."""

import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import warnings
import zipfile
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import numpy as np
import polars as pl

from assets.common import StageYield, load_upstream, quantiles, quarter_of_context, stage_asset
from dagster_project.resources.media import MediaStore
from assets.claims.normalized_claims import MEDIA_REF
from assets.claims.bins import EPS, PUBLISHED_DECIMALS, bin3
from assets.claims.reliability import alpha_metadata, ensemble_alpha
from assets.claims.failures import stage_failed_answers
from assets.release.adversarial import filter_detectable
from assets.release.audit import pool_rows, release_rows, shortcut_audit
from assets.release.card import integrity_summary, read_manifest, vision_note, write_release_card, zip_name
from assets.release.order import (
    MAX_Z,
    key_fingerprint,
    keyed,
    order_key,
    order_problems,
    release_orders,
    release_seed,
    seed_commitment,
    shuffled,
)
from assets.release.recurring import (
    compared_length,
    compared_text,
    earlier_releases,
    first_near_duplicate,
    match_recurring,
    polarity_id,
    release_content_id,
    repeats_media,
    release_fingerprints,
)
from dagster_project.config import PROJECT_ROOT, PipelineResource
from dagster_project.history import latest_json, latest_materialization
from dagster_project.partitions import to_label
from dagster_project.resources.llm import LLMResource
from dagster_project.resources.store import StoreResource, new_version
from prompts import HERE as PROMPTS_DIR
from prompts import template_hash
from schemas.records import (
    ReleaseClaim,
    ReleaseIntegrity,
    ReleaseMedium,
    ReleaseScore,
    ScoredClaim,
)

STAGE = "release"
JPEG_MAGIC = b"\xff\xd8\xff"


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


def select_release(
    claims: list[ScoredClaim], size: int, media_share: float, similarity: float, phash_max_distance: int = -1,
    dedupe: bool = True, *, key: bytes, detectability: dict[str, float] | None = None,
) -> tuple[list[ScoredClaim], dict]:
    """Intact and Compromised exactly balanced, Unknown at the originals' share, never an original with its variant;
    exactly ``size`` claims when the pool allows it, and never more than media_share of them with media.

    Claims are taken in the secret ``selection_rank`` of ``key``. The Compromised half is the first Compromised
    claims of that rank, media and text apart, whether or not their rewrite held: it must not depend on it (taking
    the claims without a variant first put every failed rewrite in the Compromised half, 50% of it against a 15%
    base rate). The Intact half is the natural Intact claims, then the variants of the Compromised claims left, the
    least detectable first (``detectability``: rectified claim id -> how well a classifier told it from natural
    claims; see assets/release/adversarial.py). ``dedupe`` off: the claims are free of near-duplicates already."""
    rank = selection_rank(key)
    if dedupe:
        pool, duplicates = remove_near_duplicates(sorted(claims, key=rank), similarity, phash_max_distance)
    else:
        pool, duplicates = sorted(claims, key=rank), 0
    detectability = detectability or {}
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
        return natural_intact + sorted(variants, key=lambda v: detectability.get(v.claim_id, 0.0))

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


def filter_spare(used: int) -> int:
    """The rewrites the adversarial filter keeps at least: a few more than the selection used (with exactly as many
    the pairs' upper bound, and so the Unknown claims the share allows, can come out one lower: 999 of 1,000 on the
    4,000-review rehearsal)."""
    return used + max(2, math.ceil(0.02 * used))


def filter_seed(key: bytes) -> int:
    return int(keyed(key, "adversarial filter")[:8], 16)


def select_undetectable(pool: list[ScoredClaim], pipeline: PipelineResource, key: bytes) -> tuple[list, dict, dict]:
    """``select_release`` after adversarial filtering: the rewrites a classifier tells from natural Compromised claims
    are left out, as far as the release can spare them (it keeps as many as the selection uses, unless a short
    release is allowed), and the rest are taken least detectable first. Returns the chosen claims, the selection's
    report and the filter's."""
    args = (pipeline.release_size, pipeline.media_share, pipeline.text_duplicate_similarity,
            pipeline.near_duplicate_distance)
    if not any(c.variant == "rectified" for c in pool):
        chosen, report = select_release(pool, *args, key=key)
        return chosen, report, {"skipped": "no rewrite in the pool", "variants": 0, "left_out": 0}
    first, unfiltered = select_release(pool, *args, key=key)
    natural, usable, needed = filter_inputs(pool, first)
    # a short release allowed, the filter leaves out every rewrite it tells apart, even below what the selection
    # uses: a smaller release, not a blocked one (a 25-quarter world's small quarter ran out of candidates, kept
    # them all, and its gate read 0.69 against 0.51 + 0.16)
    spare = 0 if pipeline.allow_short_release else filter_spare(needed)
    detectability, left_out, adversarial = filter_detectable(natural, usable, keep_at_least=spare,
                                                             seed=filter_seed(key))

    comeback = sorted(left_out, key=lambda i: (detectability[i], i))  # the least detectable come back first

    def select(back: int) -> tuple[list, dict]:
        out = set(comeback[back:])
        return select_release([c for c in pool if c.claim_id not in out], *args, key=key, detectability=detectability)

    # the filter leaves out by text alone: where what it keeps cannot fill the selection's quotas (398 of 400 with
    # template-only rewrites), the least detectable it left out come back, as few as bring the size back
    chosen, report = select(0)
    restored = 0
    if report["feasible_size"] < unfiltered["feasible_size"] and not pipeline.allow_short_release:
        restored, high = 1, len(left_out)
        while restored < high:  # the fewest that bring the size back (all of them do: the pool is then whole)
            mid = (restored + high) // 2
            if select(mid)[1]["feasible_size"] >= unfiltered["feasible_size"]:
                high = mid
            else:
                restored = mid + 1
        chosen, report = select(restored)
    return chosen, report, {**adversarial, "needed": needed, "restored": restored}


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


def code_version() -> str:
    """The commit the code comes from: the checkout's HEAD, with "-dirty" when tracked files differ from it (the
    release was built from code no commit holds), else $VERITAS_CODE_VERSION (an installed copy), else "unknown"
    (which fails the release gate outside the demo)."""
    def git(*args: str) -> str:
        try:
            out = subprocess.run(["git", "-C", str(PROJECT_ROOT), *args], check=False, capture_output=True, text=True,
                                 timeout=5)
        except (OSError, subprocess.SubprocessError):
            return ""
        return out.stdout.strip() if out.returncode == 0 else ""

    head = git("rev-parse", "HEAD")
    if head and git("status", "--porcelain", "--untracked-files=no"):
        head += "-dirty"
    return head or os.environ.get("VERITAS_CODE_VERSION", "").strip() or "unknown"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_release(
    folder: Path, quarter: str, claims: list[ReleaseClaim], files: list[tuple[int, str, str]], media: MediaStore,
    provenance: dict, injection_flags: list[list[str]] | None = None, recurring: dict[int, dict] | None = None,
) -> dict:
    """meta.json, claims.json, images/<id>.jpg, videos/<id>.mp4 and manifest.json into ``folder``.
    ``injection_flags`` (one list per claim) and ``recurring`` (release claim id -> the earlier release claim it
    repeats) go into claims.parquet and the manifest, never into claims.json. The card shows the provenance's
    order, reliability, shortcut audit and recurring sections."""
    flags = list(injection_flags) if injection_flags is not None else [[] for _ in claims]
    (folder / "images").mkdir()
    (folder / "videos").mkdir()
    for mid, kind, path in files:
        target = folder / ("images" if kind == "image" else "videos") / f"{mid}.{'jpg' if kind == 'image' else 'mp4'}"
        shutil.copyfile(media.path(path), target)
    labels = [bin3(c.integrity.score) for c in claims]
    meta = {
        "year": int(quarter[:4]),
        "quarter": int(quarter[5]),
        "claim_counts": {
            "intact": labels.count("intact"), "nei": labels.count("unknown"),
            "compromised": labels.count("compromised"), "total": len(claims),
        },
        "media_counts": {"images": sum(k == "image" for _, k, _ in files), "videos": sum(k == "video" for _, k, _ in files)},
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=2))
    payload = {"claims": [c.model_dump() for c in claims]}
    (folder / "claims.json").write_text(json.dumps(payload, indent=1, ensure_ascii=False))
    release_frame(claims, flags, recurring).write_parquet(folder / "claims.parquet")
    write_zip(folder, zip_name(quarter))
    # media.parquet, croissant.json, README.md; no run id, so equal content gives equal bytes
    write_release_card(folder, quarter, integrity=provenance)
    manifest = {
        **provenance,
        "quarter": quarter,
        "counts": meta,
        "injection_flags": {str(c.id): f for c, f in zip(claims, flags) if f},  # release claim id -> phrases found
        "files": {str(p.relative_to(folder)): _sha256(p) for p in sorted(folder.rglob("*")) if p.is_file()},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False))
    return manifest


def release_frame(claims: list[ReleaseClaim], injection_flags: list[list[str]] | None = None,
                  recurring: dict[int, dict] | None = None) -> pl.DataFrame:
    """The release as one flat table: a row per claim, scores as columns, media as JSON text, the
    instruction-like phrases found in each claim's sources (``injection_flags``) and, for a claim that recurs from an
    earlier release, that release's quarter and claim id."""
    flags = list(injection_flags) if injection_flags is not None else [[] for _ in claims]
    def score(v):
        return None if v is None else v.score

    rows = [{
        "id": c.id, "text": c.text, "date": c.date, "language": c.language, "review_url": c.review_url,
        "veracity": score(c.veracity), "context_coverage": score(c.context_coverage),
        "integrity": c.integrity.score, "decisive_property": c.integrity.decisive_property,
        "label": bin3(c.integrity.score), "n_images": sum(m.type == "image" for m in c.media),
        "n_videos": sum(m.type == "video" for m in c.media),
        "media_json": json.dumps([m.model_dump() for m in c.media], ensure_ascii=False),
        "veracity_justification": c.veracity.justification if c.veracity else None,
        "context_coverage_justification": c.context_coverage.justification if c.context_coverage else None,
        "injection_flags": f,
        "recurring_quarter": (recurring or {}).get(c.id, {}).get("quarter"),
        "recurring_id": (recurring or {}).get(c.id, {}).get("id"),
    } for c, f in zip(claims, flags)]
    schema = {"id": pl.Int64, "text": pl.Utf8, "date": pl.Utf8, "language": pl.Utf8, "review_url": pl.Utf8,
              "veracity": pl.Float64, "context_coverage": pl.Float64, "integrity": pl.Float64,
              "decisive_property": pl.Utf8, "label": pl.Utf8, "n_images": pl.Int64, "n_videos": pl.Int64,
              "media_json": pl.Utf8, "veracity_justification": pl.Utf8, "context_coverage_justification": pl.Utf8,
              "injection_flags": pl.List(pl.Utf8), "recurring_quarter": pl.Utf8, "recurring_id": pl.Int64}
    return pl.DataFrame(rows, schema=schema, orient="row")


ZIP_MEMBERS = ("meta.json", "claims.json", "images", "videos")


def write_zip(folder: Path, name: str) -> Path:
    """The VeriTaS-format files (meta.json, claims.json, images/, videos/) as one zip, paths relative to it."""
    target = folder / name
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for member in ZIP_MEMBERS:
            path = folder / member
            files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
            for f in files:
                # media are already compressed; a fixed timestamp makes the zip reproducible
                info = zipfile.ZipInfo(str(f.relative_to(folder)), date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_STORED if f.suffix in (".jpg", ".mp4") else zipfile.ZIP_DEFLATED
                zf.writestr(info, f.read_bytes())
    return target


def validate_release(folder: Path, release_size: int | None = None, media_share: float | None = None,
                     allow_short: bool | None = None) -> list[str]:
    """The VeriTaS-format check: files present and real, scores in range, integrity rule, balance, meta counts; no
    label readable from the order of claims.json, the claim ids or the media ids; no problem in the manifest's
    shortcut audit; the media limit and the exact size (``release_size``; fewer only where the manifest's selection
    found no more possible and a short release is allowed); a known code version outside a demo. The parameters
    default to the ones the manifest's selection records; absent, they are not checked."""
    problems = []
    try:
        meta = json.loads((folder / "meta.json").read_text())
        claims = json.loads((folder / "claims.json").read_text())["claims"]
    except (OSError, ValueError, KeyError) as err:
        return [f"unreadable release: {err}"]
    counts = {"intact": 0, "nei": 0, "compromised": 0}
    for raw in claims:
        try:
            claim = ReleaseClaim.model_validate(raw)
        except ValueError as err:
            problems.append(f"claim {raw.get('id')}: {str(err).splitlines()[0]}")
            continue
        for m in claim.media:
            path = folder / m.file_path
            head = path.read_bytes()[:12] if path.exists() else b""
            if not head:
                problems.append(f"claim {claim.id}: missing {m.file_path}")
            elif m.type == "image" and not head.startswith(JPEG_MAGIC):
                problems.append(f"claim {claim.id}: {m.file_path} is not a JPEG")
            elif m.type == "video" and head[4:8] != b"ftyp":
                problems.append(f"claim {claim.id}: {m.file_path} is not an MP4")
        for ref_kind, ref_id in re.findall(r"<(image|video):(\d+)>", claim.text):
            if not any(m.type == ref_kind and m.id == int(ref_id) for m in claim.media):
                problems.append(f"claim {claim.id}: text references missing <{ref_kind}:{ref_id}>")
        parts = {
            "context_coverage": claim.context_coverage.score if claim.context_coverage else None,
            "veracity": claim.veracity.score if claim.veracity else None,
            "contextualization": min((m.contextualization.score for m in claim.media if m.contextualization), default=None),
        }
        present = [v for v in parts.values() if v is not None]
        if not present or abs(min(present) - claim.integrity.score) > 0.011:
            problems.append(f"claim {claim.id}: integrity {claim.integrity.score} is not the lowest of {parts}")
        elif parts.get(claim.integrity.decisive_property) is None or abs(parts[claim.integrity.decisive_property] - claim.integrity.score) > 0.011:
            problems.append(f"claim {claim.id}: decisive property {claim.integrity.decisive_property} does not hold the lowest score")
        label = bin3(claim.integrity.score)
        counts["nei" if label == "unknown" else label] += 1
    if counts["intact"] != counts["compromised"]:
        problems.append(f"unbalanced: {counts['intact']} intact vs {counts['compromised']} compromised")
    manifest = read_manifest(folder)
    problems += size_problems(manifest.get("selection") or {}, claims, release_size, media_share, allow_short)
    problems += provenance_problems(manifest)
    problems += order_problems(release_orders(claims, bin3))
    audit = manifest.get("shortcut_audit") or {}
    problems += [f"shortcut audit: {p}" for p in audit.get("problems", [])]
    if not audit.get("allow_text_shortcut"):
        problems += [f"shortcut audit: {p}" for p in audit.get("text_problems", [])]
    expected = {**counts, "total": len(claims)}
    if meta.get("claim_counts") != expected:
        problems.append(f"meta claim_counts {meta.get('claim_counts')} != {expected}")
    files = {"images": len(list((folder / "images").glob("*.jpg"))), "videos": len(list((folder / "videos").glob("*.mp4")))}
    if meta.get("media_counts") != files:
        problems.append(f"meta media_counts {meta.get('media_counts')} != files {files}")
    return problems


def size_problems(selection: dict, claims: list[dict], release_size: int | None, media_share: float | None,
                  allow_short: bool | None = None) -> list[str]:
    """More media claims than media_share allows; fewer (or more) claims than release_size where the selection (the
    manifest's report) found that many possible; and fewer than release_size at all, unless a short release is
    allowed (``allow_short``, by default the selection's ``allow_short_release``)."""
    release_size = selection.get("release_size") if release_size is None else release_size
    media_share = selection.get("media_share") if media_share is None else media_share
    allow_short = bool(selection.get("allow_short_release")) if allow_short is None else allow_short
    problems = []
    with_media = sum(bool(c.get("media")) for c in claims)
    if media_share is not None and with_media > media_limit(len(claims), media_share):
        problems.append(f"{with_media} of {len(claims)} claims have media: over the media share {media_share}")
    if release_size is not None:
        expected = min(release_size, selection.get("feasible_size", release_size))
        if len(claims) != expected:
            problems.append(f"{len(claims)} claims, not the {expected} the release size {release_size} and the pool allow")
        elif len(claims) < release_size and not allow_short:
            problems.append(f"{len(claims)} claims, short of the release size {release_size}: the quarter's pool allows "
                            "no more under the balance, Unknown-share and media rules (available "
                            f"{selection.get('available')}, selected {selection.get('selected')}). Publish it short "
                            "only on purpose (stages.allow_short_release: true; its card then says so), or lower "
                            "stages.release_size")
    return problems


def provenance_problems(manifest: dict) -> list[str]:
    """A release outside a demo must name the code that built it."""
    if manifest.get("code_version") == "unknown" and not manifest.get("demo"):
        return ["code_version is unknown: the release cannot be traced to the code that built it. Build it from a git "
                "checkout, or set VERITAS_CODE_VERSION to the commit the installed code comes from"]
    return []


def model_diversity(models: list[dict]) -> dict:
    """Whether the raters are distinct models; members sharing one (the embedded demo's three temperatures of
    SmolLM2) are not independent raters, and the manifest says so."""
    distinct = sorted({m["model"] for m in models})
    note = "" if len(distinct) == len(models) else (
        f"{len(models)} members share {len(distinct)} model(s): their agreement is not that of independent raters")
    return {"members": len(models), "distinct_models": len(distinct), "models_distinct": not note, "note": note}


def rewrite_summary(chosen: list[ScoredClaim], adversarial: dict) -> dict:
    """What the card says of the release's rewritten claims, in aggregate only (never which claims): how many, the
    rounds of the critique-and-refine loop they took, their word-level edit ratio (quantiles), and the adversarial
    filter's report."""
    variants = [c for c in chosen if c.variant == "rectified"]
    return {"released": len(variants),
            "rounds": {str(r): n for r, n in sorted(Counter(c.rewrite_rounds for c in variants).items())},
            "edit_ratio": quantiles(c.edit_ratio for c in variants if c.edit_ratio is not None),
            "adversarial_filter": adversarial}


def _cost_summary(llm: LLMResource, quarter: str) -> dict:
    """What the quarter's model calls cost, from the ledger (every stage, every run of the quarter)."""
    report = llm.ledger_report(quarter)
    keep = ("calls", "model_calls", "cache_hits", "prompt_tokens", "completion_tokens", "cost_usd", "errors")
    return {**{k: report[k] for k in keep},
            "by_stage": {stage: {k: v[k] for k in keep} for stage, v in report["by_stage"].items()},
            "by_model": {model: {k: v[k] for k in keep} for model, v in report["by_model"].items()}}


# A release reads the releases before it (recurring claims): the quarter before's, through this self-dependency, and
# the ones that release read. So a backfill builds releases oldest first, and a rebuilt release makes the next stale.
with warnings.catch_warnings():  # the first partition's quarter before does not exist: beta in 1.13, and needed
    warnings.simplefilter("ignore", dg.BetaWarning)
    PREVIOUS_QUARTER = dg.TimeWindowPartitionMapping(start_offset=-1, end_offset=-1,
                                                     allow_nonexistent_upstream_partitions=True)


def previous_release(context: dg.AssetExecutionContext) -> tuple[str, str, str] | None:
    """(quarter, version, content id) of the release of the quarter before, as Dagster recorded its latest
    materialization; None when that quarter has none (the first partition, or a quarter never released)."""
    for key in context.asset_partition_keys_for_input("release"):
        record = latest_materialization(context.instance, "release", to_label(key))
        if record is not None:
            meta = record.asset_materialization.metadata
            return to_label(key), meta["version"].value, meta["content_id"].value if "content_id" in meta else ""
    return None


@stage_asset(
    "release",
    "The quarter's balanced split in the VeriTaS format (meta.json, claims.json, images/, videos/).",
    deps=("rectified_claims", dg.AssetDep("release", partition_mapping=PREVIOUS_QUARTER)),
    kinds=("json", "python"),
)
def release(
    context: dg.AssetExecutionContext, pipeline: PipelineResource, store: StoreResource, llm: LLMResource
) -> dg.MaterializeResult:
    quarter = quarter_of_context(context)
    claims = load_upstream(store, "rectified_claims", quarter, ScoredClaim)
    previous = previous_release(context)
    chain = earlier_releases(previous[:2] if previous else None, store.release_folder)
    earlier = {q: release_fingerprints(folder) for q, folder in chain.items()}
    recurring = match_recurring(claims, earlier, pipeline.text_duplicate_similarity, pipeline.near_duplicate_distance)
    pool = claims
    if pipeline.recurring == "drop":  # an original that recurs takes its rectified variant with it, and back
        gone = {k for c in claims if c.claim_id in recurring for k in (c.claim_id, c.variant_of)}
        pool = [c for c in claims if c.claim_id not in gone]
    key = order_key(store)
    pool = sorted(pool, key=lambda c: c.claim_id)  # the table's row order varies with the runs' concurrency
    chosen, report, adversarial = select_undetectable(pool, pipeline, key)
    report["allow_short_release"] = pipeline.allow_short_release
    chosen, release_claims, files, order = ordered_release(chosen, key)
    flags = [c.injection_flags for c in chosen]
    marks = {rc.id: recurring[c.claim_id] for c, rc in zip(chosen, release_claims) if c.claim_id in recurring}
    scored = sorted((c for c in claims if c.variant == "original"), key=lambda c: c.claim_id)  # the whole scored pool
    audit = shortcut_audit(release_rows(release_claims, [c.variant for c in chosen]), pool_rows(scored),
                           seed=int(order["seed_commitment"][:8], 16))
    audit["allow_text_shortcut"] = pipeline.allow_text_shortcut
    version = new_version(context.run_id)
    staging = store.release_staging(quarter, version)
    provenance = {
        "version": version,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "code_version": code_version(),
        "demo": pipeline.demo_release(),  # demo: true counts only for the bundled snapshot
        "prompt_versions": {p.stem: template_hash(p.stem) for p in sorted(PROMPTS_DIR.glob("[!_]*.j2"))},
        "models": llm.model_set(),
        "model_diversity": model_diversity(llm.model_set()),
        "llm_cost": _cost_summary(llm, quarter),
        "inputs": {"rectified_claims": store.latest_version("rectified_claims", quarter),
                   "releases": {q: folder.name for q, folder in chain.items()}},
        "selection": report,
        "order": order,
        # each medium's perceptual hash, by release medium id: later quarters match their claims against this one's
        "media_phash": media_phashes(chosen, release_claims),
        # before the disagreement filter (every claim stage 6 rated), after it (the originals it kept), and the
        # released natural claims: the rewrites' re-scoring is no independent rating of the quarter's claims
        "reliability": {**({"before_filter": before} if (before := latest_json(
                            context.instance, "scored_claims", quarter, "reliability_before_filter_json")) else {}),
                        "scored": ensemble_alpha(scored),
                        "released": ensemble_alpha([c for c in chosen if c.variant == "original"])},
        "failed_answers": stage_failed_answers(context.instance, quarter),
        "shortcut_audit": audit,
        "rectification": rewrite_summary(chosen, adversarial),
        "recurring": {"mode": pipeline.recurring, "count": len(marks), "share": round(len(marks) / max(len(chosen), 1), 4),
                      "claims": {str(k): v for k, v in sorted(marks.items())}, "earlier_quarters": sorted(earlier),
                      "earlier_releases": {q: release_content_id(folder) for q, folder in chain.items()},
                      "dropped": len(claims) - len(pool)},
        "injection_policy": pipeline.injection_policy,
    }
    manifest = write_release(staging, quarter, release_claims, files, store.media_store(), provenance, flags, marks)
    problems = validate_release(staging, pipeline.release_size, pipeline.media_share, pipeline.allow_short_release)
    if problems:
        raise dg.Failure(f"release {quarter} failed the format check ({len(problems)} problems), first: {problems[0]}",
                         metadata={"problems": dg.MetadataValue.json(problems[:50])})
    final = store.publish_release(quarter, staging)
    content_id = release_content_id(final)
    stats = StageYield(len(claims))
    if len(pool) < len(claims):
        stats.drop("recurring", len(claims) - len(pool))
    stats.drop("near_duplicate", report["near_duplicates"])
    stats.drop("not_selected", len(pool) - len(chosen) - report["near_duplicates"])
    meta = stats.metadata(len(chosen))
    counts = manifest["counts"]["claim_counts"]
    if counts["intact"] == 0 and counts["compromised"] == 0:
        context.log.warning(f"release {quarter}: no balanced pair available ({report['available']}); the split has no Intact/Compromised claims")
    if note := vision_note(manifest):  # media claims rated by members that cannot see them
        context.log.warning(f"release {quarter}: {note}")
    summary = integrity_summary(manifest)
    context.log.info(f"release {quarter}: " + "; ".join(summary))
    meta.update({
        "quarter": quarter, "version": version, "path": dg.MetadataValue.path(str(final)),
        "content_id": content_id, "previous_release": previous[2] if previous else "",
        **{f"claims/{k}": v for k, v in counts.items()},
        **{f"media/{k}": v for k, v in manifest["counts"]["media_counts"].items()},
        "claims/with_media": report["media_claims"], "claims/injection_flagged": sum(bool(f) for f in flags),
        "claims/recurring": len(marks), "recurring/share": provenance["recurring"]["share"],
        **alpha_metadata(provenance["reliability"]["released"]),
        "integrity_summary": "\n".join(summary),
        "selection": dg.MetadataValue.json(report),
    })
    return dg.MaterializeResult(metadata=meta, data_version=dg.DataVersion(content_id))
