"""Negation and hedge words per language: "the video shows X" and "the video does not show X" are different claims,
and so are "X happened" and "X may have happened", though a fuzzy text measure scores each pair as one text.

The lists cover every language of the label scheme's ``verdict_words`` and the other languages of the ClaimReview
excerpts and of the AVeriTeC dev set's translations. Matching is on casefolded text, with the typographic apostrophe
read as "'": an entry in a spaced script matches as a whole word (one written with a leading "-", English "-n't", is
the end of a word; one that ends with an apostrophe, French "n'", the start of one); an entry in a script written
without spaces between words (Thai, Chinese, Japanese, Burmese, ...) matches anywhere, as a substring, after the
language's ``NOT_NEGATION`` words (Chinese 不过 "but", Japanese しれない in "may") are taken out. A language not
listed reads English's lists. The words found are given in one form each (``SAME_NEGATION``): "can't", "cannot" and
"can not" all hold "not", so a claim and its repost with the contraction written out are one claim to the
near-duplicate guard, and a rewrite that only spells a contraction out adds no negation (issue 48); so do the
English adjectives most often written either way ("unavailable" / "not available"). Known limits: negation that is
only a suffix (Turkish -me/-ma, Japanese verb forms outside the list) or another prefix is not seen as such.
"""

import functools

import regex

from assets.rules.languages import canonical_language
from assets.rules.once import once

NEGATION: dict[str, tuple[str, ...]] = {
    "en": ("not", "no", "never", "-n't", "cannot", "none", "nobody", "nothing", "neither", "nor", "nowhere",
           "without", "unavailable", "unable", "untrue", "unsafe"),
    "de": ("nicht", "kein", "keine", "keinen", "keinem", "keiner", "keines", "nie", "niemals", "nichts", "niemand",
           "weder", "ohne"),
    "fr": ("ne", "n'", "pas", "jamais", "aucun", "aucune", "rien", "ni", "sans", "non", "nullement"),
    "es": ("no", "nunca", "jamás", "ni", "ningún", "ninguno", "ninguna", "nada", "nadie", "sin", "tampoco"),
    "pt": ("não", "nunca", "jamais", "nem", "nenhum", "nenhuma", "nada", "ninguém", "sem"),
    "it": ("non", "mai", "né", "nessun", "nessuno", "nessuna", "niente", "nulla", "senza"),
    "ar": ("لا", "لم", "لن", "ليس", "ليست", "ليسوا", "غير", "بدون", "دون", "ولا", "ولم", "ولن", "وليس", "لست"),
    "nl": ("niet", "geen", "nooit", "niets", "niemand", "noch", "zonder"),
    "no": ("ikke", "ingen", "intet", "ingenting", "aldri", "verken", "uten", "ikkje", "inga"),
    "tl": ("hindi", "di", "wala", "walang", "huwag", "ayaw"),
    "id": ("tidak", "tak", "bukan", "belum", "jangan", "tanpa", "tiada"),
    "ms": ("tidak", "tak", "bukan", "belum", "jangan", "tanpa", "tiada"),
    "ru": ("не", "нет", "никогда", "ни", "ничего", "никто", "без"),
    "uk": ("не", "ні", "немає", "ніколи", "нічого", "ніхто", "без"),
    "pl": ("nie", "nigdy", "żaden", "żadna", "żadne", "nic", "nikt", "bez", "ani"),
    "tr": ("değil", "yok", "hiç", "asla", "hiçbir", "ne"),
    "hi": ("नहीं", "न", "ना", "मत", "बिना", "कभी नहीं"),
    "bn": ("না", "নয়", "নেই", "নি", "ছাড়া"),
    "ur": ("نہیں", "نہ", "مت", "بغیر"),
    "th": ("ไม่", "มิได้", "หาได้", "ไม่ใช่", "ปราศจาก"),
    "zh": ("不", "没", "沒", "没有", "沒有", "未", "非", "无", "無", "别", "別"),
    "ja": ("ない", "ません", "無い", "なかった", "ず", "ではない", "じゃない"),
    "my": ("မဟုတ်", "ဘူး", "မရှိ"),
}

HEDGE: dict[str, tuple[str, ...]] = {
    "en": ("may", "might", "could", "possibly", "perhaps", "probably", "likely", "reportedly", "allegedly",
           "apparently", "supposedly", "seems", "appears", "suggests", "rumored", "rumoured"),
    "de": ("vielleicht", "möglicherweise", "angeblich", "vermutlich", "wahrscheinlich", "offenbar", "wohl",
           "könnte", "könnten", "soll", "sollen", "scheint"),
    "fr": ("peut-être", "possiblement", "probablement", "prétendument", "apparemment", "pourrait", "pourraient",
           "aurait", "auraient", "semble", "supposément"),
    "es": ("quizás", "quizá", "tal vez", "posiblemente", "probablemente", "presuntamente", "supuestamente",
           "aparentemente", "podría", "podrían", "parece"),
    "pt": ("talvez", "possivelmente", "provavelmente", "supostamente", "alegadamente", "aparentemente", "poderia",
           "poderiam", "pode", "parece"),
    "it": ("forse", "possibilmente", "probabilmente", "presumibilmente", "presunto", "presunta", "apparentemente",
           "potrebbe", "potrebbero", "sembra"),
    "ar": ("ربما", "قد", "يبدو", "محتمل", "يُزعم", "يزعم", "مزعوم", "مزعومة", "يُحتمل", "احتمال"),
    "nl": ("misschien", "mogelijk", "waarschijnlijk", "vermoedelijk", "zou", "zouden", "lijkt", "naar verluidt"),
    "no": ("kanskje", "muligens", "trolig", "sannsynligvis", "angivelig", "visstnok", "kan"),
    "tl": ("baka", "siguro", "marahil", "daw", "raw", "umano"),
    "id": ("mungkin", "barangkali", "diduga", "kabarnya", "konon", "sepertinya"),
    "ms": ("mungkin", "barangkali", "didakwa", "kononnya", "dikatakan"),
    "ru": ("возможно", "вероятно", "якобы", "предположительно", "может", "кажется"),
    "uk": ("можливо", "ймовірно", "нібито", "імовірно", "може"),
    "pl": ("może", "prawdopodobnie", "rzekomo", "podobno", "ponoć", "chyba"),
    "tr": ("belki", "muhtemelen", "iddiaya göre", "galiba", "olabilir"),
    "hi": ("शायद", "संभवतः", "कथित", "संभव", "सकता", "सकती", "सकते"),
    "bn": ("হয়তো", "সম্ভবত", "কথিত"),
    "ur": ("شاید", "ممکن", "مبینہ", "غالباً"),
    "th": ("อาจ", "อาจจะ", "น่าจะ", "คง", "ว่ากันว่า", "คาดว่า"),
    "zh": ("可能", "也许", "也許", "或许", "或許", "据说", "據說", "据称", "據稱", "疑似", "大概"),
    "ja": ("かもしれない", "かもしれません", "可能性", "らしい", "おそらく", "恐らく", "とされる", "疑い"),
    "my": ("ဖြစ်နိုင်", "ထင်ရ"),
}

# one form for the forms of one negation word: the contraction and its full form, an elided or prefixed form
SAME_NEGATION: dict[str, dict[str, str]] = {
    "en": {"n't": "not", "cannot": "not", "unavailable": "not", "unable": "not", "untrue": "not", "unsafe": "not"},
    "fr": {"n'": "ne"},
    "ar": {"ولا": "لا", "ولم": "لم", "ولن": "لن", "وليس": "ليس"},
}

# words of an unspaced script that hold a negation entry without negating (substring matching would read them)
NOT_NEGATION: dict[str, tuple[str, ...]] = {
    "zh": ("不过", "不過", "不仅", "不僅", "不断", "不斷", "不少", "无论", "無論", "并非只", "非常", "未来", "未來"),
    "ja": ("かもしれない", "しれない", "少ない", "危ない", "足りない"),
    "th": ("ไม้",),
}

_LETTER = r"[\w\p{M}]"  # a letter, digit or combining mark (a Devanagari vowel sign is part of its word)
# scripts written without spaces between words: Thai, Lao, Khmer, Myanmar, kana, CJK ideographs, Hangul
_UNSPACED = regex.compile(
    r"[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\uac00-\ud7af]")


def _fold(text: str) -> str:
    return (text or "").replace("\u2019", "'").replace("\u02bc", "'").casefold()


@once
def _matcher(table: str, language: str) -> tuple[regex.Pattern | None, tuple[str, ...], tuple[str, ...]]:
    """The whole-word pattern of a language's spaced entries, its unspaced entries, and what to take out first."""
    entries = (NEGATION if table == "negation" else HEDGE).get(language, ())
    spaced = sorted({_fold(e) for e in entries if not _UNSPACED.search(e)}, key=len, reverse=True)
    unspaced = tuple(sorted({_fold(e) for e in entries if _UNSPACED.search(e)}, key=len, reverse=True))
    alternatives = [(r"(?<!" + _LETTER + ")" if e[0] != "-" else "") + regex.escape(e.lstrip("-"))
                    + (r"(?!" + _LETTER + ")" if e[-1] != "'" else "") for e in spaced]
    pattern = regex.compile("|".join(alternatives)) if alternatives else None
    exceptions = NOT_NEGATION.get(language, ()) if table == "negation" else ()
    return pattern, unspaced, exceptions


def _language(language: str) -> str:
    code = canonical_language(language)
    return code if code in NEGATION else "en"


def _found(table: str, text: str, language: str) -> set[str]:
    code = _language(language)
    pattern, unspaced, exceptions = _matcher(table, code)
    folded = _fold(text)
    found = set(pattern.findall(folded)) if pattern is not None else set()
    if unspaced:
        for word in exceptions:
            folded = folded.replace(word, " ")
        found |= {e for e in unspaced if e in folded}
    if table == "negation":
        same = SAME_NEGATION.get(code, {})
        found = {same.get(w, w) for w in found}
    return found


def negations(text: str, language: str) -> set[str]:
    """The negation words of ``language`` (English's when not listed) that ``text`` holds, casefolded, each in its one
    form (SAME_NEGATION: "didn't" holds "not")."""
    return _found("negation", text, language)


def hedges(text: str, language: str) -> set[str]:
    """The hedge words of ``language`` (English's when not listed) that ``text`` holds, casefolded."""
    return _found("hedge", text, language)


@functools.lru_cache(maxsize=1 << 16)
def polarity(text: str) -> frozenset[str]:
    """The negation and hedge words of every language's lists that ``text`` holds: the guard of the near-duplicate
    text measures, which compare texts without their language. Two texts whose words differ here ("shows" / "does
    not show", "happened" / "may have happened") are different claims however alike their words. On real data the
    guard parts no near-duplicate pair that the text measure and the length guard find: 37 in the AVeriTeC dev set,
    652 in the Arabic ClaimReview sample."""
    return frozenset(w for language in NEGATION for w in negations(text, language) | hedges(text, language))
