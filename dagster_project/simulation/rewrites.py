"""The simulated writer's rewrites of a planted claim, one per style, so that stage 7's checker and the release's
shortcut audit have both kinds of rewrite to tell apart (issue 33):

- ``negation``: a template that denies the claim ("There is no evidence that ..."), the tell a word rule catches;
- ``correction``: correction phrasing over the minimal edit ("In reality, ..."), no negation or hedge word: the tell a
  text classifier catches and a word rule does not;
- ``minimal``: the claim with one false detail swapped for another (a number or a year changed; a name, or in a script
  without case a content word, replaced by one the quarter's claims in that language use), in its own words;
- ``paraphrase``: the minimal edit with its sentences or clauses reordered, or one word reworded.

Deterministic from the seed and the claim; nothing here draws from the quarter's own random generator, so the feed
and the WARC stay what they were.
"""

import hashlib
import random
import re

from assets.rules.claim_text import verdict_leak
from assets.rules.length import count_sentences, count_words
from prompts import label_scheme

STYLES = ("negation", "correction", "minimal", "paraphrase")
TEMPLATES = ("negation", "correction")  # the styles that add words of their own to the claim
MAX_WORDS, MAX_SENTENCES = 70, 2  # stage 5's and stage 7's limits (stages.max_words, stages.max_sentences)

NEGATION = {"en": "There is no evidence that {claim}", "ar": "لا يوجد دليل على أن {claim}",
            "de": "Es gibt keinen Beleg dafür, dass {claim}", "fr": "Rien ne prouve que {claim}",
            "es": "No hay pruebas de que {claim}", "pt": "Não há provas de que {claim}",
            "it": "Non ci sono prove che {claim}"}
CORRECTION = {"en": ("In reality, {claim}", "Actually, {claim}"), "ar": ("في الواقع، {claim}", "الحقيقة أن {claim}"),
              "de": ("Tatsächlich gilt: {claim}",), "fr": ("En réalité, {claim}",), "es": ("En realidad, {claim}",),
              "pt": ("Na verdade, {claim}",), "it": ("In realtà, {claim}",)}
LOWERED = {"en", "fr", "es", "pt", "it"}  # a template's claim continues its sentence: a lower-case word stays lower

MEDIA_REF = re.compile(r"<(?:image|video):\d+>")
LEADING_REFS = re.compile(r"^((?:<(?:image|video):\d+>\s*)+)")
NUMBER = re.compile(r"(?<![\w\-./:<])(\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w\-/:>])")
WORD = re.compile(r"(?<![\w<:])[^\W\d_](?:[^\W\d_]|[\u064b-\u065f\u0670])*(?![\w>])")  # Arabic marks inside
ARABIC = re.compile(r"[\u0600-\u06ff]")
# words a swap never takes or gives: function words, negations and hedges (a minimal edit adds none)
STOP = {
    "en": {"i", "a", "an", "the", "this", "that", "these", "those", "there", "it", "he", "she", "we", "they", "you",
           "no", "not", "never", "none", "nor", "in", "on", "at", "of", "for", "and", "but", "or", "if", "as", "by",
           "mr", "mrs", "ms", "dr", "st", "sen", "rep", "gov", "gen", "col", "prof", "jr", "sr", "may", "might",
           "could", "would", "should", "allegedly", "reportedly", "claims", "says", "said", "because", "about",
           "which", "where", "while", "their", "there", "after", "before", "being", "during", "without"},
    "ar": {"الذي", "التي", "الذين", "اللذين", "هناك", "عندما", "بينما", "حيث", "ليست", "يوجد", "توجد", "بعض", "جميع",
           "ربما", "قد", "لقد", "كانت", "يكون", "تكون", "أنها", "إنها", "أنه", "إنه", "حول", "خلال", "بسبب", "عبر",
           "وهذا", "وهذه", "هذا", "هذه", "ذلك", "تلك", "لكن", "ولكن", "أيضا", "حتى", "منذ"},
}
NEGATIONS = {"en": {"no", "not", "never", "none", "nothing", "nobody"}, "ar": {"لا", "ليس", "ليست", "غير", "لم", "لن"}}
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
FUNCTION_START = {"a", "an", "the", "this", "these", "those", "there", "it", "its", "several", "many", "some", "all",
                  "every", "one", "two", "three", "people", "children", "photo", "photos", "picture", "pictures",
                  "image", "images", "video", "videos", "footage", "viral", "old", "new", "former", "someone"}
# one light rewording per paraphrase (first in the list that the text holds, as a whole word)
SYNONYMS = {
    "en": [("shows", "depicts"), ("show", "depict"), ("showing", "depicting"), ("photo", "picture"),
           ("photograph", "picture"), ("image", "picture"), ("photos", "pictures"), ("images", "pictures"),
           ("video", "clip"), ("videos", "clips"), ("said", "stated"), ("says", "states"), ("announced", "declared"),
           ("children", "kids"), ("government", "administration"), ("died", "passed away"), ("large", "big"),
           ("recently", "lately"), ("received", "got"), ("bought", "purchased"), ("started", "began"),
           ("claimed", "asserted"), ("many", "numerous"), ("money", "funds"), ("country", "nation"),
           ("built", "constructed"), ("banned", "prohibited"), ("allowed", "permitted"), ("showed", "displayed"),
           ("people", "individuals"), ("biggest", "largest"), ("largest", "biggest"), ("only", "just"),
           ("gave", "handed"), ("woman", "lady"), ("picture", "photo"), ("pictures", "photos"), ("clip", "video"),
           ("killed", "slain"), ("help", "aid"), ("kids", "children")],
    "ar": [("الصورة", "اللقطة"), ("صورة", "لقطة"), ("الفيديو", "المقطع"), ("يظهر", "يبين"), ("يُظهر", "يبيّن"),
           ("تظهر", "تبين"), ("تُظهر", "تبيّن"), ("قال", "صرح"), ("أعلن", "صرح"), ("بعد", "عقب"), ("خلال", "أثناء"),
           ("بسبب", "جراء"), ("تم", "جرى"), ("أشخاص", "أفراد"), ("كبير", "ضخم"), ("كبيرة", "ضخمة"),
           ("منشور", "تدوينة"), ("المقطع", "الفيديو")],
}
PREPOSITION = {"en": re.compile(r",? (?=(?:in|on|at|during|since|from|after|before) )"),
               "ar": re.compile(r"،? (?=(?:في|خلال|بعد|قبل|منذ|أثناء|عقب|عند) )")}


def _rng(*parts) -> random.Random:
    return random.Random(int(hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:16], 16))


def script_language(claim: str, language: str) -> str:
    """The language a rewrite of ``claim`` is written in: Arabic when most of its letters are (some records tagged en
    hold Arabic text), else its tag when the templates know it, else English."""
    letters = [c for c in claim if c.isalpha()]
    if letters and sum(bool(ARABIC.match(c)) for c in letters) > len(letters) / 2:
        return "ar"
    return language if language in NEGATION else "en"


def _cased(word: str) -> bool:
    return word.lower() != word.upper()


def _sentence_start(text: str, at: int) -> bool:
    before = MEDIA_REF.sub("", text[:at]).rstrip()
    return not before or before[-1] in ".!?؟:"


def _avoided() -> set[str]:
    scheme = label_scheme()
    return {w.casefold() for words in scheme["verdict_words"].values() for w in words}


def _swappable(text: str, language: str) -> dict[str, list[re.Match]]:
    """The words a swap may change: "names" (a capitalised word inside a sentence) in a cased script, "words"
    (content words: lower-case and six letters or more in a cased script, five or more in a script without case)."""
    stop = STOP.get(language, set()) | NEGATIONS.get(language, set())
    out: dict[str, list[re.Match]] = {"names": [], "words": []}
    for m in WORD.finditer(text):
        word = m.group()
        if word.casefold() in stop:
            continue
        if not _cased(word):
            if len(word) >= 5:
                out["words"].append(m)
        elif word[0].isupper():
            if len(word) >= 3 and not _sentence_start(text, m.start()) and (not word.isupper() or text.isupper()):
                out["names"].append(m)  # an acronym is no name, unless the whole claim is in capitals
        elif len(word) >= 6:
            out["words"].append(m)
    return out


def vocabulary(claims: list[tuple[str, str]], avoid: set[str] = frozenset()) -> dict[str, dict[str, list[str]]]:
    """The words a swap may give, per language and kind ("names", "words"), from the quarter's own claims ((text,
    language) pairs), sorted; ``avoid``: words that must not appear (the quarter's ratings), besides the label
    scheme's verdict words."""
    banned = _avoided() | {w.casefold() for w in avoid}
    out: dict[str, dict[str, set[str]]] = {}
    for text, language in claims:
        lang = script_language(text, language)
        for kind, matches in _swappable(text, lang).items():
            words = out.setdefault(lang, {}).setdefault(kind, set())
            words.update(m.group() for m in matches if m.group().casefold() not in banned)
    return {lang: {kind: sorted(w) for kind, w in sorted(kinds.items())} for lang, kinds in sorted(out.items())}


def _new_number(number: str, rng: random.Random) -> str:
    digits = number.replace(",", "")
    whole = digits.split(".")[0]
    if len(whole) == 4 and 1800 <= int(whole) <= 2100:  # a year: another year close to it
        return str(int(whole) + rng.choice([-3, -2, -1, 1, 2, 3])) + number[len(whole):]
    places = [i for i, c in enumerate(number) if c.isdigit()]
    i = places[0] if len(places) == 1 else rng.choice(places[1:])
    digit = rng.choice([d for d in "123456789" if d != number[i]] if i == places[0] else
                       [d for d in "0123456789" if d != number[i]])
    return number[:i] + digit + number[i + 1:]


def _new_word(word: str, words: list[str], text: str, rng: random.Random) -> str:
    if word in MONTHS:
        return rng.choice([m for m in MONTHS if m != word])
    present = {w.casefold() for w in WORD.findall(text)}
    options = [w for w in words if w.casefold() not in present and w not in MONTHS]
    if not _cased(word):  # keep the definite article where the word had it
        options = [w for w in options if w.startswith("ال") == word.startswith("ال")] or options
    return rng.choice(options) if options else ""


def minimal_edit(claim: str, language: str, words: dict[str, list[str]], rng: random.Random) -> tuple[str, list[str]]:
    """The claim with one detail swapped, and [old, new]: a number or a name, else a content word; the claim itself
    and [] when it has nothing to swap."""
    swappable = _swappable(claim, language)
    details = [("number", m) for m in NUMBER.finditer(claim)] + [("names", m) for m in swappable["names"]]
    rng.shuffle(details)
    fallback = [("words", m) for m in swappable["words"]]
    rng.shuffle(fallback)
    for kind, m in details + fallback:
        new = _new_number(m.group(), rng) if kind == "number" else _new_word(m.group(), words.get(kind, []), claim, rng)
        if new and new != m.group():
            return claim[:m.start()] + new + claim[m.end():], [m.group(), new]
    return claim, []


def _split_refs(text: str) -> tuple[str, str]:
    match = LEADING_REFS.match(text)
    return (match.group(1), text[match.end():]) if match else ("", text)


def _lower_start(text: str) -> str:
    first = text.split(" ", 1)[0]
    return text[0].lower() + text[1:] if first.casefold() in FUNCTION_START else text


def _reorder(text: str, language: str) -> str:
    """Two sentences swapped; else two Arabic clauses around one comma; else a closing phrase of time or place put
    first (English, Arabic). The text itself when none applies."""
    sentences = re.split(r"(?<=[.!?؟])\s+(?=\S)", text.strip())
    if len(sentences) == 2 and all(s[-1] in ".!?؟" for s in sentences):
        return f"{sentences[1]} {sentences[0]}"
    body = text.strip()
    end = body[-1] if body[-1] in ".!?؟" else ""
    body = body[:-1] if end else body
    parts = body.split("، ")  # two Arabic clauses around one comma
    if language == "ar" and len(parts) == 2 and min(count_words(p) for p in parts) >= 3:
        return f"{parts[1]}، {parts[0]}{end}"
    comma = "، " if language == "ar" else ", "
    for m in reversed(list(PREPOSITION[language].finditer(body)) if language in PREPOSITION else []):
        main, phrase = body[:m.start()], body[m.end():]  # the shortest closing phrase of time or place goes first
        if count_words(phrase) <= 6 and count_words(main) >= 4 and not re.search(r"[,;،]|<", phrase):
            return f"{phrase[0].upper()}{phrase[1:]}{comma}{_lower_start(main)}{end or '.'}"
    return text


def _reword(text: str, language: str, rng: random.Random) -> str:
    options = [(a, b) for a, b in SYNONYMS.get(language, []) if re.search(rf"(?<!\w){a}(?!\w)", text, re.I)
               and not re.search(rf"(?<!\w){b}(?!\w)", text, re.I)]
    if not options:
        return text
    old, new = rng.choice(options)

    def keep_case(m: re.Match) -> str:
        return new[0].upper() + new[1:] if m.group()[0].isupper() else new

    return re.sub(rf"(?<!\w){old}(?!\w)", keep_case, text, count=1, flags=re.I)


def paraphrase(text: str, language: str, rng: random.Random) -> str:
    refs, body = _split_refs(text)
    reordered = _reorder(body, language)
    return refs + _reword(reordered, language, rng)


def _template(template: str, claim: str, language: str) -> str:
    refs, body = _split_refs(claim)
    if language in LOWERED and body[1:2].islower():
        body = _lower_start(body)
    body = body.rstrip(" .")
    return refs + template.format(claim=body) + ("" if re.search(r"[.!?؟…][”’»)\]]*$", body) else ".")


def fits(text: str, language: str) -> bool:
    """Within the claim limits, one line, no quote mark, no verdict word."""
    return (count_words(text) <= MAX_WORDS and count_sentences(text, language) <= MAX_SENTENCES and '"' not in text
            and "\n" not in text and not verdict_leak(MEDIA_REF.sub(" ", text), language))


def garble(text: str, rng: random.Random) -> str:
    """The text with one word garbled (issue 49's planted fluency tell: a writer that mangles a word in each
    rewrite): the inner letters of its longest lower-case word of five letters or more (a name where it has none;
    outside the media references), reversed (shuffled where reversing leaves it as it was); the text itself when it
    has no such word."""
    found = [m for m in WORD.finditer(text) if len(m.group()) >= 5 and len(set(m.group()[1:-1])) > 1]
    if not found:
        return text
    lower = [m for m in found if m.group() == m.group().lower()] or found
    m = max(lower, key=lambda m: (len(m.group()), rng.random()))
    word = m.group()
    inner = word[-2:0:-1]
    while inner == word[1:-1]:
        inner = "".join(rng.sample(word[1:-1], len(word) - 2))
    return text[:m.start()] + word[0] + inner + word[-1] + text[m.end():]


def rewrites(claim: str, language: str, words: dict[str, dict[str, list[str]]], seed: int,
             garbled: bool = False) -> dict:
    """{"rewrites": {style: text}, "swap": [old, new]} for one claim (``words``: ``vocabulary``'s). A claim with
    nothing to swap (1 of the 3,332 real records) has the correction text for its minimal edit and paraphrase, so
    that no rewrite is the claim itself; a style whose text would not fit the claim limits falls back to the minimal
    edit (none of the real records'). ``garbled``: a writer that garbles one word of each rewrite (``garble``)."""
    lang = script_language(claim, language)
    rng = _rng(seed, "rewrite", claim)
    minimal, swap = minimal_edit(claim, lang, words.get(lang, {}), rng)
    correction = _template(rng.choice(CORRECTION[lang]), minimal, lang)
    if not swap:
        minimal = correction
    out = {"negation": _template(NEGATION[lang], claim, lang), "correction": correction, "minimal": minimal,
           "paraphrase": paraphrase(minimal, lang, rng) if swap else correction}
    for style, text in out.items():
        if not fits(text, lang):
            out[style] = minimal
    if garbled:
        out = {style: garble(text, _rng(seed, "garble", style, claim)) for style, text in out.items()}
    return {"rewrites": out, "swap": swap}


def rewrite_texts(truth: dict) -> dict[str, str]:
    """style -> text of one planted claim's rewrites; a truth table written before the styles (one "rectified"
    text, the negation template) reads as that one style."""
    if "rewrites" in truth:
        return dict(truth["rewrites"])
    return {"negation": truth["rectified"]} if truth.get("rectified") else {}
