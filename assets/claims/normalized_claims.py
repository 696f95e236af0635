"""Stage 5: keep the media that are part of the claim and rewrite the claim as the bare assertion."""

import hashlib
import math
import re
from pathlib import Path

from assets.once import once
from assets.common import (
    ErrorBudget,
    StageYield,
    count,
    map_records,
    stable_id,
)
from assets.claims.failures import failure_kind
from assets.claims.languages import canonical_language
from assets.claims.leaks import reported_speech_mask, reports_a_claim, says_the_verdict
from assets.claims.length import MEDIA_REF, bare_text, count_sentences, count_words
from assets.claims.media_text import OcrPool, TextCache, read_text
from assets.claims.overlays import PLATFORM_OVERLAYS
from assets.ensemble import ask, drops_flagged, injection_flags, llm_claim_asset, prefetch
from dagster_project.resources.media import MediaStore, near_duplicate_groups
from dagster_project.config import PipelineResource
from dagster_project.resources.llm import LLMResource
from prompts import label_scheme
from schemas.answers import ClaimTextAnswer, media_filter_answer
from schemas.records import Article, ClaimAppearances, Medium, NormalizedClaim

STAGE = "normalized_claims"
MIN_SIDE = 120  # smaller images are icons, avatars or badges
DUPLICATE_DISTANCE = PipelineResource.model_fields["near_duplicate_distance"].default


# Scripts written without spaces between words: a verdict phrase in them matches anywhere, not as a whole word.
_UNSPACED = re.compile(r"[\u0e00-\u0e7f\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
_PHRASE_END = re.compile(r"\s[-\u2013\u2014|]\s|[:.!?;(\[\u3002\uff01\uff1f\uff1a]")
MAX_PHRASE_WORDS = 5  # a rating or title head longer than this is an explanation, not a verdict phrase


def verdict_phrase(text: str, whole: bool = True) -> str:
    """The verdict phrase of a textual rating ("Missing context. The photo..." -> "missing context") or, with
    ``whole`` off, of a fact-check title, where only a head before ':' or ' - ' counts ("FALSE: ..." -> "false")."""
    text = " ".join(text.split())
    cut = _PHRASE_END.search(text)
    if cut is None and not whole:
        return ""
    head = (text[:cut.start()] if cut else text).strip(" \"'\u201c\u201d\u00ab\u00bb*#").casefold()
    if not re.search(r"[^\W\d_]", head) or len(head.split()) > MAX_PHRASE_WORDS:
        return ""  # no letters (a score such as "4/5"), or a sentence
    return head


def _phrase_pattern(phrases: set[str]) -> re.Pattern | None:
    if not phrases:
        return None
    alternatives = [re.escape(w) if _UNSPACED.search(w) else rf"(?<!\w){re.escape(w)}(?!\w)"
                    for w in sorted(phrases, key=len, reverse=True)]
    return re.compile("(" + "|".join(alternatives) + ")", re.IGNORECASE)


def base_language(language: str) -> str:
    """The language of a tag as one ISO 639-1 code (languages.canonical_language): without its region or script
    ("pt-BR", "es-419", "zh_Hant" -> "pt", "es", "zh"), and with babel's and ISO 639-2/3 codes and the members of a
    macrolanguage mapped to the code py3langid and the label scheme use ("nb" -> "no", "fil" -> "tl", "arb" -> "ar")."""
    return canonical_language(language)


class LeakVocabulary:
    """Words that leak a verdict, per language: the label scheme's lists (English for every language) merged with
    the textual ratings (ClaimReview alternateName) that the quarter's reviews use in that language."""

    def __init__(self, ratings: dict[str, set[str]] | None = None):
        self.ratings = {lang: set(words) for lang, words in (ratings or {}).items()}
        self._patterns: dict[str, re.Pattern | None] = {}

    @classmethod
    def from_reviews(cls, reviews) -> "LeakVocabulary":
        """From records with ``rating_text`` and ``language`` (reviews, claims)."""
        ratings: dict[str, set[str]] = {}
        for r in reviews:
            if phrase := verdict_phrase(r.rating_text or ""):
                ratings.setdefault(r.language or "", set()).add(phrase)
        return cls(ratings)

    def words(self, language: str) -> set[str]:
        """English's and the language's lists, the language looked up by its base ("pt-br" reads "pt"), and the
        ratings of the quarter's reviews in any tag of that base language."""
        scheme = label_scheme()["verdict_words"]
        base = base_language(language)
        listed = [*scheme.get("en", []), *scheme.get((language or "").casefold(), []), *scheme.get(base, [])]
        rated = set().union(*(w for lang, w in self.ratings.items() if base_language(lang) == base))
        return {w.casefold() for w in listed} | rated

    def find(self, text: str, language: str, own: tuple[str, ...] = (), positional: bool = True) -> str:
        """The first verdict word or phrase in ``text`` that says the verdict (leaks.says_the_verdict: not the
        claim's own subject, not reported speech): the language's vocabulary, then ``own`` (the claim's own rating
        and its fact-check title's verdict phrase), or ''. ``positional`` off: the first one anywhere."""
        if language not in self._patterns:
            self._patterns[language] = _phrase_pattern(self.words(language))
        masked = reported_speech_mask(text, language) if positional else text
        for pattern in (self._patterns[language], _phrase_pattern({w for w in own if w})):
            for match in pattern.finditer(masked) if pattern is not None else ():
                if not positional or says_the_verdict(masked, match.start(), match.end(), language):
                    return match.group(1)
        return ""


SCHEME_ONLY = LeakVocabulary()


def verdict_leak(text: str, language: str, leaks: LeakVocabulary | None = None, rating_text: str = "",
                 title: str = "", original: str = "", positional: bool = True) -> str:
    """The first verdict word in the text that says the verdict, or ''. Besides the vocabulary, the claim's own
    rating and the head of its fact-check title ("Old photo: ...") count; a head that the claim as reviewed
    (``original``) also says is its topic ("COVID-19: ..."), not a verdict. A verdict word that is part of what the
    claim says ("fake bank cards") or of reported speech ("Trump said it was a hoax") is no leak (assets/claims/
    leaks.py); ``positional`` off, every verdict word is (the OCR's lines, whose stamps is_stamp tells apart)."""
    head = verdict_phrase(title, whole=False)
    if head and head in original.casefold():
        head = ""
    return (leaks or SCHEME_ONLY).find(text, language or "en", (verdict_phrase(rating_text), head), positional)


# A rewrite is in another language when py3langid gives that one at least LANGUAGE_SURE and the claim's own language
# less than LANGUAGE_ABSENT (its probabilities spread over related languages, so a plain English sentence may get
# 0.43). Measured: no false change on 300 AVeriTeC dev claims (en) and 400 Fact Check Tools claims (ar); 290 of the
# 300 English claims are caught when the claim's language is es or de.
LANGUAGE_SURE = 0.3
LANGUAGE_ABSENT = 0.05


@once
def _language_identifier():
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def changed_language(text: str, language: str) -> str:
    """The language a rewrite is in when it is surely not the claim's (``language``), else ''. Only a confident
    answer counts: names, numbers and short phrases score low in every language and pass."""
    expected = base_language(language)
    bare = bare_text(text)
    if not expected or not bare:
        return ""
    ranked = dict(_language_identifier().rank(bare))
    top = max(ranked, key=ranked.get)
    if top != expected and ranked[top] >= LANGUAGE_SURE and ranked.get(expected, 0.0) < LANGUAGE_ABSENT:
        return top
    return ""


def check_claim_text(text: str, media: list[Medium], language: str, pipeline: PipelineResource,
                     leaks: LeakVocabulary | None = None, rating_text: str = "", title: str = "",
                     original: str = "") -> str:
    """Validation of a normalized claim; returns the failure reason or ''. Verdict words come from ``leaks``
    (the label scheme's alone when None), the claim's own ``rating_text`` and its fact-check ``title``; a text
    other than ``original`` (a model's rewrite) must stay in the claim's ``language``."""
    if not text.strip():
        return "empty"
    if count_words(text) > pipeline.max_words:
        return "too_many_words"
    if count_sentences(text, language) > pipeline.max_sentences:
        return "too_many_sentences"
    leak = verdict_leak(MEDIA_REF.sub(" ", text), language, leaks, rating_text, title, original)
    if leak:
        return "verdict_leak"
    if bare_text(text) != bare_text(original) and changed_language(text, language):
        return "language_changed"
    if reports_a_claim(MEDIA_REF.sub(" ", text), language):  # "Posts claim X" is true as written: not the claim
        return "reports_a_claim"
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


def preference(m: Medium) -> tuple[bool, bool]:
    """Videos before images, the post's own media before the article's copies: the first of a near-duplicate group
    stays, and the first max_media are kept."""
    return m.kind != "video", m.origin != "appearance"


def is_too_small(m: Medium) -> bool:
    return m.kind == "image" and min(m.width, m.height) < MIN_SIDE


# Words of an article image's alt text or caption that name the fact-checker's own graphic, per language (English's
# for every language): whole words, so "stampede", "timestamp" and Italian "virologo" name no graphic.
GRAPHIC_WORDS = {
    "en": ("logo", "logos", "stamp", "badge", "watermark"),
    "de": ("logo", "logos", "stempel", "siegel", "abzeichen"),
    "fr": ("logo", "logos", "tampon", "cachet", "badge", "filigrane"),
    "es": ("logo", "logos", "logotipo", "sello", "insignia"),
    "pt": ("logo", "logos", "logotipo", "logomarca", "selo", "carimbo"),
    "it": ("logo", "loghi", "logotipo", "timbro", "bollino"),
    "ar": ("شعار", "ختم", "لوغو", "لوجو"),
}


@once
def _graphic_pattern(language: str) -> re.Pattern:
    words = {*GRAPHIC_WORDS["en"], *GRAPHIC_WORDS.get(canonical_language(language), ())}
    return re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, sorted(words, key=len, reverse=True))) + r")(?!\w)",
                      re.IGNORECASE)


def names_a_graphic(text: str, language: str = "") -> bool:
    """Whether an alt text or caption names the fact-checker's graphic (GRAPHIC_WORDS, as whole words)."""
    return bool(_graphic_pattern(language or "en").search(text))


def plain_drops(media: list[Medium], duplicate_distance: int, language: str = "") -> dict[str, str]:
    """Why media go without a model's say: an image too small to be more than an icon, the fact-checker's graphic
    by its alt text or caption (names_a_graphic, in the claim's ``language``), or a near-duplicate of a medium
    preferred to it (the group's verdict is its first medium's). Stage 5 asks the model about none of these, and
    ``veritas plan`` counts the same."""
    out: dict[str, str] = {}
    for m in media:
        if is_too_small(m):
            out[m.medium_id] = "too_small"
        elif m.origin == "article" and names_a_graphic(m.alt + " " + m.caption, language):
            out[m.medium_id] = "fact_checker_graphic"
    rest = sorted((m for m in media if m.medium_id not in out), key=preference)
    for group in near_duplicate_groups([(m.medium_id, m.phash) for m in rest if m.phash], duplicate_distance):
        out.update((mid, "near_duplicate") for mid in group[1:])
    return out


def select_media(claim: ClaimAppearances, keep: dict[str, str], pipeline: PipelineResource,
                 language: str | None = None) -> tuple[list[Medium], list[str]]:
    """Apply the plain drops (plain_drops, in ``language``, the claim's by default) and the filter's verdicts, keep at
    most max_media, videos first."""
    plain = plain_drops(claim.media, pipeline.near_duplicate_distance, claim.language if language is None else language)
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
    dropped += [f"{m.medium_id}:over_limit" for m in candidates[pipeline.max_media :]]
    return candidates[: pipeline.max_media], dropped


# words a fact-checker's stamp may carry beside its verdict phrase ("FACT CHECK: FALSE", "FAKE NEWS")
STAMP_WORDS = {"fact", "check", "checked", "factcheck", "news", "rating", "verdict", "claim", "content", "photo",
               "image", "video"}


OVERLAY_BUTTONS = {"see", "why", "learn", "more"}  # the buttons beside a platform's overlay ("See why")


def _letters(text: str) -> list[str]:
    return re.findall(r"[^\W\d_]+", text.casefold())


_OVERLAYS = sorted({" ".join(_letters(text)) for _, _, text, _ in PLATFORM_OVERLAYS}, key=len, reverse=True)
_UNSPACED_OVERLAYS = {o.replace(" ", ""): o for o in _OVERLAYS}  # the OCR may run an overlay's words together


def overlay_stamp(line: str) -> str:
    """The platform overlay (overlays.PLATFORM_OVERLAYS) a line of text read on a medium is, give or take stamp words
    and the overlay's buttons, casefolded; else ''. "False information" on a screenshot of a Facebook post says the
    verdict though "information" is no stamp word."""
    rest, found = f" {' '.join(_letters(line))} ", ""
    for overlay in _OVERLAYS:
        if f" {overlay} " in rest:
            rest, found = rest.replace(f" {overlay} ", " "), found or overlay
    if found and all(t in STAMP_WORDS or t in OVERLAY_BUTTONS for t in rest.split()):
        return found
    return _UNSPACED_OVERLAYS.get("".join(_letters(line)), "")


def is_stamp(line: str, word: str) -> bool:
    """Whether a line of text read on a medium is a verdict stamp: the verdict phrase alone, give or take a stamp
    word, not a sentence that uses it ("THIS IS FAKE" on a meme is the post's own words)."""
    phrase = word.casefold()
    if _UNSPACED.search(phrase):
        letters = "".join(re.findall(r"[^\W\d_]", line))
        return len(letters) <= len(phrase) + 2
    tokens = re.findall(r"[^\W\d_]+", line.casefold())
    rest = " ".join(tokens).replace(phrase, " ", 1).split()
    return len(rest) < len(tokens) and all(t in STAMP_WORDS for t in rest)


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
    medium), asked of the members in their filter_order until one answers; None when none did. Not passed on when the
    endpoint could not be reached (the breaker and the stage's check stop a dead one): asking the others in turn
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
    claim: ClaimAppearances, article: Article | None, llm: LLMResource, pipeline: PipelineResource, store: MediaStore,
    leaks: LeakVocabulary | None = None, ocr: TextCache | None = None,
) -> tuple[NormalizedClaim | None, str, list[str]]:
    """The normalized claim and '', or the claim kept in the fact-checker's wording and why the model's text was not
    used (``model_error:<kind>``, ``model_text:<check>``), or None and the drop reason; and the media dropped on the
    way ("<id>:<reason>")."""
    flags = injection_flags(claim.claim_text, claim.title, article.text if article else "")
    if flags and drops_flagged(pipeline):
        return None, "injection_flagged", []
    member = llm.member_names()[0]
    language = claim.language or (article.language if article else "")
    verdicts = filter_media(claim, language, llm, store, ocr, pipeline.near_duplicate_distance, pipeline.max_media)
    failed = sorted({v.split(":")[0] for v in verdicts.values() if v.split(":")[0] in MEDIA_CHECK_FAILED})
    if failed:  # without the medium the claim would change (its text may say "this photo"), and unchecked it may leak
        return None, f"media_check_failed:{failed[0]}", [f"{mid}:{v}" for mid, v in verdicts.items()
                                                         if v.split(":")[0] in MEDIA_CHECK_FAILED]
    media, dropped = select_media(claim, verdicts, pipeline, language)
    title = claim.title or (article.title if article else "")
    answer = ask(
        llm, member, "normalize_claim", ClaimTextAnswer, stage=STAGE, media=media, media_store=store,
        claim=claim.claim_text, title=title, language=language, claim_date=str(claim.claim_date or ""),
        max_words=pipeline.max_words, max_sentences=pipeline.max_sentences,
    )

    def problem(text: str) -> str:
        return check_claim_text(text, media, language, pipeline, leaks, claim.rating_text, title, claim.claim_text)

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
    claims: list[ClaimAppearances], articles: dict[str, Article], llm: LLMResource, pipeline: PipelineResource,
    media_store: MediaStore, log=None,
) -> tuple[list[NormalizedClaim], StageYield]:
    stats = StageYield(len(claims))
    drops_flagged(pipeline)  # an unknown injection policy stops the stage before any call
    ocr = pool = None
    if any(c.media for c in claims):
        pool = OcrPool()  # its workers load the OCR up front: a missing OCR stops the stage here, not claim by claim
        # beside the LLM cache: a re-run, or an image seen in an earlier quarter, is not read again
        ocr = TextCache(Path(llm.cache_path).with_name("ocr_cache.sqlite"), reader=pool.read_text)
    leaks = LeakVocabulary.from_reviews(claims)  # the quarter's own verdict words, per language
    stats.extra["leak_vocabulary/ratings"] = sum(len(w) for w in leaks.ratings.values())
    # max_claims (a demo on a slow model): the quarter's first claims in the upstream table's order; the rest are
    # dropped before any model call, and counted
    over = {id(c) for c in claims[pipeline.max_claims:]} if pipeline.max_claims else set()
    work = prefetch(claims, lambda c: (None, "over_max_claims", []) if id(c) in over else
                    normalize_claim(c, articles.get(c.review_id), llm, pipeline, media_store, leaks, ocr),
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
        out = map_records(STAGE, claims, one, stats, log, ErrorBudget.for_stage(pipeline, STAGE, len(claims), log))
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


normalized_claims = llm_claim_asset(
    STAGE,
    "Stage 5: the claim as a bare assertion (<= 2 sentences, 70 words) with at most 4 of its own media.",
    upstream="appearances", in_model=ClaimAppearances, out_model=NormalizedClaim, process=normalize_all,
)
