"""One code per language, whatever tag a record carries: BCP 47 tags with a region or script, ISO 639-2/3 codes and
individual languages of a macrolanguage all come to the ISO 639-1 code that py3langid and the label scheme use.

Ingestion takes its codes from babel's names, which give ``nb`` for Norwegian Bokmål and ``fil`` for Filipino;
py3langid knows them as ``no`` and ``tl``. The table covers the languages of the label scheme, of the ClaimReview
excerpts and of py3langid's model that have an ISO 639-2/3 form in use (ISO 639-2 B and T codes, ISO 639-3
individual languages of the macrolanguages ar, fa, ms, no, zh).
"""

# code -> the ISO 639-1 (or py3langid) code of the same language or of its macrolanguage
EQUIVALENT = {
    # Norwegian: Bokmål and Nynorsk are the written standards of the macrolanguage "no"
    "nb": "no", "nn": "no", "nob": "no", "nno": "no", "nor": "no",
    # Filipino is the standardized form of Tagalog
    "fil": "tl", "tgl": "tl",
    # Chinese: the macrolanguage and its spoken varieties
    "zho": "zh", "chi": "zh", "cmn": "zh", "yue": "zh", "wuu": "zh", "nan": "zh", "hak": "zh",
    # Arabic: the macrolanguage, Standard Arabic and the spoken varieties fact-checkers publish in
    "ara": "ar", "arb": "ar", "arz": "ar", "apc": "ar", "ajp": "ar", "acm": "ar", "ary": "ar", "aeb": "ar",
    "arq": "ar", "afb": "ar", "ayl": "ar",
    # Malay and Indonesian (py3langid knows both)
    "msa": "ms", "may": "ms", "zsm": "ms", "ind": "id",
    # Persian
    "fas": "fa", "per": "fa", "pes": "fa", "prs": "fa",
    # Serbo-Croatian's standards keep their own codes; the 639-2/3 forms of common languages
    "eng": "en", "deu": "de", "ger": "de", "fra": "fr", "fre": "fr", "spa": "es", "por": "pt", "ita": "it",
    "nld": "nl", "dut": "nl", "rus": "ru", "ukr": "uk", "pol": "pl", "tur": "tr", "hin": "hi", "ben": "bn",
    "urd": "ur", "tha": "th", "jpn": "ja", "kor": "ko", "vie": "vi", "mya": "my", "bur": "my", "ell": "el",
    "gre": "el", "ces": "cs", "cze": "cs", "slk": "sk", "slo": "sk", "ron": "ro", "rum": "ro", "hun": "hu",
    "swe": "sv", "dan": "da", "fin": "fi", "est": "et", "lit": "lt", "lav": "lv", "hrv": "hr", "srp": "sr",
    "bos": "bs", "slv": "sl", "bul": "bg", "mkd": "mk", "mac": "mk", "sqi": "sq", "alb": "sq", "cat": "ca",
    "eus": "eu", "baq": "eu", "glg": "gl", "heb": "he", "tam": "ta", "tel": "te", "mal": "ml", "kan": "kn",
    "mar": "mr", "guj": "gu", "pan": "pa", "ori": "or", "nep": "ne", "sin": "si", "swa": "sw", "swh": "sw",
    "amh": "am", "hau": "ha", "yor": "yo", "ibo": "ig", "zul": "zu", "afr": "af", "khm": "km", "lao": "lo",
    "kat": "ka", "geo": "ka", "hye": "hy", "arm": "hy", "aze": "az", "kaz": "kk", "uzb": "uz",
    # deprecated ISO 639-1 codes still found in feeds
    "iw": "he", "in": "id", "ji": "yi", "jw": "jv",
}


# The written forms a language identifier may give a text of a language (issue 48): Bokmål and Nynorsk for Norwegian,
# the Chinese varieties written in Han characters, the Arabic dialects py3langid knows. A rewrite in any form of its
# claim's language stays in that language; py3langid gives Nynorsk "nn", written Cantonese "yue" and Egyptian Arabic
# "arz", which the macrolanguage codes ("no", "zh", "ar") would read as another language.
WRITTEN_FORMS = {
    "no": ("no", "nb", "nn"),
    "zh": ("zh", "yue", "wuu"),
    "ar": ("ar", "arz", "ary"),
}
# Languages py3langid does not know, with the ones it gives their texts instead (measured on tests/fixtures/rules):
# Cebuano reads as Tagalog or Central Bikol. A language with neither is not judged at all.
NEAREST_KNOWN = {
    "ceb": ("tl", "bcl"),
}


def written_forms(tag: str) -> set[str]:
    """Every code a language identifier may rightly give a text in the language of ``tag``: the tag's own base code,
    its canonical code, the written forms of that language and, for a language the identifier lacks, its nearest."""
    raw = (tag or "").replace("_", "-").split("-")[0].strip().casefold()
    code = canonical_language(tag)
    return {c for c in (raw, code, *WRITTEN_FORMS.get(code, ()), *NEAREST_KNOWN.get(raw, ()),
                        *NEAREST_KNOWN.get(code, ())) if c}


def canonical_language(tag: str) -> str:
    """The language of a tag as one ISO 639-1 code: region and script dropped ("pt-BR", "zh_Hant" -> "pt", "zh"),
    ISO 639-2/3 codes and macrolanguage members mapped ("nb" -> "no", "fil" -> "tl", "arb" -> "ar"); '' for none."""
    base = (tag or "").replace("_", "-").split("-")[0].strip().casefold()
    return EQUIVALENT.get(base, base)
