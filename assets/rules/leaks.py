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
verdict word that opens the text is a label ("FALSO Vacuna ...", "Falso que ...", "falso vacuna ..."), unless a
lower-case word that agrees with it follows directly: then it is an adjective before its noun, the claim's subject
("Faux billets de 500 roupies : ...", "Falsa alarma ...");
in English and German it may modify the next word ("False positives ...") and leaks only before a separator or a
claim noun. "Fake news" is a topic as often as a verdict ("a law against fake news"): it leaks as a label, a tail, a
sentence of its own or predicated of the claim ("This is fake news"), never as an attribute. A verdict word joined
by a hyphen to the next word is part of a compound ("False-flag attack") and no verdict.

A report about a claim (reports_a_claim) says that someone claims something instead of claiming it: a post, a medium
or people who share it as the subject of a verb that says ("Facebook posts claim ...", "Nutzer behaupten ...",
"نشرت حسابات ... صورة ادعت أنها"), or a form that says it by itself ("shared with the claim that", "soll ... zeigen",
"दावा किया जा रहा है", "iddia edildi", "อ้างว่า"). A verb that says what a medium shows ends the subject's reach
("Video shows X saying ..." asserts what the video shows), and so does a noun inside a prepositional phrase ("The
woman in the photo said ..."): both are claims, labelled as such in tests/fixtures/rules/.
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


# "fake news" (and its spellings): a topic noun, never an attribute of the claim
_TOPIC_COMPOUND = re.compile(r"fake[\s-]*news(?!\w)", re.IGNORECASE)
# after a verdict word that opens the text, what makes it a label in the languages whose adjectives follow their noun
_LABEL_NEXT = re.compile(r"^\s+(?:que|qu['\u2019]|che|de\s+que)(?!\w)", re.IGNORECASE)


_NEXT_WORD = re.compile(r"^[ \t]+([^\W\d_]+)")


def _adjective_before_noun(phrase: str, after: str) -> bool:
    """A lower-case word follows directly and agrees with the verdict word in gender where both show it (-o / -a):
    the verdict word is the adjective of that noun ("Faux billets ...", "Falsa alarma ..."), not a label ("falso
    vacuna ...": a headline's label, lower-cased in its URL)."""
    word = _NEXT_WORD.match(after)
    if not word or not word.group(1)[:1].islower() or _LABEL_NEXT.match(after):
        return False
    own, noun = phrase.casefold().rstrip("s"), word.group(1).casefold().rstrip("s")
    return not ((own.endswith("o") and noun.endswith("a")) or (own.endswith("a") and noun.endswith("o")))


def says_the_verdict(text: str, start: int, end: int, language: str) -> bool:
    """Whether the verdict phrase at ``text[start:end]`` (a text with reported speech masked) is used about the claim
    itself: its head, its tail, a sentence of its own, predicated of the claim or attached to it."""
    p = _patterns(language)
    topic = _TOPIC_COMPOUND.match(text, start)
    if topic:  # "fake news" is a topic: as a label, a tail, a sentence or a predicate only
        end = max(end, topic.end())
    before, after, phrase = text[:start], text[end:], text[start:end]
    sentence_start = max((m.end() for m in _SENTENCE_END.finditer(before)), default=0)
    alone_after = p["separator_after"].match(after)
    attribute = not topic and p["attribute"].match(after)
    if not topic and p["noun_in_phrase"].search(phrase):  # "old photo", "fake video": the phrase names the medium
        return True
    if p["head"].match(before):
        if (alone_after or p["prefixed_head"].match(before) or attribute
                or (canonical_language(language) in ADJECTIVE_AFTER_NOUN
                    and not _adjective_before_noun(phrase, after))):
            return True
    elif not before[sentence_start:].strip(" \t\"'\u201c\u201d") and alone_after:
        return True  # a sentence of its own ("... the virus. False.")
    if not after.strip(" \t.!?\u061f)]\"'\u201d") and p["tail_before"].search(before):
        return True  # "... - FALSE", "... (fake)"
    return bool(p["predicate"].search(before[sentence_start:]) or attribute)


# who a report about a claim names as its source, besides the claim nouns ("Facebook users claim ...")
SOURCES = {
    "en": ("users", "people", "netizens", "social media", "internet users", "many", "some", "accounts", "pages"),
    "de": ("nutzer", "nutzerinnen", "user", "menschen", "einige", "viele", "manche"),
    "fr": ("internautes", "utilisateurs", "réseaux sociaux"),
    "es": ("usuarios", "internautas", "redes sociales"),
    "pt": ("usuários", "utilizadores", "internautas", "redes sociais"),
    "it": ("utenti", "social"),
    "ar": ("مستخدمون", "مستخدمو", "مستخدمين", "رواد", "ناشطون", "صفحات", "حسابات", "مواقع"),
    "id": ("warganet", "netizen", "pengguna", "unggahan", "narasi", "pesan", "kabar"),
    "no": ("brukere", "brukarar", "innlegg"),
}
# verbs that say a subject claims something ("posts claim", "Nutzer behaupten"); SHARE_VERBS count after a source only
# ("users share ...": "a photo shared on Facebook shows ..." asserts what the photo shows)
REPORT_VERBS = {
    "en": ("claim", "claims", "claimed", "claiming", "alleged that", "alleges", "alleging", "purport", "purports",
           "purported", "purporting", "say", "says", "said", "saying", "suggest", "suggests", "suggested",
           "suggesting", "state", "states", "stated", "stating", "assert", "asserts", "asserted", "insist", "insists",
           "insisted"),
    "de": ("behauptet", "behaupten", "behauptete", "behaupteten", "sagt", "sagen", "sagte", "sagten", "schreibt",
           "schreiben", "unterstellt", "suggeriert", "suggerieren"),
    "fr": ("affirme", "affirment", "affirmait", "prétend", "prétendent", "assure", "assurent", "soutient",
           "soutiennent", "avance", "avancent", "dit", "disent", "laisse entendre", "laissent entendre", "suggère",
           "suggèrent", "allègue", "allèguent"),
    "es": ("afirma", "afirman", "asegura", "aseguran", "sostiene", "sostienen", "dice", "dicen", "señala", "señalan",
           "alega", "alegan", "sugiere", "sugieren", "circula", "circulan"),
    "pt": ("afirma", "afirmam", "alega", "alegam", "diz", "dizem", "dizendo", "garante", "garantem", "sugere",
           "sugerem", "afirmando", "alegando"),
    "it": ("afferma", "affermano", "sostiene", "sostengono", "dice", "dicono", "sostenendo"),
    "ar": ("زعم", "زعمت", "يزعم", "تزعم", "يزعمون", "زاعمة", "زاعما", "زاعمين", "ادعى", "ادعت", "أدعت", "ادَّعت",
           "يدعي", "تدعي", "يدعون", "مدعية", "مدعيةً", "مدعيا", "مدعين", "زُعم", "يُزعم"),
    "id": ("mengklaim", "menyebut", "menyebutkan", "menuding"),
    "no": ("hevder", "hevdar", "påstår", "påstod"),
}
SHARE_VERBS = {
    "en": ("share", "shares", "shared", "sharing", "posted", "circulate", "circulated", "circulating"),
    "de": ("teilen", "teilten", "verbreiten", "verbreiteten"),
    "fr": ("partagent", "partagé", "relaient"),
    "es": ("comparten", "compartieron", "compartido", "difunden", "difundieron"),
    "pt": ("compartilham", "compartilharam", "compartilhado", "espalham"),
    "ar": ("نشرت", "تداولت", "يتداولون"),
}
# verbs that say what a medium shows, and modal or future verbs: the subject's report reaches no further
STOPPERS = {
    "en": ("show", "shows", "showed", "showing", "depict", "depicts", "depicting", "feature", "features",
           "featuring", "capture", "captures", "capturing", "display", "displays", "reveal", "reveals", "prove",
           "proves", "will", "would", "can", "could", "may", "might", "must", "should", "shall", "of"),
    "de": ("zeigt", "zeigen", "zeigte", "zeigten", "wird", "würde", "kann", "könnte"),
    "fr": ("montre", "montrent", "montrant", "montré", "va", "pourrait", "peut"),
    "es": ("muestra", "muestran", "mostrando", "va", "podría", "puede"),
    "pt": ("mostra", "mostram", "mostrando", "vai", "pode", "poderia"),
    "it": ("mostra", "mostrano", "mostrando"),
    "ar": ("يظهر", "يُظهر", "تظهر", "تُظهر", "يوثق", "يُوثق", "توثق", "سوف"),
    "id": ("menunjukkan", "memperlihatkan", "akan"),
    "no": ("viser", "vil"),
}
# a subject inside a prepositional phrase is not the subject ("The woman in the photo said ...")
PREPOSITIONS = {
    "en": ("in", "of", "on", "at", "from", "with", "into", "inside", "behind", "by", "about", "for", "to", "under"),
    "de": ("in", "im", "auf", "von", "vom", "aus", "mit", "bei", "über"),
    "fr": ("dans", "de", "du", "des", "sur", "avec", "par", "en"),
    "es": ("en", "de", "del", "con", "por", "sobre"),
    "pt": ("em", "no", "na", "nos", "nas", "de", "do", "da", "dos", "das", "com", "por", "pelo", "pela"),
    "it": ("in", "nel", "nella", "di", "del", "della", "su", "con", "da"),
    "ar": ("في", "على", "من", "عن", "إلى"),
    "id": ("di", "dari", "dalam", "pada", "dengan"),
    "no": ("på", "i", "av", "fra", "med"),
}
DETERMINERS = ("the", "a", "an", "this", "that", "these", "those", "its", "their", "his", "her", "dem", "der", "den",
               "einem", "einer", "des", "la", "le", "les", "l'", "un", "une", "ce", "cette", "el", "los", "las", "una",
               "o", "os", "as", "um", "uma", "il", "lo", "gli")
# a report names its source at the head of a clause ("Posts on social media claim ...", "..., viral post claims"); a
# claim noun further on is an object ("PGA star Bubba Watson wrote a post that says ...": a claim about what he wrote)
SUBJECT_WITHIN = 5
_CLAUSE_START = re.compile(r"[.!?\u061f\u0964;:,\n]")
# an Arabic news item "published by" or "quoted from" a named outlet: the claim is that the outlet published it
_NAMED_OUTLET = re.compile(r"^\s*(?:نشرته|نشره|نشرتها)\s+(?:قناة|جريدة|صحيفة|وكالة|موقع|شبكة)|^\s*منقول\s+عن")
# how many words may stand between the subject and its verb ("Posts on social media in Kenya claim ...")
GAP = {"en": 6, "ar": 10}
GAP_DEFAULT = 8
# forms that say by themselves that a claim is reported, whatever their subject
REPORT_FORMS = {
    "en": (r"\bpurport\w*", r"\bmaking\s+the\s+claim\b", r"\badvance\s+a\s+claim\b",
           r"\b(?:is|are|was|were|being|been)\s+(?:widely\s+|falsely\s+|now\s+)?(?:being\s+)?(?:shared|circulated|"
           r"passed\s+around)\s+(?:online\s+|on\s+social\s+media\s+)?(?:as|with\s+(?:a|the)\s+claim|claiming)\b",
           r"\bshared\s+(?:\S+\s+){0,4}?(?:to\s+make|with)\s+(?:a|the)\s+(?:\S+\s+)?claim\b",
           r"\bwith\s+(?:a|the)\s+claim\s+that\b",
           r"\b(?:it\s+is|it's)\s+(?:being\s+)?(?:claimed|alleged|said)\s+that\b",
           r"\b(?:is|was|been|being)\s+claimed\s+(?:to|as)\b"),
    "de": (r"\bangeblich\b", r"\bsoll(?:en)?\s+(?:\S+\s+){0,6}?(?:zeigen|darstellen|belegen|beweisen)\b",
           r"\bwird\s+behauptet\b", r"\bheißt\s+es\b", r"\bkursier\w+"),
    "fr": (r"\bcensée?s?\s+(?:montrer|être|représenter)\b", r"\bselon\s+(?:les|des|certains)\s+internautes\b",
           r"\bprétendue?s?\b", r"\bqui\s+(?:prétend|affirme|assure)\b", r"\b(?:présentée?s?|partagée?s?)\s+comme\b",
           r"\bil\s+est\s+(?:affirmé|prétendu)\b", r"\bsupposément\b"),
    "es": (r"\bsupuestamente\b", r"\bse\s+(?:afirma|asegura|dice)\s+que\b", r"\bcompartid[oa]s?\s+como\b",
           r"\bcircula(?:n)?\s+(?:en\s+\S+\s+(?:\S+\s+)?)?(?:un|una|unos|unas)\s+(?:video|vídeo|imagen|foto|mensaje|"
           r"audio|cadena|publicación)", r"\bcircula(?:n)?\s+en\s+redes\b",
           r"\bsegún\s+(?:los|unos|algunos)\s+usuarios\b"),
    "pt": (r"\bsupostamente\b", r"\bcircula(?:m)?\s+(?:nas|pelas|em)\s+redes\b", r"\bcompartilhad[oa]s?\s+como\b",
           r"\b(?:foi|foram|é|são|está\s+sendo|estão\s+sendo)\s+(?:amplamente\s+)?compartilhad[oa]s?\b"),
    "it": (r"\bpresunt[oaie]\b", r"\bcircola(?:no)?\s+(?:sui|in\s+rete|online)\b"),
    "ar": (r"(?<!\S)على\s+أن(?:ه|ها|هم)?(?!\S)", r"(?<!\S)(?:ادعى|يدعي|زعم|يزعم)\s+ناشر\w*",
           r"^\W*خبر\s+(?:مفاده|يفيد|جرى\s+تداوله|متداول|زعم|يزعم|ادعى|يدعي|عن)(?!\S)",
           r"(?<!\S)انتشر(?:ت)?\s+(?:خبر|مقطع|فيديو|صورة|صور|منشور)",
           r"(?<!\S)(?:نشرت|نشر|تداولت|تداول|يتداول|تتداول)\s+(?:\S+\s+){0,2}?(?:حسابات|صفحات|مستخدمون|مستخدمو|"
           r"مستخدمين|رواد|ناشطون|مواقع)", r"(?<!\S)متداول(?:ة)?\s+(?:\S+\s+){0,3}?(?:على\s+أن|منسوب)"),
    "hi": (r"दावा\s+(?:किया\s+(?:जा\s+रहा|गया|गए)|कर\s+रहे|कर\s+रहा|करते\s+हुए|करने\s+वाले)", r"दावे\s+के\s+साथ",
           r"(?<!\S)का\s+दावा", r"किया\s+जा\s+रहा\s+है\s+दावा", r"दावा\s+वायरल",
           r"बता(?:कर|ते\s+हुए)\s+(?:शेयर|वायरल|साझा)", r"के\s+नाम\s+(?:से|पर)\s+वायरल", r"से\s+जोड़कर\s+वायरल",
           r"वायरल\s+(?:है|हो\s+रह|हो\s+चुका|किया\s+जा\s+रहा)", r"(?:शेयर|साझा)\s+(?:कर\s+रहे|किया\s+जा\s+रहा)",
           r"कहा\s+जा\s+रहा\s+है"),
    "id": (r"\bberedar\s+(?:\S+\s+){0,2}?(?:video|foto|gambar|pesan|kabar|narasi|unggahan|informasi|tangkapan)\b",
           r"\bdiklaim\b", r"\byang\s+mengklaim\b", r"\bdengan\s+(?:klaim|narasi)\b", r"\bnarasi\s+yang\s+beredar\b",
           r"\bpesan\s+berantai\b", r"\bdisebut-sebut\b", r"\bkonon(?:nya)?\b"),
    "tr": (r"\biddia\s+edil\w*", r"\biddiasıyla\b", r"\böne\s+sür\w+", r"\bileri\s+sür\w+", r"\bolduğu\s+iddia",
           r"\b(?:şeklinde|olarak)\s+paylaşıl\w+"),
    "tl": (r"\bsinasabi\s+ng\b", r"\b(?:post|posts|mensahe|netizen|netizens)\s+(?:na\s+)?nagsasabing\b",
           r"\bayon\s+sa\s+(?:isang\s+|mga\s+)?(?:post|posts|netizen|netizens|viral)\b", r"\bumano\b", r"\bdaw\b",
           r"\biginigiit\b"),
    "ceb": (r"\bmatod\s+sa\b", r"\bnag-ingon\s+ang\s+(?:mga\s+)?(?:post|netizen)", r"\bkono\b"),
    "th": (r"อ้างว่า", r"มีการแชร์", r"แชร์ข้อความ", r"ข่าวลือว่า", r"ว่ากันว่า", r"แห่แชร์"),
    "no": (r"\bhevd(?:er|ar|es)\b", r"\bpåst(?:år|od|ås)\b", r"\bskal\s+vis[ea]\b", r"\bangivelig\b", r"\bflorerer\b"),
    "zh": (r"聲稱|声称|宣稱|宣称|指稱|指称|據稱|据称|謠傳|谣传|有人話|有人說|有人说", r"網傳「|网传「", r"流傳一[張段則篇個]|流传一[张段则篇个]",
           r"圖卡稱|图卡称"),
}
# a report form inside an "as claimed" clause is the fact-checker's aside, not the text's report ("..., जैसा कि वायरल
# पोस्ट में दावा किया गया है")
_AS_CLAIMED = re.compile(r"जैसा\s+(?:कि|की)\s+[^।.!?]*$")
_CLAUSE_END = re.compile(r"[.!?\u061f\u0964;\n]")
_TOKEN = re.compile(r"[^\W\d_][\w'\u2019\u064b-\u065f-]*|\d+")


def _report_language(language: str) -> str:
    code = canonical_language(language)
    return "ceb" if (language or "").casefold().startswith("ceb") else code


@once
def _report_patterns(language: str) -> dict:
    code = _report_language(language)
    merged = lambda table: _alternatives([*table["en"], *table.get(code, ())])  # noqa: E731
    forms = [*REPORT_FORMS["en"], *REPORT_FORMS.get(code, ())]
    return {
        "forms": re.compile("|".join(f"(?:{f})" for f in forms), re.IGNORECASE),
        "subject": re.compile(rf"(?<![\w'])(?:{_lists(language)['noun']}|{merged(SOURCES)})(?!\w)", re.IGNORECASE),
        "source": re.compile(rf"(?:{merged(SOURCES)})$", re.IGNORECASE),
        "verb": re.compile(rf"(?:{merged(REPORT_VERBS)})(?!\w)", re.IGNORECASE),
        "share": re.compile(rf"(?:{merged(SHARE_VERBS)})(?!\w)", re.IGNORECASE),
        "stop": {w.casefold() for w in (*STOPPERS["en"], *STOPPERS.get(code, ()))},
        "preposition": {w.casefold() for w in (*PREPOSITIONS["en"], *PREPOSITIONS.get(code, ()))},
        "gap": GAP.get(code, GAP_DEFAULT),
    }


def _subject_reports(text: str, language: str) -> bool:
    """A claim noun or source at the head of a clause (within its first SUBJECT_WITHIN words, not inside a
    prepositional phrase, not a news item of a named outlet), and within a few words of it (no verb of showing, no
    modal, no sentence end between) a verb that says it claims, or a verb of sharing after a source."""
    p = _report_patterns(language)
    for subject in p["subject"].finditer(text):
        clause = text[:subject.start()]
        clause = clause[max((m.end() for m in _CLAUSE_START.finditer(clause)), default=0):]
        previous = [w.casefold() for w in _TOKEN.findall(clause)]
        if len(previous) >= SUBJECT_WITHIN or (previous and (previous[-1] in p["preposition"] or (
                len(previous) >= 2 and previous[-1] in DETERMINERS and previous[-2] in p["preposition"]))):
            continue
        rest = text[subject.end():]
        if _NAMED_OUTLET.match(rest):
            continue
        end = _CLAUSE_END.search(rest)
        rest = rest[:end.start()] if end else rest
        source = bool(p["source"].search(subject.group()))
        for n, word in enumerate(_TOKEN.finditer(rest)):
            if n > p["gap"] or word.group().casefold() in p["stop"]:
                break
            at = rest[word.start():]
            if p["verb"].match(at) or (source and p["share"].match(at)):
                return True
    return False


def reports_a_claim(text: str, language: str) -> bool:
    """The text reports that someone claims something ("Facebook posts claim X", "Video shared to make misleading
    claim that ...", "सोशल मीडिया पर दावा किया जा रहा है कि ...") instead of asserting it: as a claim it is true
    whatever X is, and its label would invert. A claim about what a medium shows ("A video posted on TikTok shows
    ...", "Video shows X saying ...", "Photo of the alleged ...") is no report."""
    for form in _report_patterns(language)["forms"].finditer(text):
        if not _AS_CLAIMED.search(text[:form.start()]):
            return True
    return _subject_reports(text, language)
