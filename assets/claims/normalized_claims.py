"""Stage 5: keep the media that are part of the claim and rewrite the claim as the bare assertion."""

import re
from functools import cache

from assets.common import (
    StageYield,
    count,
    map_records,
    stable_id,
)
from assets.ensemble import ask, injection_flags, llm_claim_asset, prefetch
from assets.media import MediaStore, near_duplicate_groups
from dagster_project.config import PipelineResource
from dagster_project.resources.llm import LLMResource
from prompts import label_scheme
from schemas.answers import ClaimTextAnswer, MediaFilterAnswer
from schemas.records import Article, ClaimAppearances, Medium, NormalizedClaim

STAGE = "normalized_claims"
MEDIA_REF = re.compile(r"<(image|video):(\d+)>")
MIN_SIDE = 120  # smaller images are icons, avatars or badges


@cache
def _verdict_pattern(language: str) -> re.Pattern:
    words = label_scheme()["verdict_words"]
    chosen = set(words.get("en", [])) | set(words.get(language, []))
    # Arabic and other scripts without \b-friendly boundaries still match as substrings of words.
    return re.compile(r"(?<!\w)(" + "|".join(re.escape(w) for w in sorted(chosen, key=len, reverse=True)) + r")(?!\w)", re.IGNORECASE)


def verdict_leak(text: str, language: str) -> str:
    """The first verdict word in the text, or ''."""
    match = _verdict_pattern(language or "en").search(text)
    return match.group(1) if match else ""


def count_sentences(text: str) -> int:
    return len([s for s in re.split(r"(?<=[.!?؟。])\s+", MEDIA_REF.sub("", text).strip()) if s.strip()])


def count_words(text: str) -> int:
    return len(MEDIA_REF.sub("", text).split())


def check_claim_text(text: str, media: list[Medium], language: str, pipeline: PipelineResource) -> str:
    """Validation of a normalized claim; returns the failure reason or ''."""
    if not text.strip():
        return "empty"
    if count_words(text) > pipeline.max_words:
        return "too_many_words"
    if count_sentences(text) > pipeline.max_sentences:
        return "too_many_sentences"
    leak = verdict_leak(text, language)
    if leak:
        return "verdict_leak"
    for kind, index in MEDIA_REF.findall(text):
        i = int(index)
        if i >= len(media) or media[i].kind != kind:
            return "missing_referenced_medium"
    return ""


def with_media_refs(text: str, media: list[Medium]) -> str:
    """Every kept medium is referenced once: missing references are put in front of the text."""
    present = set(MEDIA_REF.findall(text))
    missing = [f"<{m.kind}:{i}>" for i, m in enumerate(media) if (m.kind, str(i)) not in present]
    return " ".join(missing + [text.strip()])


def select_media(claim: ClaimAppearances, keep: dict[str, str], pipeline: PipelineResource) -> tuple[list[Medium], list[str]]:
    """Apply the filter verdicts, drop tiny and near-duplicate media, keep at most max_media, videos first."""
    dropped, candidates = [], []
    for m in claim.media:
        reason = keep.get(m.medium_id, "")
        if m.kind == "image" and min(m.width, m.height) < MIN_SIDE:
            reason = "too_small"
        elif m.origin == "article" and any(t in (m.alt + " " + m.caption).lower() for t in ("logo", "stamp", "badge")):
            reason = reason or "fact_checker_graphic"
        if reason:
            dropped.append(f"{m.medium_id}:{reason}")
        else:
            candidates.append(m)
    # Appearance media before the article's copies, videos before images: the first of a near-duplicate group wins.
    candidates.sort(key=lambda m: (m.kind != "video", m.origin != "appearance"))
    groups = near_duplicate_groups([(m.medium_id, m.phash) for m in candidates if m.phash], pipeline.near_duplicate_distance)
    duplicates = {mid for g in groups for mid in g[1:]}
    dropped += [f"{mid}:near_duplicate" for mid in duplicates]
    unique = [m for m in candidates if m.medium_id not in duplicates]
    dropped += [f"{m.medium_id}:over_limit" for m in unique[pipeline.max_media :]]
    return unique[: pipeline.max_media], dropped


def normalize_claim(
    claim: ClaimAppearances, article: Article | None, llm: LLMResource, pipeline: PipelineResource, store: MediaStore
) -> tuple[NormalizedClaim | None, str]:
    """The normalized claim and '', or the claim kept in the fact-checker's wording and why the model's text was not
    used (``model_error:<kind>``, ``model_text:<check>``), or None and the drop reason."""
    member = llm.member_names()[0]
    verdicts: dict[str, str] = {}
    for m in claim.media:
        answer = ask(
            llm, member, "media_filter", MediaFilterAnswer, stage=STAGE, media=[m], media_store=store,
            claim=claim.claim_text, kind=m.kind, alt=m.alt, caption=m.caption, origin=m.origin, source=m.source_url,
        )
        if answer.parsed and answer.parsed["keep"] == "no":
            verdicts[m.medium_id] = answer.parsed["reason"]
    media, dropped = select_media(claim, verdicts, pipeline)
    language = claim.language or (article.language if article else "")
    answer = ask(
        llm, member, "normalize_claim", ClaimTextAnswer, stage=STAGE, media=media, media_store=store,
        claim=claim.claim_text, title=claim.title or (article.title if article else ""), language=language,
        claim_date=str(claim.claim_date or ""),
        max_words=pipeline.max_words, max_sentences=pipeline.max_sentences,
    )
    text, source, fallback = "", "llm", ""
    if answer.parsed:
        text = with_media_refs(answer.parsed["claim"], media)
        rejected = check_claim_text(text, media, language, pipeline)
        fallback = f"model_text:{rejected}" if rejected else ""
    else:
        fallback = f"model_error:{(answer.error or 'none').split(':')[0]}"
    if fallback:
        # The fact-checker's own claimReviewed is usually already the bare assertion: use it when it passes.
        text, source = with_media_refs(claim.claim_text, media), "original"
        reason = check_claim_text(text, media, language, pipeline)
        if reason:
            return None, reason
    return NormalizedClaim(
        claim_id=stable_id(claim.review_id, "original"), review_id=claim.review_id, quarter=claim.quarter, text=text,
        original_text=claim.claim_text, normalization=source, language=language, claim_date=claim.claim_date,
        review_url=claim.review_url, publisher_id=claim.publisher_id, rating_text=claim.rating_text, media=media,
        dropped_media=dropped,
        injection_flags=injection_flags(claim.claim_text, claim.title, article.text if article else ""),
    ), fallback


def normalize_all(
    claims: list[ClaimAppearances], articles: dict[str, Article], llm: LLMResource, pipeline: PipelineResource,
    media_store: MediaStore, log=None,
) -> tuple[list[NormalizedClaim], StageYield]:
    stats = StageYield(len(claims))
    work = prefetch(claims, lambda c: normalize_claim(c, articles.get(c.review_id), llm, pipeline, media_store),
                    llm.parallel_claims)

    def one(claim: ClaimAppearances):
        normalized, reason = work(claim)
        if normalized is None:
            return None, reason
        count(stats, f"normalization/{normalized.normalization}")
        if reason:  # kept, in the fact-checker's wording: each fallback is counted by its cause
            count(stats, f"fallback/{reason}")
        if normalized.injection_flags:
            count(stats, "injection/flagged")
        return normalized, ""

    out = map_records(STAGE, claims, one, stats, log)
    fallbacks = int(stats.extra.get("normalization/original", 0))
    if log and fallbacks * 2 > len(out):
        causes = {k.removeprefix("fallback/"): v for k, v in stats.extra.items() if k.startswith("fallback/")}
        log.warning(f"{STAGE}: {fallbacks} of {len(out)} claims kept the fact-checker's wording because the model's "
                    f"text was unusable ({causes}); the stage proves little about the model (see `veritas costs`)")
    return out, stats


normalized_claims = llm_claim_asset(
    STAGE,
    "Stage 5: the claim as a bare assertion (<= 2 sentences, 70 words) with at most 4 of its own media.",
    upstream="appearances", in_model=ClaimAppearances, out_model=NormalizedClaim, process=normalize_all,
)
