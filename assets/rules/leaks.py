"""Where a verdict word in a claim says the verdict, and where it is the claim's own words.

A verdict word leaks the fact-checker's verdict when the text uses it about the claim itself: as a label at its head
("False: ...", "Fact check: ...", "Es falso que ..."), at its tail ("... - FALSE"), as a sentence of its own
("... False."), predicated of the claim or its medium ("This post is false", "Dieses Video ist gefälscht",
"الادعاء غير صحيح"), or attached to them ("This FAKE video", "misleading claim", "خبر زائف"). Elsewhere it is part
of what the claim says: its subject ("fake bank cards", "a crime to lie", "multiple challenges", "ذهبًا مزيفًا"),
or reported speech ("Trump said it was a hoax", a quotation), and the claim stays. Reported speech runs from a
speech verb to the end of its sentence or to a contrast ("..., but this is false" leaks again). A verdict phrase
that names the medium itself ("old photo", a title's head) leaks wherever it stands outside reported speech.

The word lists cover the label scheme's verdict languages (en, de, fr, es, pt, it, ar); another language reads
English's lists besides its own (none). In the languages whose adjectives follow their noun (fr, es, pt, it, ar), a
verdict word that opens the text is a label ("Falso vacuna ..."); in English and German it may modify the next
word ("False positives ...") and leaks only before a separator or a claim noun.
"""

import re

from assets.rules.languages import canonical_language
from assets.rules.once import once

# nouns that name the claim or the circulating item itself
CLAIM_NOUNS = {
    "en": ("claim", "claims", "post", "posts", "video", "videos", "photo", "photos", "image", "images", "picture",
           "pictures", "footage", "clip", "clips", "news", "story", "stories", "report", "reports", "article",
           "articles", "tweet", "tweets", "message", "messages", "meme", "memes", "screenshot", "rumor", "rumour",
           "headline", "graphic"),
    "de": ("behauptung", "behauptungen", "beitrag", "beiträge", "post", "posts", "video", "videos", "foto", "fotos",
           "bild", "bilder", "aufnahme", "aufnahmen", "meldung", "meldungen", "nachricht", "nachrichten", "bericht",
           "artikel", "tweet", "zitat", "gerücht", "sharepic"),
    "fr": ("affirmation", "affirmations", "publication", "publications", "post", "vidéo", "vidéos", "photo", "photos",
           "image", "images", "information", "informations", "article", "tweet", "message", "rumeur", "montage",
           "nouvelle", "citation"),
    "es": ("afirmación", "afirmaciones", "publicación", "publicaciones", "video", "vídeo", "videos", "foto", "fotos",
           "imagen", "imágenes", "noticia", "noticias", "artículo", "tuit", "mensaje", "mensajes", "cadena", "rumor",
           "cita"),
    "pt": ("afirmação", "afirmações", "publicação", "publicações", "post", "vídeo", "video", "vídeos", "foto",
           "fotos", "imagem", "imagens", "notícia", "notícias", "artigo", "tuíte", "mensagem", "mensagens", "boato",
           "corrente"),
    "it": ("affermazione", "affermazioni", "post", "video", "foto", "immagine", "immagini", "notizia", "notizie",
           "articolo", "tweet", "messaggio", "messaggi", "catena", "citazione"),
    "ar": ("ادعاء", "الادعاء", "ادعاءات", "الادعاءات", "خبر", "الخبر", "أخبار", "الأخبار", "فيديو", "الفيديو", "مقطع",
           "المقطع", "صورة", "الصورة", "صور", "الصور", "منشور", "المنشور", "منشورات", "المنشورات", "رسالة", "الرسالة",
           "تغريدة", "التغريدة", "معلومة", "المعلومة", "معلومات", "المعلومات", "تصريح", "التصريح"),
}
# "this" and the like, as the subject of a verdict ("this is false", "which is misleading")
DEMONSTRATIVES = {
    "en": ("this", "that", "these", "those", "which"),
    "de": ("das", "dies", "dieses", "diese", "dieser"),
    "fr": ("ceci", "cela", "ça", "ce", "c'"),
    "es": ("esto", "eso", "esta", "este", "lo cual"),
    "pt": ("isto", "isso", "esta", "este", "o que"),
    "it": ("questo", "questa", "ciò", "il che"),
    "ar": ("هذا", "هذه", "ذلك", "تلك"),
}
COPULAS = {
    "en": ("is", "was", "are", "were", "'s", "has been", "have been", "seems", "appears to be"),
    "de": ("ist", "war", "sind", "waren", "wurde", "wurden"),
    "fr": ("est", "était", "sont", "étaient", "'est"),
    "es": ("es", "era", "fue", "son", "eran", "está", "están"),
    "pt": ("é", "era", "foi", "são", "eram", "está", "estão"),
    "it": ("è", "era", "fu", "sono", "erano"),
    "ar": ("هو", "هي", "كان", "كانت", "يعد", "تعد"),
}
# words that may stand between a copula and its verdict ("is not entirely false", "is a hoax")
FILLERS = {
    "en": ("a", "an", "not", "completely", "totally", "entirely", "absolutely", "also", "just", "actually", "clearly",
           "simply", "all", "mostly", "partly", "partially", "wholly", "therefore"),
    "de": ("nicht", "ein", "eine", "völlig", "komplett", "ganz", "auch", "teilweise", "also"),
    "fr": ("pas", "un", "une", "totalement", "complètement", "entièrement", "donc", "aussi", "partiellement"),
    "es": ("no", "un", "una", "totalmente", "completamente", "también", "parcialmente"),
    "pt": ("não", "um", "uma", "totalmente", "completamente", "também", "parcialmente"),
    "it": ("non", "un", "una", "del", "tutto", "totalmente", "completamente", "anche", "parzialmente"),
    "ar": ("ليس", "ليست", "غير", "أيضا", "أيضًا"),
}
# what may open a text before its verdict label ("Es falso que ...", "It is false that ...", "#Verificamos: falso")
HEAD_PREFIXES = {
    "en": ("it is", "it's", "this is", "verdict", "rating", "our rating", "fact check", "fact-check"),
    "de": ("es ist", "das ist", "faktencheck", "faktenfuchs"),
    "fr": ("c'est", "il est", "vérification", "intox"),
    "es": ("es", "verificamos", "chequeado"),
    "pt": ("é", "e", "verificamos", "checamos"),  # "e": a headline without its accent (a URL slug)
    "it": ("è",),
    "ar": ("حقيقة", "الحقيقة", "الحكم"),
}
# verbs that introduce reported speech, and the conjunctions that end it
SPEECH_VERBS = {
    "en": ("said", "says", "say", "saying", "claimed", "claims", "claim", "claiming", "called", "calls", "call",
           "described", "describes", "wrote", "writes", "tweeted", "posted", "stated", "states", "alleged", "alleges",
           "told", "tells", "quote", "quoted", "quotes", "according to", "suggested", "suggests", "insisted",
           "argued", "declared", "announced", "dubbed", "labelled", "labeled"),
    "de": ("sagte", "sagt", "sagten", "behauptet", "behauptete", "behaupten", "erklärte", "erklärt", "schrieb",
           "schreibt", "nannte", "nennt", "laut", "zufolge", "bezeichnete", "bezeichnet"),
    "fr": ("dit", "a dit", "affirme", "affirmé", "affirmait", "déclaré", "déclare", "selon", "qualifié", "qualifie",
           "écrit", "prétend", "prétendu", "assure", "assuré"),
    "es": ("dijo", "dice", "dicen", "afirmó", "afirma", "afirman", "aseguró", "asegura", "declaró", "según",
           "calificó", "califica", "escribió", "sostiene", "sostuvo"),
    "pt": ("disse", "diz", "dizem", "afirmou", "afirma", "afirmam", "declarou", "segundo", "chamou", "chama",
           "escreveu", "alega", "alegou"),
    "it": ("detto", "dice", "disse", "afferma", "affermato", "dichiarato", "dichiara", "secondo", "definito",
           "definisce", "scritto", "sostiene"),
    "ar": ("قال", "قالت", "يقول", "تقول", "صرح", "صرّح", "زعم", "زعمت", "يزعم", "تزعم", "ادعى", "ادعت", "يدعي", "تدعي",
           "وصف", "وصفت", "أكد", "أكدت", "بحسب", "وفق", "وفقا", "مدعية", "مدعيا", "زاعمة", "زاعما"),
}
CONTRASTS = {
    "en": ("but", "however", "yet", "although", "though", "whereas", "in fact", "actually"),
    "de": ("aber", "doch", "jedoch", "allerdings", "tatsächlich"),
    "fr": ("mais", "cependant", "pourtant", "toutefois", "en réalité"),
    "es": ("pero", "sin embargo", "aunque", "en realidad"),
    "pt": ("mas", "porém", "contudo", "entretanto", "na verdade"),
    "it": ("ma", "però", "tuttavia", "in realtà"),
    "ar": ("لكن", "ولكن", "إلا أن", "غير أن", "بينما"),
}
ADJECTIVE_AFTER_NOUN = {"fr", "es", "pt", "it", "ar"}
_SEPARATOR = r"[:\-\u2013\u2014|!.?\u061f)\]]"
_SENTENCE_END = re.compile(r"[.!?\u061f\u3002\u0964]+(?=\s|$)|;|\n")
_QUOTED = re.compile(r"\u201c[^\u201d]*\u201d|\u201e[^\u201c\u201d]*[\u201c\u201d]|\u00ab[^\u00bb]*\u00bb"
                     r"|(?<![^\s(\[])\"[^\"]*\"|(?<![^\s(\[])[\u2018'][^\u2019']*[\u2019'](?![^\W_])")
_WORD = r"[^\W\d_][\w'\u2019-]*"


def _alternatives(words) -> str:
    return "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True))


@once
def _lists(language: str) -> dict[str, str]:
    """The language's lists, merged with English's, as regex alternatives."""
    code = canonical_language(language)
    tables = {"noun": CLAIM_NOUNS, "demonstrative": DEMONSTRATIVES, "copula": COPULAS, "filler": FILLERS,
              "prefix": HEAD_PREFIXES, "speech": SPEECH_VERBS, "contrast": CONTRASTS}
    return {name: _alternatives([*table["en"], *table.get(code, ())]) for name, table in tables.items()}


@once
def _patterns(language: str) -> dict[str, re.Pattern]:
    w = _lists(language)
    edge = r"(?<![\w'])"
    return {
        "speech": re.compile(rf"{edge}(?:{w['speech']})(?!\w)", re.IGNORECASE),
        "contrast": re.compile(rf"{edge}(?:{w['contrast']})(?!\w)", re.IGNORECASE),
        # before the verdict: the text's head, give or take a label ("Es falso", "Fact check: false")
        "head": re.compile(rf"^[\W_]*(?:(?:{w['prefix']})(?!\w)[\W_]*)?$", re.IGNORECASE),
        "prefixed_head": re.compile(rf"^[\W_]*(?:{w['prefix']})(?!\w)[\W_]*$", re.IGNORECASE),
        # before the verdict: "<claim noun or this> <copula> [fillers]", or the claim noun itself ("الادعاء خاطئ")
        "predicate": re.compile(rf"{edge}(?:(?:{w['noun']})\s*(?:(?:{w['copula']})(?!\w)\s*)?"
                                rf"|(?:{w['demonstrative']})\s*(?:{w['copula']})(?!\w)\s*)"
                                rf"(?:(?:{w['filler']})\s+){{0,3}}$", re.IGNORECASE),
        # after the verdict: a claim noun next, or after one more word ("fake video", "False Facebook posts")
        "attribute": re.compile(rf"^\s+(?:{_WORD}\s+)?(?:{w['noun']})(?!\w)", re.IGNORECASE),
        "separator_after": re.compile(rf"^\s*(?:{_SEPARATOR}|$)"),
        "tail_before": re.compile(rf"(?:{_SEPARATOR}|[(\[])\s*$"),
        "noun_in_phrase": re.compile(rf"{edge}(?:{w['noun']})(?!\w)", re.IGNORECASE),
    }


def reported_speech_mask(text: str, language: str) -> str:
    """The text with quotations and reported speech blanked out (same length): from a speech verb to the end of its
    sentence or to the next contrast ("..., but ...")."""
    text = _QUOTED.sub(lambda m: " " * len(m.group()), text)
    p = _patterns(language)
    out, pos = [], 0
    for verb in p["speech"].finditer(text):
        if verb.start() < pos:
            continue
        end = len(text)
        for stop in (_SENTENCE_END.search(text, verb.end()), p["contrast"].search(text, verb.end())):
            if stop is not None:
                end = min(end, stop.start())
        out.append(text[pos:verb.end()] + " " * (end - verb.end()))
        pos = end
    return "".join(out) + text[pos:]


def says_the_verdict(text: str, start: int, end: int, language: str) -> bool:
    """Whether the verdict phrase at ``text[start:end]`` (a text with reported speech masked) is used about the claim
    itself: its head, its tail, a sentence of its own, predicated of the claim or attached to it."""
    p = _patterns(language)
    before, after, phrase = text[:start], text[end:], text[start:end]
    sentence_start = max((m.end() for m in _SENTENCE_END.finditer(before)), default=0)
    alone_after = p["separator_after"].match(after)
    if p["noun_in_phrase"].search(phrase):  # "old photo", "fake video": the phrase names the medium
        return True
    if p["head"].match(before):
        if (alone_after or p["prefixed_head"].match(before) or p["attribute"].match(after)
                or canonical_language(language) in ADJECTIVE_AFTER_NOUN):
            return True
    elif not before[sentence_start:].strip(" \t\"'\u201c\u201d") and alone_after:
        return True  # a sentence of its own ("... the virus. False.")
    if not after.strip(" \t.!?\u061f)]\"'\u201d") and p["tail_before"].search(before):
        return True  # "... - FALSE", "... (fake)"
    return bool(p["predicate"].search(before[sentence_start:]) or p["attribute"].match(after))


# who a report about a claim names as its source, besides the claim nouns ("Facebook users claim ...")
SOURCES = {
    "en": ("users", "people", "netizens", "social media", "internet users", "many", "some", "viral"),
    "de": ("nutzer", "nutzerinnen", "user", "menschen"),
    "fr": ("internautes", "utilisateurs", "réseaux sociaux"),
    "es": ("usuarios", "internautas", "redes sociales"),
    "pt": ("usuários", "utilizadores", "internautas", "redes sociais"),
    "it": ("utenti", "social"),
    "ar": ("مستخدمون", "مستخدمو", "مستخدمين", "رواد", "ناشطون", "صفحات", "حسابات"),
}


@once
def _report_pattern(language: str) -> re.Pattern:
    """A text that opens on a report about a claim: a claim noun or a source among its first four words, then a
    speech verb ("claim", "allege", "say") within six more, or the item "shared" to make a claim."""
    w = _lists(language)
    code = canonical_language(language)
    sources = _alternatives([*SOURCES["en"], *SOURCES.get(code, ())])
    head = rf"^[\W_]*(?:{_WORD}\s+){{0,4}}?(?:{w['noun']}|{sources})(?!\w)"
    return re.compile(rf"{head}[\s,]+(?:[^\s.!?]+\s+){{0,6}}?(?:{w['speech']}|shared\s+to|circulat\w*\s+with)(?!\w)",
                      re.IGNORECASE)


def reports_a_claim(text: str, language: str) -> bool:
    """The text reports that someone claims something ("Facebook posts claim X", "Video shared to make misleading
    claim that ...") instead of asserting it: as a claim it is true whatever X is, and its label would invert."""
    return bool(_report_pattern(language).search(text))
