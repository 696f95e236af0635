"""The rules a claim's text must meet, shared by stages 5 (normalizing) and 7 (rewriting) and the release: its length
and sentences, no word that says the fact-checker's verdict (the label scheme's vocabulary and the quarter's own
ratings), the claim's own language, no report about a claim, and a reference for every kept medium. Dagster-free."""

import re
from typing import Protocol

from assets.rules.languages import canonical_language, written_forms
from assets.rules.leaks import reported_speech_mask, reports_a_claim, says_the_verdict
from assets.rules.length import MEDIA_REF, bare_text, count_sentences, count_words
from assets.rules.once import once
from prompts import label_scheme
from schemas.records import Medium


class TextLimits(Protocol):
    """The settings a claim's text is checked against (stage 5's and stage 7's)."""

    max_words: int
    max_sentences: int


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
    # whole words, and not the first or last part of a hyphenated compound ("False-flag attack", "non-fake")
    alternatives = [re.escape(w) if _UNSPACED.search(w) else rf"(?<!\w)(?<!\w-){re.escape(w)}(?!\w|-\w)"
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
    answer counts: names, numbers and short phrases score low in every language and pass. Every written form of the
    claim's language counts as that language (languages.written_forms: a Nynorsk rewrite of a claim tagged "nn", a
    Cantonese one of "yue"); a language the identifier does not know, nor any near one, is not judged."""
    bare = bare_text(text)
    identifier = _language_identifier()
    expected = written_forms(language) & set(identifier.nb_classes)
    if not expected or not bare:
        return ""
    ranked = dict(identifier.rank(bare))
    top = max(ranked, key=ranked.get)
    if top not in expected and ranked[top] >= LANGUAGE_SURE and sum(ranked.get(c, 0.0) for c in expected) < \
            LANGUAGE_ABSENT:
        return top
    return ""


def check_claim_text(text: str, media: list[Medium], language: str, limits: TextLimits,
                     leaks: LeakVocabulary | None = None, rating_text: str = "", title: str = "",
                     original: str = "") -> str:
    """Validation of a normalized claim; returns the failure reason or ''. Verdict words come from ``leaks``
    (the label scheme's alone when None), the claim's own ``rating_text`` and its fact-check ``title``; a text
    other than ``original`` (a model's rewrite) must stay in the claim's ``language``."""
    if not text.strip():
        return "empty"
    if count_words(text) > limits.max_words:
        return "too_many_words"
    if count_sentences(text, language) > limits.max_sentences:
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
