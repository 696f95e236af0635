"""Which of a fact-check page's links can be where the claim appeared.

Three things real pages get wrong for a naive link scan (issue 26):

* page chrome: share buttons, the publisher's own social accounts and the footer's "send us a tip" short links
  repeat on every page of a site; links inside the header, footer, navigation, asides and share / follow /
  subscribe / app / ad blocks are not the article's links (``in_chrome``);
* embedded posts: a twitter-tweet or Instagram blockquote, a TikTok blockquote, a Facebook ``fb-post`` div or its
  plugin iframe, a YouTube iframe name their post in an attribute or a query parameter that the main-text
  extractor drops (``embedded_posts``); the links inside an embed are the embedded post's own media and mentions;
* URLs written in the text keep the punctuation of the sentence around them (``urls_in_text``).

``canonical`` is the key two spellings of one post share (fragments and tracking parameters dropped, the latter
with courlan's list plus the platforms' own share tags).
"""

import re
from urllib.parse import parse_qs, parse_qsl, unquote, urlencode, urljoin, urlsplit, urlunsplit

from courlan.clean import clean_query

# class or id tokens of page chrome: a token is a word of the class or id (``footer-main`` has ``footer``); these
# match whole tokens, the prefixes also compounds (``downloadapp``, ``bannerpilar``, ``subscribe``)
CHROME_TOKENS = {"ad", "ads", "app", "apps", "aside", "toolbar", "nav", "menu", "share", "sharing", "sharer",
                 "social", "follow", "widget", "related", "promo", "masthead"}
CHROME_PREFIXES = ("footer", "header", "navbar", "sidebar", "subscri", "newsletter", "banner", "advert", "breadcrumb",
                   "download", "cookie", "sharebar", "socialshare")
CHROME_TAGS = {"header", "footer", "nav", "aside"}
# wrappers of embedded posts carry words like "social" (``social-embed``); they are content, never chrome
EMBED_CLASSES = ("twitter-tweet", "instagram-media", "tiktok-embed", "fb-post", "fb-video", "fb-xfbml-parse-ignore")
_TOKEN = re.compile(r"[^a-z0-9]+")

# query parameters that only say where a link was clicked, beyond courlan's tracker list (``utm_*``, ``ref_src``,
# ``igshid``, ...): platform share tags, and on these hosts only (elsewhere ``t`` may be a start time)
PLATFORM_TRACKING = {"twitter.com": {"s", "t"}, "x.com": {"s", "t"}, "youtube.com": {"si", "feature"},
                     "youtu.be": {"si", "feature"}, "facebook.com": {"mibextid", "_rdc", "_rdr", "theater", "type",
                     "set", "__cft__", "__tn__"}, "instagram.com": {"hl"}}

# a URL in running text; what follows it in the sentence is trimmed by ``_trim``
_TEXT_URL = re.compile(r"https?://[^\s<>\"'`«»“”‘’]+", re.IGNORECASE)
_TRAILING = ".,;:!?…'\"’”»›。、，；：！？"
_PAIRS = {")": "(", "]": "[", "}": "{"}

# shorteners that never name a post: map links and the like
NOT_POSTS = re.compile(r"^(goo\.gl/maps/|maps\.app\.goo\.gl/|g\.co/kgs/)", re.IGNORECASE)


def _host(url: str) -> str:
    return (urlsplit(url).hostname or "").lower().removeprefix("www.").removeprefix("m.")


def _host_is(host: str, domains: tuple[str, ...]) -> bool:
    return any(host == d or host.endswith("." + d) for d in domains)


def _tokens(value: str) -> list[str]:
    return [t for t in _TOKEN.split(value.lower()) if t]


def is_chrome(el) -> bool:
    """The element is page chrome by its tag or a class / id token (``footer-subscription``, ``app-icons``)."""
    if not isinstance(el.tag, str):
        return False
    if el.tag in CHROME_TAGS:
        return True
    classes = (el.get("class") or "") + " " + (el.get("id") or "")
    if any(name in classes.split() for name in EMBED_CLASSES):
        return False
    return any(t in CHROME_TOKENS or t.startswith(CHROME_PREFIXES) for t in _tokens(classes))


def in_chrome(el, page_chars: int | None = None, sizes: dict | None = None) -> bool:
    """The element sits in page chrome (itself or an ancestor); the search stops at ``<article>`` and ``<main>``,
    so a share bar inside the article is chrome but the article element's own classes (``enable-pin-share``) are
    never read. With ``page_chars`` (the page's text length) a "chrome" element holding half the page's text or
    more is a wrapper of the whole page (``<div id="app">``, a ``nav-wrapper`` around everything), not chrome;
    ``sizes`` caches the text lengths across the calls for one page."""
    node = el
    while node is not None and node.tag not in ("article", "main", "body", "html"):
        if is_chrome(node):
            if page_chars is None:
                return True
            if sizes is None:
                sizes = {}
            if node not in sizes:
                sizes[node] = len(" ".join(node.text_content().split()))
            if 2 * sizes[node] < page_chars:
                return True
        node = node.getparent()
    return False


def page_chars(doc) -> int:
    """The length of the page's text, for ``in_chrome``."""
    body = doc.find("body") if doc.tag == "html" else doc
    return len(" ".join((body if body is not None else doc).text_content().split()))


def in_embed(el) -> bool:
    """The element is inside an embedded post (its own media links, mentions and hashtags)."""
    for node in el.iterancestors():
        classes = (node.get("class") or "").split()
        if node.tag == "blockquote" and any(c in EMBED_CLASSES for c in classes):
            return True
    return False


def _youtube_id(url: str) -> str:
    match = re.search(r"(?:youtube(?:-nocookie)?\.com/(?:embed|shorts|live)/|youtu\.be/)([\w-]{11})", url)
    return match.group(1) if match else ""


def embed_url(src: str, base_url: str = "") -> str:
    """The post an embed iframe shows (YouTube, Facebook's plugins, Instagram, TikTok, X), or "" for anything else."""
    src = urljoin(base_url, src.strip()) if src.strip() else ""
    if src.startswith("//"):
        src = "https:" + src
    if not src.startswith(("http://", "https://")):
        return ""
    host, parts = _host(src), urlsplit(src)
    if _host_is(host, ("youtube.com", "youtube-nocookie.com", "youtu.be")):
        video = _youtube_id(src)
        return f"https://www.youtube.com/watch?v={video}" if video else ""
    if _host_is(host, ("facebook.com",)) and parts.path.startswith("/plugins/"):
        href = parse_qs(parts.query).get("href", [""])[0]
        return href if href.startswith(("http://", "https://")) else ""
    if _host_is(host, ("instagram.com",)):
        match = re.match(r"/(p|reel|tv)/([\w-]+)", parts.path)
        return f"https://www.instagram.com/{match.group(1)}/{match.group(2)}/" if match else ""
    if _host_is(host, ("tiktok.com",)):
        match = re.search(r"/embed(?:/v\d)?/(\d{8,})", parts.path)
        return f"https://www.tiktok.com/embed/v2/{match.group(1)}" if match else ""
    if _host_is(host, ("platform.twitter.com",)) or host == "platform.twitter.com":
        tweet = parse_qs(parts.query).get("id", [""])[0]
        return f"https://twitter.com/i/status/{tweet}" if tweet.isdigit() else ""
    return ""


def embed_of(el, base_url: str) -> str:
    """The post one element embeds, or "": a twitter-tweet blockquote (its permalink), an Instagram or TikTok
    blockquote, a Facebook ``fb-post`` / ``fb-video`` div, a platform player iframe (``src`` or a lazy loader's
    ``data-src``)."""
    classes = (el.get("class") or "").split() if isinstance(el.tag, str) else []
    url = ""
    if el.tag == "blockquote" and "twitter-tweet" in classes:
        statuses = [a.get("href") or "" for a in el.iter("a") if "/status/" in (a.get("href") or "")]
        url = statuses[-1] if statuses else ""  # the date link at the end is the tweet's permalink
    elif el.tag == "blockquote" and "instagram-media" in classes:
        url = el.get("data-instgrm-permalink") or ""
    elif el.tag == "blockquote" and "tiktok-embed" in classes:
        url = el.get("cite") or ""
    elif el.tag == "div" and ("fb-post" in classes or "fb-video" in classes):
        url = el.get("data-href") or ""
    elif el.tag == "iframe":
        for attr in ("src", "data-src", "data-lazy-src"):
            url = embed_url(el.get(attr) or "", base_url)
            if url:
                break
    url = urljoin(base_url, url.strip()) if url.strip() else ""
    return url if url.startswith(("http://", "https://")) else ""


def embedded_posts(doc, base_url: str) -> list[str]:
    """Every post the page embeds, in page order."""
    found = (embed_of(el, base_url) for el in doc.iter("blockquote", "div", "iframe"))
    return list(dict.fromkeys(url for url in found if url))


def _trim(url: str) -> str:
    """Drop the sentence's punctuation after a URL; a closing bracket stays when the URL opened it."""
    while url:
        last = url[-1]
        if last in _TRAILING:
            url = url[:-1]
        elif last in _PAIRS and url.count(_PAIRS[last]) < url.count(last):
            url = url[:-1]
        else:
            break
    return url


def urls_in_text(text: str) -> list[str]:
    """http(s) URLs written in the text, without the punctuation that ends their sentence."""
    out = []
    for match in _TEXT_URL.finditer(text or ""):
        url = _trim(match.group(0))
        if urlsplit(url).hostname:
            out.append(url)
    return list(dict.fromkeys(out))


def canonical(url: str) -> str:
    """One key for the spellings of one link: no fragment, no tracking parameters, a lower-case host, no trailing
    slash, ``m.``/``www.`` hosts and the ``/photo/1``, ``/video/1`` suffixes of a tweet folded."""
    url = _trim(url.strip())
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    bare = host.removeprefix("www.").removeprefix("m.").removeprefix("mobile.")

    extra = next((keys for domain, keys in PLATFORM_TRACKING.items() if _host_is(bare, (domain,))), set())
    query = urlencode([(k, v) for k, v in parse_qsl(clean_query(parts.query), keep_blank_values=True)
                       if k not in extra])
    path = parts.path
    if _host_is(bare, ("twitter.com", "x.com")):
        bare = "twitter.com"
        path = re.sub(r"(/status/\d+)/(photo|video)/\d+$", r"\1", path)
    if _host_is(bare, ("youtube.com", "youtu.be")):
        video = _youtube_id(url) or parse_qs(parts.query).get("v", [""])[0]
        if video:
            return f"youtube.com/watch?v={video}"
    return urlunsplit(("", bare, unquote(path).rstrip("/"), query, "")).lstrip("/")


def never_a_post(url: str) -> bool:
    """Short links that are known not to name a post (map links)."""
    parts = urlsplit(url)
    return bool(NOT_POSTS.match((parts.hostname or "").lower().removeprefix("www.") + parts.path))


# --- the words around a link: does the check cite it as where the claim appeared, or as evidence against it? ---
# Stems matched at the start of a word (``shar`` matches "shared", "sharing"); scripts written without spaces
# between words (Chinese) and the Arabic script (whose articles and conjunctions join the word) match anywhere.
# One list per role, in the corpus' languages: en es pt fr de hi bn ar id tl zh.
APPEARANCE_CUES = (
    # en
    "shared", "sharing", "viral", "circulat", "claim", "post", "archive", "users", "netizen", "doing the rounds",
    "making the rounds",
    # es / pt / fr
    "compart", "circul", "viraliz", "publicaciones", "publicações", "usuari", "usuári", "internauta", "difund",
    "archiv", "arquiv", "partag", "publications", "internaute", "utilisateur",
    # de
    "geteilt", "teilen", "verbreit", "kursier", "beitr", "nutzer", "user",
    # hi / bn
    "शेयर", "वायरल", "पोस्ट", "दावा", "दावे", "आर्काइव", "यूजर", "यूज़र", "শেয়ার", "ভাইরাল", "পোস্ট", "দাবি", "আর্কাইভ",
    # ar
    "تداول", "متداول", "منشور", "انتشر", "ادعاء", "أرشيف", "مستخدم", "حسابات",
    # id / tl
    "beredar", "dibagikan", "membagikan", "unggahan", "warganet", "arsip", "kumakalat", "kumalat", "ibinahagi",
    # zh
    "流傳", "流传", "轉傳", "转传", "網傳", "网传", "瘋傳", "疯传", "貼文", "帖文", "聲稱", "声称", "存檔", "存档",
)
EVIDENCE_CUES = (
    # en
    "original", "source", "according to", "said", "says", "statement", "official", "reverse", "search", "found",
    "report", "website", "denied", "clarif", "study", "data", "interview", "speech", "channel", "press release",
    "confirm", "told",
    # es / pt
    "fuente", "según", "oficial", "búsqueda", "busca", "desmint", "negó", "negou", "comunicado", "explic", "declar",
    "sitio web", "informe", "entrevista", "canal", "fonte", "segundo", "pesquisa", "divulgou", "nota", "site",
    # fr / de
    "selon", "officiel", "recherche", "dément", "démenti", "quelle", "laut", "offiziell", "suche",
    # hi / bn
    "मूल", "स्रोत", "अनुसार", "आधिकारिक", "सर्च", "खोज", "रिपोर्ट", "बयान", "সূত্র", "অনুযায়ী", "সার্চ", "রিপোর্ট", "বিবৃতি",
    # ar
    "الأصلي", "مصدر", "مصادر", "وفق", "الرسمي", "البحث", "العكسي", "نفى", "بيان", "تقرير", "تقارير", "القناة",
    # id / tl
    "asli", "sumber", "menurut", "resmi", "penelusuran", "membantah", "pernyataan", "laporan", "situs", "orihinal",
    "ayon sa", "opisyal", "sinabi", "ulat",
    # zh
    "原始", "來源", "来源", "根據", "根据", "官方", "搜尋", "搜索", "澄清", "聲明", "声明", "報導", "报道",
)
_SPACELESS = re.compile(r"[\u0600-\u06ff\u3040-\u30ff\u3400-\u9fff]")
_SENTENCE_END = re.compile(r"[.!?।॥。！？؟]+(?=\s|$)")
# blocks whose text is the link's paragraph
TEXT_BLOCKS = {"p", "li", "blockquote", "figcaption", "td", "dd", "h1", "h2", "h3", "h4", "h5", "h6"}


def _cue_pattern(cues: tuple[str, ...]) -> re.Pattern:
    spaced = sorted((c for c in cues if not _SPACELESS.search(c)), key=len, reverse=True)
    joined = sorted((c for c in cues if _SPACELESS.search(c)), key=len, reverse=True)
    parts = [r"(?<!\w)(?:" + "|".join(map(re.escape, spaced)) + ")"] if spaced else []
    parts += ["(?:" + "|".join(map(re.escape, joined)) + ")"] if joined else []
    return re.compile("|".join(parts), re.IGNORECASE)


_APPEARANCE = _cue_pattern(APPEARANCE_CUES)
_EVIDENCE = _cue_pattern(EVIDENCE_CUES)


# past this share of the article's text a check has usually moved from where the claim went round to the evidence
LATE = 0.4


def cues(text: str) -> tuple[int, int]:
    """(appearance cues, evidence cues) in a link's sentence."""
    text = " ".join((text or "").split())
    return len(_APPEARANCE.findall(text)), len(_EVIDENCE.findall(text))


def position_in(text: str, sentence: str) -> float:
    """Where the sentence starts in the article's text, 0 to 1 (0 when the extractor did not keep it)."""
    start = text.find(" ".join(sentence.split())[:40]) if sentence.strip() and text else -1
    return start / len(text) if start > 0 else 0.0


def cited_as_evidence(sentence: str, position: float) -> bool:
    """The link's sentence says the check cites it as evidence: its evidence cues outnumber its appearance cues
    by two, or, past ``LATE`` of the article, are not outnumbered by them. A sentence without cues early in the
    article keeps its link (the claim's posts are mostly cited first, in few words: "shared here, here")."""
    appearance, evidence = cues(sentence)
    if position > LATE:
        evidence += 2
    return evidence - appearance >= 2


def text_url_sentence(text: str, url: str) -> str:
    """The sentence a URL written in the text sits in."""
    start = text.find(url)
    if start < 0:
        return ""
    return _sentence_around(text[:start], url, text[start + len(url):])


def _preceding_blocks(el, levels: int = 4):
    """The elements before ``el``, nearest first, climbing at most ``levels`` ancestors."""
    node = el
    for _ in range(levels):
        for sibling in node.itersiblings(preceding=True):
            if isinstance(sibling.tag, str) and sibling.tag not in ("script", "style"):
                yield sibling
        node = node.getparent()
        if node is None or node.tag in ("article", "main", "body"):
            return


def _sentence_around(before: str, anchor: str, after: str) -> str:
    """The sentence the anchor sits in: from the last sentence end before it to the first one after it."""
    ends = list(_SENTENCE_END.finditer(before))
    start = before[ends[-1].end():] if ends else before
    end = _SENTENCE_END.search(after)
    tail = after[: end.end()] if end else after
    return " ".join(f"{start[-300:]}{anchor}{tail[:300]}".split())


def link_context(el) -> tuple[str, str]:
    """(anchor text, the sentence the link sits in). An embedded post has no anchor: its sentence is the last one
    before the embed (the text that introduces it), as the embed's own text is the post's."""
    if el.tag != "a":
        for node in _preceding_blocks(el):
            text = " ".join(node.text_content().split())
            if text:
                ends = list(_SENTENCE_END.finditer(text[:-1]))
                return "", (text[ends[-1].end():] if ends else text)[-300:].strip()
        return "", ""
    block = next((a for a in el.iterancestors() if a.tag in TEXT_BLOCKS), el.getparent())
    order = {node: i for i, node in enumerate(block.iter())}
    inner = {node for node in el.iter()}
    parts: dict[str, list[str]] = {"before": [], "inside": [], "after": []}
    for text in block.xpath(".//text()"):
        owner = text.getparent()
        if owner in inner and not (text.is_tail and owner is el):
            part = "inside"
        elif text.is_tail:
            later = owner is el or order[owner] > order[el] or el in set(owner.iterdescendants())
            part = "after" if later else "before"
        else:
            part = "after" if order[owner] > order[el] else "before"
        parts[part].append(str(text))
    anchor = " ".join("".join(parts["inside"]).split())
    return anchor, _sentence_around("".join(parts["before"]), "".join(parts["inside"]), "".join(parts["after"]))
