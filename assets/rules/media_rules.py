"""The rules that drop a claim's media without asking a model, shared by stage 5, ``veritas plan`` and the simulation:
icons, the fact-checker's own graphic, near-duplicates, and the verdict stamps and platform overlays that the OCR
reads on a medium. Dagster-free."""

import csv
import re
from pathlib import Path

import regex

from assets.rules.claim_text import _UNSPACED
from assets.rules.languages import canonical_language
from assets.rules.near_duplicates import near_duplicate_groups
from assets.rules.once import once
from assets.rules.overlays import PLATFORM_OVERLAYS
from schemas.records import Medium

MIN_SIDE = 120  # smaller images are icons, avatars or badges
_WORD = regex.compile(r"\p{L}[\p{L}\p{M}]*")


def preference(m: Medium) -> tuple[bool, bool]:
    """Videos before images, the post's own media before the article's copies: the first of a near-duplicate group
    stays, and the first max_media are kept."""
    return m.kind != "video", m.origin != "appearance"


def is_too_small(m: Medium) -> bool:
    return m.kind == "image" and min(m.width, m.height) < MIN_SIDE


# Words of an article image's alt text or caption that name the fact-checker's own graphic, per language (English's
# for every language): whole words, so "stampede", "timestamp" and Italian "virologo" name no graphic.
GRAPHIC_WORDS = {
    "en": ("logo", "logos", "stamp", "badge", "watermark", "ifcn", "efcsn"),
    "de": ("logo", "logos", "stempel", "siegel", "abzeichen"),
    "fr": ("logo", "logos", "tampon", "cachet", "badge", "filigrane"),
    "es": ("logo", "logos", "logotipo", "sello", "insignia"),
    "pt": ("logo", "logos", "logotipo", "logomarca", "selo", "carimbo"),
    "it": ("logo", "loghi", "logotipo", "timbro", "bollino"),
    "ar": ("شعار", "ختم", "لوغو", "لوجو"),
}
# A graphic word is also a claim's subject ("a food stamp card", "ISRO's logo", "a police badge", "شعار النازية"): it
# names the fact-checker's graphic only in a label of a few words ("PesaCheck logo", "FALSE stamp") or beside words
# of fact-checking or a fact-checker's name (registry/publishers.csv). Measured on tests/fixtures/rules (issue 48):
# of the alt texts that name the fact-checker's graphic with a graphic word, all but one are at most 4 words long or
# name the checker (Aos Fatos' "Selo não é bem assim", 5 words, is missed); every claim that uses such a word as its
# subject is longer and names none.
GRAPHIC_LABEL_WORDS = 4
FACT_CHECK_WORDS = ("fact", "check", "checks", "checked", "checker", "checkers", "fact-check", "fact-checker",
                    "fact-checkers", "factcheck", "factchecker", "faktencheck", "faktenprüfer", "faktenchecker",
                    "vérification", "vérificateur", "vérificateurs", "verificación", "verificador", "verificadores",
                    "checagem", "checado", "verificado", "verificamos", "verdict", "rating", "ifcn", "efcsn")
REGISTRY = Path(__file__).resolve().parents[2] / "registry" / "publishers.csv"


@once
def _checker_names() -> tuple[str, ...]:
    """The names and aliases of the fact-checkers of registry/publishers.csv (none when it is not there)."""
    if not REGISTRY.is_file():
        return ()
    with open(REGISTRY, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    names = {n.strip() for r in rows for n in [r.get("name") or "", *(r.get("aliases") or "").split(";")]}
    return tuple(sorted((n for n in names if len(n) >= 4), key=len, reverse=True))


@once
def _graphic_pattern(language: str) -> re.Pattern:
    words = {*GRAPHIC_WORDS["en"], *GRAPHIC_WORDS.get(canonical_language(language), ())}
    return re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, sorted(words, key=len, reverse=True))) + r")(?!\w)",
                      re.IGNORECASE)


@once
def _fact_checking_pattern() -> re.Pattern:
    words = sorted({*FACT_CHECK_WORDS, *_checker_names()}, key=len, reverse=True)
    return re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, words)) + r")(?!\w)", re.IGNORECASE)


def names_a_graphic(text: str, language: str = "") -> bool:
    """Whether an alt text or caption names the fact-checker's graphic: a graphic word (GRAPHIC_WORDS, as a whole
    word) in a label of at most GRAPHIC_LABEL_WORDS words or beside a word of fact-checking or a fact-checker's name;
    or the text is a fact-checker's stamp by itself (overlay_stamp: "Falso", "زائف", the alt text of a rating badge)."""
    if overlay_stamp(text):
        return True
    if not _graphic_pattern(language or "en").search(text):
        return False
    return len(_letters(text)) <= GRAPHIC_LABEL_WORDS or bool(_fact_checking_pattern().search(text))


def plain_drops(media: list[Medium], duplicate_distance: int, language: str = "") -> dict[str, str]:
    """Why media go without a model's say: an image too small to be more than an icon, the fact-checker's graphic
    by its alt text or caption (names_a_graphic, in the claim's ``language``: a graphic word in a label or beside a
    word of fact-checking, or a stamp by itself), or a near-duplicate of a medium
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


# words a fact-checker's stamp may carry beside its verdict phrase ("FACT CHECK: FALSE", "FAKE NEWS")
STAMP_WORDS = {"fact", "check", "checked", "factcheck", "news", "rating", "verdict", "claim", "content", "photo",
               "image", "video", "faktencheck", "verificación", "verificacion", "checagem", "verificamos", "cek",
               "fakta", "फैक्ट", "फ़ैक्ट", "चेक"}


OVERLAY_BUTTONS = {"see", "why", "learn", "more"}  # the buttons beside a platform's overlay ("See why")


# The verdict phrases a stamp may say, in the languages the label scheme has no list for (its verdict_words cover
# en, de, fr, es, pt, it, ar): the fact-checkers' ratings as the pages of tests/fixtures/factcheck_pages show them
# (Vishvas News: फर्जी; AFP Hindi: भ्रामक; Tempo: Keliru; Taiwan FactCheck Center: 錯誤, 部分錯誤), and as the writer
# of issue 48 knows them without a page to check (teyit.org's Yanlış, the Thai Anti-Fake News Center's ข่าวปลอม,
# Faktisk.no's Helt feil, the Tagalog and Indonesian words for fake and false), with the words of Meta's "False
# information" label in Hindi, Indonesian and Turkish as that writer knows them (not checked against a recording of
# the interface). A stamp is the phrase alone, give or take STAMP_WORDS: one of these inside a sentence is no stamp.
STAMP_PHRASES = {
    "hi": ("फर्जी", "फ़र्ज़ी", "भ्रामक", "गलत", "ग़लत", "झूठा", "झूठ", "गलत जानकारी", "ग़लत जानकारी"),
    "id": ("hoaks", "keliru", "palsu", "menyesatkan", "informasi salah", "disinformasi"),  # not "salah" alone: a name
    "tr": ("yanlış", "sahte", "yanıltıcı", "yanlış bilgi"),
    "th": ("ข่าวปลอม", "ข่าวบิดเบือน", "ข่าวเท็จ"),
    "zh": ("錯誤", "错误", "部分錯誤", "部分错误", "假訊息", "假消息", "不實", "謠言", "谣言"),
    "tl": ("peke", "hindi totoo", "walang basehan", "nakaliligaw"),
    "no": ("falskt", "falsk", "helt feil", "delvis feil"),
}


def _letters(text: str) -> list[str]:
    """The words of a text, casefolded: letters with their combining marks (a Devanagari vowel sign, a Thai tone
    mark), no digits."""
    return _WORD.findall(text.casefold())


@once
def _stamp_phrases() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(spaced, unspaced) stamp phrases: every language's verdict words of the label scheme and STAMP_PHRASES, and
    the platforms' overlays, as letters joined by single spaces, longest first."""
    from prompts import label_scheme

    phrases = {w for words in label_scheme()["verdict_words"].values() for w in words}
    phrases |= {w for words in STAMP_PHRASES.values() for w in words}
    phrases |= {text for _, _, text, _ in PLATFORM_OVERLAYS}
    folded = {" ".join(_letters(p)) for p in phrases} - {""}
    spaced = tuple(sorted((p for p in folded if not _UNSPACED.search(p)), key=len, reverse=True))
    unspaced = tuple(sorted((p.replace(" ", "") for p in folded if _UNSPACED.search(p)), key=len, reverse=True))
    return spaced, unspaced


_OVERLAYS = sorted({" ".join(_letters(text)) for _, _, text, _ in PLATFORM_OVERLAYS}, key=len, reverse=True)


_UNSPACED_OVERLAYS = {o.replace(" ", ""): o for o in _OVERLAYS}  # the OCR may run an overlay's words together


def _stamp_phrase(line: str) -> str:
    """The stamp phrase a line is, give or take stamp words and buttons, in any language ("FACT CHECK: FALSE",
    "FAKTENCHECK: FALSCH", "फैक्ट चेक: फर्जी", "ข่าวปลอม"), casefolded; else ''."""
    spaced, unspaced = _stamp_phrases()
    letters = _letters(line)
    joined = "".join(letters)
    if _UNSPACED.search(joined):
        return next((p for p in unspaced if p in joined and len(joined) <= len(p) + 2), "")
    rest, found = f" {' '.join(letters)} ", ""
    for phrase in spaced:
        while f" {phrase} " in rest:
            rest, found = rest.replace(f" {phrase} ", " ", 1), found or phrase
    if found and all(t in STAMP_WORDS or t in OVERLAY_BUTTONS for t in rest.split()):
        return found
    return ""


def overlay_stamp(line: str) -> str:
    """The platform overlay (overlays.PLATFORM_OVERLAYS) or fact-checker's stamp (a verdict phrase of any language:
    the label scheme's and STAMP_PHRASES) a line of text read on a medium is, give or take stamp words and the
    overlay's buttons, casefolded; else ''. "False information" on a screenshot of a Facebook post says the verdict
    though "information" is no stamp word; "FACT CHECK: FALSE" is a stamp though "fact check" is a verdict phrase of
    its own (issue 48: the first verdict phrase found on it, "fact check", left "false" over, and the medium was kept
    as in_text)."""
    rest, found = f" {' '.join(_letters(line))} ", ""
    for overlay in _OVERLAYS:
        if f" {overlay} " in rest:
            rest, found = rest.replace(f" {overlay} ", " "), found or overlay
    if found and all(t in STAMP_WORDS or t in OVERLAY_BUTTONS for t in rest.split()):
        return found
    return _UNSPACED_OVERLAYS.get("".join(_letters(line)), "") or _stamp_phrase(line)


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
