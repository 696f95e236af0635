"""Stage 5: keep the media that are part of the claim and rewrite the claim as the bare assertion."""

import hashlib
import math
from pathlib import Path

import dagster as dg

from assets.ensemble.asking import ask
from assets.ensemble.injection import drops_flagged, injection_flags
from assets.ensemble.llm_stage import claim_stage_asset, run_claim_stage
from assets.ensemble.rounds import prefetch
from assets.rules.claim_text import (
    LeakVocabulary,
    check_claim_text,
    verdict_leak,
    with_media_refs,
)
from assets.rules.failed_answers import failure_kind
from assets.rules.ids import stable_id
from assets.rules.media_rules import is_stamp, overlay_stamp, plain_drops, preference
from assets.rules.media_text import OcrPool, TextCache, read_text
from assets.stage.record_errors import ErrorBudget, map_records
from assets.stage.tables import StageYield, count
from dagster_project.resources.llm import LLMResource
from dagster_project.resources.media import MediaStore
from dagster_project.resources.store import StoreResource
from dagster_project.stage_settings import ClaimRules, ErrorBudgetSettings, NormalizeSettings
from schemas.answers import ClaimTextAnswer, media_filter_answer
from schemas.records import Article, ClaimAppearances, Medium, NormalizedClaim

STAGE = "normalized_claims"
DUPLICATE_DISTANCE = ClaimRules.model_fields["near_duplicate_distance"].default


def select_media(claim: ClaimAppearances, keep: dict[str, str], normalizing: NormalizeSettings,
                 claim_rules: ClaimRules, language: str | None = None) -> tuple[list[Medium], list[str]]:
    """Apply the plain drops (plain_drops, in ``language``, the claim's by default) and the filter's verdicts, keep at
    most max_media, videos first."""
    plain = plain_drops(claim.media, claim_rules.near_duplicate_distance,
                        claim.language if language is None else language)
    dropped, candidates = [], []
    for m in claim.media:
        reason = plain.get(m.medium_id) or keep.get(m.medium_id, "")
        if reason.startswith(KEPT):
            dropped.append(f"{m.medium_id}:{reason}")  # counted, not dropped
            reason = ""
        if reason:
            dropped.append(f"{m.medium_id}:{reason}")
        else:
            candidates.append(m)
    candidates.sort(key=preference)
    dropped += [f"{m.medium_id}:over_limit" for m in candidates[normalizing.max_media :]]
    return candidates[: normalizing.max_media], dropped


def media_verdict_text(medium: Medium, store: MediaStore, language: str, rating_text: str,
                       ocr: TextCache | None = None) -> tuple[str, str]:
    """What the OCR reads on an image or on any frame of a video: ("stamp", word) when a line is a verdict stamp
    (see is_stamp), ("in_text", word) when a verdict word only occurs inside longer text (a screenshot of the
    circulating post, in its own words), else ("", ""). Only the label scheme's words and the claim's own rating
    count. With ``ocr``, text read before (this run or an earlier one) comes from that cache."""
    reader = ocr.read_text if ocr is not None else read_text
    in_text = ""
    for path in [medium.path] if medium.kind == "image" else medium.frame_paths:
        for line in reader(store.read(path)).splitlines():
            if overlay := overlay_stamp(line):  # a platform's own label on a screenshot of the post
                return "stamp", overlay
            if word := verdict_leak(line, language, rating_text=rating_text, positional=False):
                if is_stamp(line, word):
                    return "stamp", word
                in_text = in_text or word
    return ("in_text", in_text) if in_text else ("", "")


# A question about a medium that failed: the claim is dropped with this reason, never kept without the medium (its
# text may say "this photo"), nor with the medium unchecked.
MEDIA_CHECK_FAILED = ("filter_failed", "ocr_failed")
OCR_ATTEMPTS = 2  # an unreadable file is read again once before the claim goes


def read_verdict_text(m: Medium, store: MediaStore, language: str, rating_text: str,
                      ocr: TextCache | None) -> tuple[str, str] | str:
    """media_verdict_text, read again on an unreadable file; after OCR_ATTEMPTS the failure as ``ocr_failed:<Type>``."""
    for attempt in range(OCR_ATTEMPTS):
        try:
            return media_verdict_text(m, store, language, rating_text, ocr)
        except (OSError, ValueError) as err:  # unreadable file: never kept unchecked
            failure = f"ocr_failed:{type(err).__name__}"
    return failure


MEDIA_PER_QUESTION = 8  # media the filter asks about in one question (a video counts once, with its frames)


def filter_order(llm: LLMResource, review_id: str, media_ids: list[str] = ()) -> list[str]:
    """The ensemble members in the order they are asked about media of a claim (its review): its first asker, then
    the members a failed answer goes to. Drawn by weighted rendezvous hashing of the review id, the media's ids and
    each member's name, each member weighted by its max_parallel slots, so the media filter's questions spread over
    the members at their rates (the writer of stage 5 does not answer them all), and who asks never depends on timing:
    a re-run asks the same member the same question (its cache key names the member) and hits the cache.

    Members that see images come first: a member without vision judges a medium from its alt text, caption and URL
    alone, so it is asked only once every member with vision has failed (or where none has it)."""
    media_key = "\0".join(sorted(media_ids))

    def draw(name: str) -> float:
        digest = hashlib.sha256(f"media_filter\0{name}\0{review_id}\0{media_key}".encode()).digest()
        unit = (int.from_bytes(digest[:8], "big") + 0.5) / 2**64  # uniform in (0, 1)
        return llm.member(name).max_parallel / -math.log(unit)

    return sorted(llm.member_names(), key=lambda name: (llm.is_vision(name), draw(name)), reverse=True)


def filter_media(claim: ClaimAppearances, language: str, llm: LLMResource, store: MediaStore,
                 ocr: TextCache | None = None, duplicate_distance: int = DUPLICATE_DISTANCE,
                 max_media: int | None = None) -> dict[str, str]:
    """medium id -> why it goes, for the media that pass plain_drops: the model's reason, or ``verdict_stamp`` when
    the OCR reads a verdict stamp on a medium the model kept. The model is asked first, about up to
    MEDIA_PER_QUESTION media in one question (ask_filter); the OCR then reads only the media the model keeps, in
    select_media's order of preference, until max_media are kept (the rest go as over_limit, unread): a medium the
    model drops cannot leak, so reading it would be wasted (on the simulated quarter the model drops about half of
    what the OCR read, the publishers' header photos). A failed question (every member in turn) is ``filter_failed``
    for the media it asked about, a file unreadable twice ``ocr_failed:<Type>``: either drops the claim (see
    normalize_claim), and nothing more of it is read or asked. A kept medium whose text uses a verdict word in a
    sentence stays, noted as ``kept:verdict_word_in_text`` (``kept:verdict_word_seen_by_vision`` when the filtering
    member saw it)."""
    waves = filter_waves(claim.media, plain_drops(claim.media, duplicate_distance, language))
    limit = sum(map(len, waves)) if max_media is None else max_media
    verdicts: dict[str, str] = {}
    kept = 0
    for wave in waves:
        if kept >= limit:
            break
        member, answer = ask_filter(claim, wave, llm, store)
        if answer is None:
            return {**verdicts, **{m.medium_id: "filter_failed" for m in wave}}  # the claim goes
        for i, m in enumerate(wave, 1):
            if kept >= limit:
                break
            verdict = answer[f"medium_{i}"]
            if verdict["keep"] == "no":
                verdicts[m.medium_id] = verdict["reason"]
                continue
            found = read_verdict_text(m, store, language, claim.rating_text, ocr)
            if isinstance(found, str):
                verdicts[m.medium_id] = found
                return verdicts  # the claim goes
            if found[0] == "stamp":
                verdicts[m.medium_id] = "verdict_stamp"
                continue
            if found[0] == "in_text":
                verdicts[m.medium_id] = f"{KEPT}verdict_word_{'seen_by_vision' if llm.is_vision(member) else 'in_text'}"
            kept += 1
    return verdicts


def filter_waves(media: list[Medium], plain: dict[str, str]) -> list[list[Medium]]:
    """The media filter's questions about a claim's media: those no plain rule drops (``plain``, from plain_drops), in
    select_media's order of preference, MEDIA_PER_QUESTION to a question."""
    pending = sorted((m for m in media if m.medium_id not in plain), key=preference)
    return [pending[at:at + MEDIA_PER_QUESTION] for at in range(0, len(pending), MEDIA_PER_QUESTION)]


def filter_candidates(media: list[Medium]) -> list[dict]:
    """What prompts/media_filter.j2 lists of each medium asked about."""
    return [{"kind": m.kind, "alt": m.alt, "caption": m.caption, "origin": m.origin, "source": m.source_url}
            for m in media]


def ask_filter(claim: ClaimAppearances, media: list[Medium], llm: LLMResource,
               store: MediaStore) -> tuple[str, dict | None]:
    """(member, answer) of the media filter's one question about ``media`` (media_filter_answer: a verdict per
    medium), asked of the members in their filter_order until one answers; None when none did. A refusal (a provider's
    content-policy 400 included: one provider refuses what another rates) goes to the next member. Not passed on when
    the endpoint could not be reached (the breaker and the stage's check stop a dead one): asking the others in turn
    tripled the wait."""
    member = ""
    for member in filter_order(llm, claim.review_id, [m.medium_id for m in media]):
        answer = ask(llm, member, "media_filter", media_filter_answer(len(media)), stage=STAGE, media=media,
                     media_store=store, claim=claim.claim_text, candidates=filter_candidates(media))
        if answer.parsed is not None:
            return member, answer.parsed
        if failure_kind(answer.error) == "transport":
            break
    return member, None


KEPT = "kept:"  # a note on a medium that stays, beside the drop reasons of filter_media


def normalize_claim(
    claim: ClaimAppearances, article: Article | None, llm: LLMResource, normalizing: NormalizeSettings,
    claim_rules: ClaimRules, store: MediaStore, leaks: LeakVocabulary | None = None, ocr: TextCache | None = None,
) -> tuple[NormalizedClaim | None, str, list[str]]:
    """The normalized claim and '', or the claim kept in the fact-checker's wording and why the model's text was not
    used (``model_error:<kind>``, ``model_text:<check>``), or None and the drop reason; and the media dropped on the
    way ("<id>:<reason>")."""
    flags = injection_flags(claim.claim_text, claim.title, article.text if article else "")
    if flags and drops_flagged(claim_rules):
        return None, "injection_flagged", []
    member = llm.member_names()[0]
    language = claim.language or (article.language if article else "")
    verdicts = filter_media(claim, language, llm, store, ocr, claim_rules.near_duplicate_distance,
                            normalizing.max_media)
    failed = sorted({v.split(":")[0] for v in verdicts.values() if v.split(":")[0] in MEDIA_CHECK_FAILED})
    if failed:  # without the medium the claim would change (its text may say "this photo"), and unchecked it may leak
        return None, f"media_check_failed:{failed[0]}", [f"{mid}:{v}" for mid, v in verdicts.items()
                                                         if v.split(":")[0] in MEDIA_CHECK_FAILED]
    media, dropped = select_media(claim, verdicts, normalizing, claim_rules, language)
    title = claim.title or (article.title if article else "")
    answer = ask(
        llm, member, "normalize_claim", ClaimTextAnswer, stage=STAGE, media=media, media_store=store,
        claim=claim.claim_text, title=title, language=language, claim_date=str(claim.claim_date or ""),
        max_words=claim_rules.max_words, max_sentences=claim_rules.max_sentences,
    )

    def problem(text: str) -> str:
        return check_claim_text(text, media, language, claim_rules, leaks, claim.rating_text, title, claim.claim_text)

    text, source, fallback = "", "llm", ""
    if answer.parsed:
        text = with_media_refs(answer.parsed["claim"], media)
        rejected = problem(text)
        fallback = f"model_text:{rejected}" if rejected else ""
    else:
        fallback = f"model_error:{(answer.error or 'none').split(':')[0]}"
    if fallback:
        # The fact-checker's own claimReviewed is usually already the bare assertion: use it when it passes.
        text, source = with_media_refs(claim.claim_text, media), "original"
        reason = problem(text)
        if reason:
            return None, reason, dropped
    return NormalizedClaim(
        claim_id=stable_id(claim.review_id, "original"), review_id=claim.review_id, quarter=claim.quarter, text=text,
        original_text=claim.claim_text, normalization=source, language=language, claim_date=claim.claim_date,
        review_url=claim.review_url, publisher_id=claim.publisher_id, rating_text=claim.rating_text, media=media,
        dropped_media=[d for d in dropped if not d.split(":", 1)[1].startswith(KEPT)], injection_flags=flags,
    ), fallback, dropped


def normalize_all(
    claims: list[ClaimAppearances], articles: dict[str, Article], llm: LLMResource, normalizing: NormalizeSettings,
    claim_rules: ClaimRules, error_budget: ErrorBudgetSettings, media_store: MediaStore, log=None,
) -> tuple[list[NormalizedClaim], StageYield]:
    stats = StageYield(len(claims))
    drops_flagged(claim_rules)  # an unknown injection policy stops the stage before any call
    ocr = pool = None
    if any(c.media for c in claims):
        pool = OcrPool()  # its workers load the OCR up front: a missing OCR stops the stage here, not claim by claim
        # beside the LLM cache: a re-run, or an image seen in an earlier quarter, is not read again
        ocr = TextCache(Path(llm.cache_path).with_name("ocr_cache.sqlite"), reader=pool.read_text)
    leaks = LeakVocabulary.from_reviews(claims)  # the quarter's own verdict words, per language
    stats.extra["leak_vocabulary/ratings"] = sum(len(w) for w in leaks.ratings.values())
    # max_claims (a demo on a slow model): the quarter's first claims in the upstream table's order; the rest are
    # dropped before any model call, and counted
    over = {id(c) for c in claims[normalizing.max_claims:]} if normalizing.max_claims else set()
    work = prefetch(claims, lambda c: (None, "over_max_claims", []) if id(c) in over else
                    normalize_claim(c, articles.get(c.review_id), llm, normalizing, claim_rules, media_store, leaks,
                                    ocr),
                    llm.parallel_claims, log, STAGE)

    def one(claim: ClaimAppearances):
        normalized, reason, dropped = work(claim)
        for entry in dropped:
            note = entry.split(":", 1)[1]
            count(stats, f"media_kept/{note.removeprefix(KEPT)}" if note.startswith(KEPT) else
                  f"media_dropped/{note.split(':')[0]}")
        if normalized is None:
            return None, reason
        count(stats, f"normalization/{normalized.normalization}")
        if reason:  # kept, in the fact-checker's wording: each fallback is counted by its cause
            count(stats, f"fallback/{reason}")
        if normalized.injection_flags:
            count(stats, "injection/flagged")
        return normalized, ""

    try:
        out = map_records(STAGE, claims, one, stats, log, ErrorBudget.for_stage(error_budget, STAGE, len(claims), log))
    finally:
        if ocr is not None:
            ocr.close()
            pool.close()
    if ocr is not None:
        stats.extra.update({"ocr/images_read": ocr.misses, "ocr/cache_hits": ocr.hits, "ocr/phash_hits": ocr.phash_hits,
                            "ocr/workers": pool.workers})
    fallbacks = int(stats.extra.get("normalization/original", 0))
    if log and fallbacks * 2 > len(out):
        causes = {k.removeprefix("fallback/"): v for k, v in stats.extra.items() if k.startswith("fallback/")}
        log.warning(f"{STAGE}: {fallbacks} of {len(out)} claims kept the fact-checker's wording because the model's "
                    f"text was unusable ({causes}); the stage proves little about the model (see `veritas costs`)")
    return out, stats


@claim_stage_asset(STAGE, "Stage 5: the claim as a bare assertion (<= 2 sentences, 70 words) with at most 4 of its own "
                   "media.", upstream="appearances")
def normalized_claims(
    context: dg.AssetExecutionContext, normalizing: NormalizeSettings, claim_rules: ClaimRules,
    error_budget: ErrorBudgetSettings, store: StoreResource, llm: LLMResource,
) -> dg.MaterializeResult:
    return run_claim_stage(context, store, llm, STAGE, "appearances", ClaimAppearances, NormalizedClaim,
                           lambda claims, articles, media_store, log: normalize_all(
                               claims, articles, llm, normalizing, claim_rules, error_budget, media_store, log))
