"""The rules that drop a claim's media without asking a model, shared by stage 5, ``veritas plan`` and the simulation:
icons, the fact-checker's own graphic, near-duplicates, and the verdict stamps and platform overlays that the OCR
reads on a medium. Dagster-free."""

import re

from assets.rules.claim_text import _UNSPACED
from assets.rules.languages import canonical_language
from assets.rules.near_duplicates import near_duplicate_groups
from assets.rules.once import once
from assets.rules.overlays import PLATFORM_OVERLAYS
from schemas.records import Medium

MIN_SIDE = 120  # smaller images are icons, avatars or badges


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
