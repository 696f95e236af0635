"""Stage 4: recover where each claim appeared (social posts, archived copies) and download the candidate media."""

import datetime as dt
import multiprocessing
import re
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import unquote, urljoin, urlsplit

import dagster as dg
import lxml.html

from assets.ensemble.asking import ask
from assets.ensemble.llm_stage import finish_llm_stage
from assets.scraping import platforms
from assets.scraping.fetch_log import fetch_metadata
from assets.scraping.links import (
    canonical,
    cited_as_evidence,
    never_a_post,
    position_in,
    text_url_sentence,
    urls_in_text,
)
from assets.scraping.workers import (
    STATE,
    WORKER_DIED,
    alone,
    forked_pool,
    in_chunks,
    retry_dead,
)
from assets.stage.record_errors import ErrorBudget, RecordError, map_records
from assets.stage.tables import (
    StageYield,
    count,
    finish_stage,
    llm_metadata,
    load_upstream,
)
from assets.stage.wiring import quarter_of_context, stage_asset
from dagster_project.resources.crawl_ytdlp import VideoError, download_video
from dagster_project.resources.llm import LLMResource
from dagster_project.resources.media import MediaError, MediaStore
from dagster_project.resources.store import StoreResource
from dagster_project.resources.web import WebResource
from dagster_project.stage_settings import ErrorBudgetSettings, ScrapingSettings
from schemas.answers import AppearanceChoiceAnswer
from schemas.records import Appearance, Article, ClaimAppearances, Medium, TrustedReview

STAGE = "appearances"

PLATFORMS = {
    "x": ("twitter.com", "x.com", "mobile.twitter.com"),
    "facebook": ("facebook.com", "fb.watch", "m.facebook.com"),
    "instagram": ("instagram.com",),
    "tiktok": ("tiktok.com", "vm.tiktok.com"),
    "youtube": ("youtube.com", "youtu.be", "m.youtube.com"),
    "telegram": ("t.me", "telegram.me"),
    "bluesky": ("bsky.app",),
    "whatsapp": ("wa.me", "whatsapp.com", "chat.whatsapp.com"),
    "vk": ("vk.com",),
    "weibo": ("weibo.com",),
}
# What a post (not a profile or a home page) looks like on each platform.
POST_PATH = {
    "x": re.compile(r"^/[^/]+/status(es)?/\d+|^/i/(web/)?status/\d+"),
    # /share/p/<id> is a post link, /share.php and /sharer/ are share buttons
    "facebook": re.compile(r"/(posts|videos|photos|permalink|story|watch|reel)[/?]|/share/|/(permalink|story)\.php|story_fbid=|/photo\.php|fbid="),
    "instagram": re.compile(r"^/(p|reel|tv)/[\w-]+"),
    "tiktok": re.compile(r"/video/\d+|^/t/\w+|^/\w{6,}/?$|^/embed(/v\d)?/\d+"),  # embed: a player iframe's post
    "youtube": re.compile(r"^/(watch|shorts/|embed/|live/)|^/[\w-]{11}$"),
    "telegram": re.compile(r"^/[\w_]+/\d+"),
    "bluesky": re.compile(r"^/profile/[^/]+/post/\w+"),
    "whatsapp": re.compile(r"^/channel/[\w-]+/\d+"),  # channel posts only; wa.me / send links are share buttons
    "vk": re.compile(r"wall-?\d+_\d+|video-?\d+_\d+"),
    "weibo": re.compile(r"^/\d+/\w+"),
}
ARCHIVE_TODAY = ("archive.today", "archive.ph", "archive.is", "archive.li", "archive.md", "archive.fo", "archive.vn")
INLINE_SKIP = re.compile(r"\.svg(\?|$)|^data:|/(logo|icon|sprite|avatar|badge|pixel)[^/]*$", re.IGNORECASE)
SHORTENERS = ("t.co", "bit.ly", "ow.ly", "tinyurl.com", "buff.ly", "fb.me", "goo.gl", "is.gd", "rb.gy", "shorturl.at", "lnkd.in", "dlvr.it")


def _host(url: str) -> str:
    host = (urlsplit(url).hostname or "").lower()
    return host.removeprefix("www.")


def _host_in(host: str, domains: tuple[str, ...]) -> bool:
    return any(host == d or host.endswith("." + d) for d in domains)


def platform_of(url: str) -> str:
    host = _host(url)
    for name, domains in PLATFORMS.items():
        if _host_in(host, domains):
            return name
    return "other"


def is_post(url: str) -> bool:
    """A link to a post on a known platform (profiles and home pages are not appearances)."""
    platform = platform_of(url)
    if platform == "other":
        return False
    parts = urlsplit(url)
    return bool(POST_PATH[platform].search(parts.path + ("?" + parts.query if parts.query else "")))


def archive_kind(url: str) -> str:
    host = _host(url)
    if host == "web.archive.org":
        return "wayback"
    if _host_in(host, ARCHIVE_TODAY):
        return "archive_today"
    if host == "perma.cc":
        return "perma"
    if _host_in(host, ("ghostarchive.org",)):
        return "ghostarchive"
    return ""


def original_from_archive_url(url: str) -> str:
    """The original URL when the archive link spells it out (Wayback, archive.today long links, ghostarchive search)."""
    match = re.search(r"/(?:web|save)/(?:[\d*]{1,14}[a-z_]*/)?(https?:/{1,2}.+)$", url)
    if match and archive_kind(url) == "wayback":
        return re.sub(r"^(https?:)/+", r"\1//", match.group(1))
    # archive.today long links carry the capture time as 20200407101500 or 2020.04.07-101500
    match = re.search(r"/(?:\d{14}|\d{4}\.\d{2}\.\d{2}-\d{6}|newest|oldest)/(https?://.+)$", url)
    if match and archive_kind(url) == "archive_today":
        return match.group(1)
    match = re.search(r"[?&]term=(https?[^&]+)", url)
    if match and archive_kind(url) == "ghostarchive":
        return unquote(match.group(1))
    return ""


def original_from_archive_page(html: str, base_url: str) -> str:
    """Short archive codes (archive.ph/AbCd1, perma.cc/XXXX-XXXX) are resolved from the archived page itself."""
    doc = lxml.html.fromstring(html)
    for xpath in (
        "//input[@id='SHARE_LONGLINK']/@value",
        "//a[contains(concat(' ', normalize-space(@class), ' '), ' original-url ')]/@href",  # perma.cc record page
        "//meta[@property='og:url']/@content",
        "//link[@rel='canonical']/@href",
    ):
        for value in doc.xpath(xpath):
            candidate = original_from_archive_url(value) or value
            if candidate.startswith("http") and not archive_kind(candidate):
                return candidate
    for href in doc.xpath("//a/@href"):
        url = urljoin(base_url, href)
        if is_post(url):
            return url
    return ""


# What a media URL may answer with (the bytes are sniffed anyway); an HTML login page is refused unread.
MEDIA_TYPES = ("image/", "video/", "application/octet-stream", "binary/octet-stream", "application/mp4")
# Posts whose media is a video that yt-dlp can extract from the platform page.
VIDEO_POST = re.compile(
    r"youtube\.com/(watch|shorts/|live/)|youtu\.be/|tiktok\.com/.+/video/|vm\.tiktok\.com/|"
    r"facebook\.com/.*(/videos/|/reel/|/watch)|fb\.watch/|instagram\.com/(reel|tv)/|\.(mp4|webm|mov|m4v)(\?|$)",
    re.IGNORECASE,
)


def accept_llm_choice(chosen: list[str], review: TrustedReview, article: Article) -> tuple[list[str], list[str]]:
    """(accepted, rejected): a URL a model picked counts only if it is literally in the article (a link, a video
    link, an image or its text) or in the ClaimReview; anything else may be invented and is never used."""
    literal = set(article.links) | set(article.video_urls) | {i.src for i in article.images} | set(review.appearance_urls)
    accepted, rejected = [], []
    for url in chosen:
        url = url.strip() if isinstance(url, str) else ""
        whole = url.startswith(("http://", "https://")) and (url in literal or _whole_url_in(url, article.text))
        (accepted if whole else rejected).append(url)
    return list(dict.fromkeys(accepted)), rejected


def _whole_url_in(url: str, text: str) -> bool:
    """The URL occurs in the text as a whole (not as the prefix of a longer URL)."""
    return re.search(re.escape(url) + r"(?![\w/%?=&#.-]*[\w/%?=&#-])", text) is not None


def candidate_links(review: TrustedReview, article: Article) -> list[str]:
    """ClaimReview appearances first, then the article's post, archive and short links in page order (its links
    with the posts it embeds, then the URLs written in its text), one link per post (``links.canonical``). A link
    whose sentence cites it as evidence (``links.cited_as_evidence``: the original a clip was cut from, a denial,
    a source) is left out; the chooser still sees it among the article's other links."""
    text_urls = urls_in_text(article.text)
    sentences = {c.url: c.sentence for c in article.link_contexts}
    sentences.update({url: text_url_sentence(article.text, url) for url in text_urls if url not in sentences})
    found = [*article.links, *text_urls]
    out, seen = [], set()
    for link in [*review.appearance_urls, *(link for link in found if _may_be_appearance(link))]:
        key = canonical(link)
        if key in seen:
            continue
        seen.add(key)
        sentence = sentences.get(link, "") if link not in review.appearance_urls else ""
        if sentence and cited_as_evidence(sentence, position_in(article.text, sentence)):
            continue
        out.append(link)
    return out


def _may_be_appearance(link: str) -> bool:
    """A post, a short link that may hide one, or an archive capture of anything but a profile or home page."""
    if is_post(link):
        return True
    if archive_kind(link):
        path = urlsplit(link).path
        listed = re.match(r"^/(?:newest/|oldest/)?(https?:/.+)", path) if archive_kind(link) == "archive_today" else None
        original = original_from_archive_url(link) or (re.sub(r"^(https?:)/+", r"\1//", listed.group(1)) if listed else "")
        if "/web/*/" in link or listed:
            return False  # a list of an address's captures, not a capture
        return not original or platform_of(original) == "other" or is_post(original)
    return _host(link) in SHORTENERS and bool(urlsplit(link).path.strip("/")) and not never_a_post(link)


def page_media(html: str, base_url: str) -> tuple[str, list[str]]:
    """The post's text and media URLs from Open Graph / Twitter cards and inline media."""
    doc = lxml.html.fromstring(html)

    def meta(*names: str) -> list[str]:
        return [
            v.strip()
            for n in names
            for v in doc.xpath(f"//meta[@property='{n}' or @name='{n}']/@content")
            if v.strip()
        ]

    text = " ".join((meta("og:description", "twitter:description") or meta("og:title", "twitter:title") or [""])[:1])
    urls = meta("og:video", "og:video:url", "og:video:secure_url", "twitter:player:stream")
    urls += doc.xpath("//video/@src | //video/source/@src")
    urls += meta("og:image", "og:image:url", "twitter:image", "twitter:image:src")
    if not urls:
        # archive.today captures carry no Open Graph tags for the original; its images are plain <img>s
        urls = [u for u in doc.xpath("//img/@src") if u.strip() and not INLINE_SKIP.search(u.strip())]
    return text, list(dict.fromkeys(urljoin(base_url, u.strip()) for u in urls))


class Recoverer:
    """Fetches appearances (original first, archive as fallback) and stores their media."""

    def __init__(self, web: WebResource, media: MediaStore, scraping: ScrapingSettings):
        self.web, self.media, self.scraping = web, media, scraping

    def download(self, url: str, origin: str, alt: str = "", caption: str = "") -> tuple[Medium | None, str]:
        result = self.web.fetch(url, content_types=MEDIA_TYPES, reuse=True)
        if not result.ok:
            return None, f"fetch_failed:{result.error or result.status}"
        try:
            stored = self.media.put(result.content, result.content_type)
        except MediaError as err:
            return None, f"media:{err.code}"
        return Medium(
            medium_id=stored.sha256, kind=stored.kind, path=stored.path, width=stored.width, height=stored.height,
            phash=stored.phash, source_url=url, origin=origin, alt=alt, caption=caption,
            frame_paths=list(stored.frame_paths),
        ), ""

    def download_video(self, url: str, origin: str) -> tuple[Medium | None, str, dict]:
        """A video page or file through yt-dlp (its requests go through the web resource), stored with its frames."""
        try:
            data, info = download_video(self.web, url, self.media.max_video_bytes, self.media.max_video_seconds)
            stored = self.media.put_video(data)
        except VideoError as err:
            return None, f"video:{err.code}", {}
        except MediaError as err:
            return None, f"media:{err.code}", {}
        return Medium(
            medium_id=stored.sha256, kind="video", path=stored.path, width=stored.width, height=stored.height,
            phash=stored.phash, source_url=url, origin=origin, caption=str(info.get("title") or ""),
            frame_paths=list(stored.frame_paths),
        ), "", info

    def resolve(self, link: str) -> tuple[str, str]:
        """(original URL, archive URL) for a candidate link; short links are expanded."""
        if _host(link) in SHORTENERS:
            result = self.web.fetch(link, reuse=True)
            link = result.final_url if result.final_url != link and (result.ok or result.redirects) else link
        if not archive_kind(link):
            return link, ""
        original = original_from_archive_url(link)
        if not original:
            page = self.web.fetch(link, reuse=True)
            original = original_from_archive_page(page.text(), page.final_url) if page.ok else ""
        return original, link

    def recover(self, link: str, when: dt.date | None = None) -> tuple[Appearance, list[Medium]]:
        appearance, media = self._recover(link, when)
        appearance.media_count = len(media)
        return appearance, media

    def _recover(self, link: str, when: dt.date | None = None) -> tuple[Appearance, list[Medium]]:
        """The appearance behind ``link`` and its media, through the first way in that serves media: yt-dlp for
        video posts, the platform's public endpoints, the post page, a linked archive copy, then the archives
        (the capture nearest ``when``, the claim date). A way that finds text but no media is remembered and used
        only when no later way finds media. ``appearance.way`` names the way in that served, ``attempts`` every
        way tried with its outcome."""
        original, archive = self.resolve(link)
        platform = platform_of(original or link)
        appearance = Appearance(url=link, original_url=original or link, platform=platform)
        settings = self.scraping.platforms
        errors: list[str] = []
        text_only: tuple[str, str, str] | None = None  # (way, fetched url, text)

        def failed(way: str, reason: str) -> None:
            appearance.attempts.append(f"{way}:{reason}")
            errors.append(reason if way in (platforms.PAGE, platforms.LINKED_ARCHIVE, platforms.YTDLP) else f"{way}:{reason}")

        def served(way: str, url: str, text: str) -> None:
            appearance.attempts.append(f"{way}:served")
            appearance.status, appearance.fetched_url, appearance.text, appearance.way = "ok", url, text, way

        def downloaded(urls: list[str]) -> tuple[list[Medium], str]:
            media, last = [], ""
            for media_url in urls[: self.scraping.max_candidate_media]:
                medium, err = self.download(media_url, "appearance")
                if medium:
                    media.append(medium)
                last = last or err
            return media, last

        if original and VIDEO_POST.search(original):
            video, err, info = self.download_video(original, "appearance")
            if video is not None:
                served(platforms.YTDLP, original, str(info.get("description") or info.get("title") or ""))
                return appearance, [video]
            failed(platforms.YTDLP, err)
        ask = platforms.Ask(self.web, settings, original, platform, when, page_media) if original else None

        def through(ways: list[str]) -> list[Medium]:
            """The media of the first of ``ways`` that serves some; a way with text only is remembered."""
            nonlocal text_only
            for way in ways if ask else []:
                outcome = self._try_way(way, ask, downloaded)
                if isinstance(outcome, str):
                    if outcome != "not_configured":  # a paid backend without its key is not tried at all
                        failed(way, outcome)
                    continue
                found, media = outcome
                if media:
                    served(way, found.url, found.text)
                    return media
                appearance.attempts.append(f"{way}:text_only")
                text_only = text_only or (way, found.url, found.text)
            return []

        if media := through(platforms.ways_before(platform, settings)):
            return appearance, media
        pages = [(platforms.PAGE, original), (platforms.LINKED_ARCHIVE, archive)]
        for way, url in [(w, u) for w, u in pages if u]:
            page = self.web.fetch(url, reuse=True)
            if not page.ok:
                failed(way, f"fetch_failed:{page.error or page.status}")
                continue
            if page.content_type.startswith(("image/", "video/")):
                medium, err = self.download(page.final_url, "appearance")
                media, text = ([medium] if medium else []), ""
            else:
                if settings.enabled and platforms.is_login_page(page.text(), page.final_url):
                    failed(way, "login_wall")
                    continue
                text, urls = page_media(page.text(), page.final_url)
                media, _ = downloaded(urls)
            if media or not settings.enabled:
                served(way, url, text)
                return appearance, media
            appearance.attempts.append(f"{way}:text_only")  # e.g. an X shell page: no media in its HTML
            text_only = text_only or (way, url, text)
        if media := through(platforms.ways_after(settings)):
            return appearance, media
        if text_only is not None:
            way, url, text = text_only
            appearance.status, appearance.fetched_url, appearance.text, appearance.way = "ok", url, text, way
            return appearance, []
        appearance.error = ";".join(errors) or "unresolved_archive"
        return appearance, []

    def _try_way(self, way: str, ask, downloaded):
        """(what the way found, its downloaded media), or the drop reason."""
        try:
            found = platforms.run_way(way, ask)
        except platforms.WayError as err:
            return err.reason
        media, err = downloaded(found.media)
        if found.media and not media:
            return f"media_failed:{err}"
        return found, media


def chooser_options(candidates: list[str], article: Article, limit: int) -> list[str]:
    """What a chooser sees: the candidate links first, then the article's other outbound links, at most ``limit``."""
    return list(dict.fromkeys(candidates + [link for link in article.links if _host(link)]))[: max(0, limit)]


def model_chooser(llm: LLMResource, member: str, max_urls: int):
    """A chooser that asks one ensemble member (cached and ledgered like every call). A failed or invalid answer
    chooses nothing, so the links keep their page order."""
    llm.member(member)  # an unknown member is a config error: fail before the first claim

    def choose(review: TrustedReview, article: Article, options: list[str]) -> list[str]:
        ans = ask(llm, member, "choose_appearance", AppearanceChoiceAnswer, stage=STAGE, max_string=1000,
                  claim=review.claim_text, review_url=review.review_url, links=options, max_urls=max_urls)
        return list((ans.parsed or {}).get("urls") or [])

    return choose


def recover_claim(
    review: TrustedReview, article: Article, recoverer: Recoverer, scraping: ScrapingSettings, chooser=None,
    rejected: list[str] | None = None,
) -> ClaimAppearances:
    """At most ``max_appearances`` usable appearances, then the article's videos and images as further candidates.

    ``chooser(review, article, options) -> list[str]`` (e.g. ``model_chooser``) may put links first, among the
    candidates and the article's other outbound links; what it names that is not literally in the article or
    the ClaimReview is dropped (and listed in ``rejected``). The candidates are still tried after its picks.
    """
    appearances: list[Appearance] = []
    media: list[Medium] = []
    by_original: dict[str, Appearance] = {}
    links = candidate_links(review, article)
    if chooser is not None:
        options = chooser_options(links, article, scraping.chooser_max_links)
        if len(options) >= 2:  # with one link or none there is nothing to choose: it is tried anyway
            accepted, refused = accept_llm_choice(list(chooser(review, article, options)), review, article)
            if rejected is not None:
                rejected.extend(refused)
            links = list(dict.fromkeys(accepted + links))
    for link in links:
        if sum(a.status == "ok" for a in appearances) >= scraping.max_appearances:
            break
        appearance, found = recoverer.recover(link, review.claim_date)
        previous = by_original.get(appearance.original_url)
        if previous is not None:
            if previous.status == "ok" or appearance.status != "ok":
                continue  # an archived copy of a post we already have (or a second failure for it)
            appearances.remove(previous)  # a separately linked archive copy stands in for the dead original
        by_original[appearance.original_url] = appearance
        appearances.append(appearance)
        media.extend(found)
    for video_url in article.video_urls:
        if len(media) >= scraping.max_candidate_media:
            break
        medium, _, _ = recoverer.download_video(video_url, "article")
        if medium:
            media.append(medium)
    for image in article.images:
        if len(media) >= scraping.max_candidate_media:
            break
        medium, _ = recoverer.download(image.src, "article", image.alt, image.caption)
        if medium:
            media.append(medium)
    unique = list({m.medium_id: m for m in media}.values())
    return ClaimAppearances(**review.model_dump(), appearances=appearances, media=unique)


def count_ways(stats: StageYield, appearance: Appearance) -> None:
    """Per platform and way in: ``way/<platform>/<way>/tried``, ``.../served`` (the way the appearance kept),
    ``.../text_only`` and ``.../failed/<reason>``; and ``media_by_way/<platform>/<way>`` for usable appearances."""
    for attempt in appearance.attempts:
        way, _, outcome = attempt.partition(":")
        prefix = f"way/{appearance.platform}/{way}"
        count(stats, f"{prefix}/tried")
        if outcome == "served" or (outcome == "text_only" and way == appearance.way):
            count(stats, f"{prefix}/served")
        elif outcome == "text_only":
            count(stats, f"{prefix}/text_only")
        else:
            count(stats, f"{prefix}/failed/{outcome}")
    count(stats, f"media_yield/{appearance.platform}/appearances")
    if appearance.media_count:
        count(stats, f"media_yield/{appearance.platform}/with_media")


# Claims in flight. Live, fetches wait on the network and on per-host politeness. Replayed, they are CPU work
# (archive reading, image decoding and encoding, ffmpeg): in one process the rehearsal's 3,421 claims took 41.5 s on
# 8 threads, 37.0 s on 4, 37.6 s on 3 and 40.8 s on 2; in 2 processes (scraping.scrape_workers) 28.3-29.1 s on 2
# threads each and 31.1 s on 4 each. So replayed claims are spread over the processes, REPLAY_THREADS in all.
LIVE_THREADS, REPLAY_THREADS = 8, 4
REPLAY_CHUNK = 16  # replayed claims per task of a worker process (scraping.scrape_workers, as stage 3's)


def _recover_one(recoverer: Recoverer, scraping: ScrapingSettings, review: TrustedReview | None, article: Article,
                 chooser=None) -> tuple[ClaimAppearances | None, Exception | None, list[str]]:
    refused: list[str] = []
    try:
        if review is None:
            raise KeyError(f"no trusted review {article.review_id} for the article")
        return recover_claim(review, article, recoverer, scraping, chooser, refused), None, refused
    except Exception as err:  # noqa: BLE001 - counted as a drop by map_records
        return None, err, refused


def _recover_chunk(pairs: list[tuple[TrustedReview | None, Article]]) -> tuple[list, list[dict]]:
    """Worker entry (replay mode): a few claims on the worker's threads; the error of a claim that raised crosses
    back as its drop reason, the fetch-log entries go back to the parent's log."""
    recoverer, scraping, threads = STATE["recoverer"], STATE["scraping"], STATE["threads"]
    mark = recoverer.web.fetch_log_size()
    with ThreadPoolExecutor(threads) as pool:
        done = list(pool.map(lambda pair: _recover_one(recoverer, scraping, *pair), pairs))
    return [(claim, None if err is None else RecordError.of(err), refused) for claim, err, refused in done], \
        recoverer.web.fetch_log(since=mark)


def _recover_in_processes(pairs: list, recoverer: Recoverer, scraping: ScrapingSettings, processes: int,
                          threads: int, log=None) -> list:
    """``_recover_one`` of every pair on ``processes`` forked workers, ``threads`` threads in all, in input order.
    A worker that dies (killed for memory, a crash in an image or video decoder) fails every claim it had and the
    pool with it; those claims are tried again one at a time (``retry_dead``)."""
    recoverer.web.load_replay_index()  # once, before the fork
    pool = forked_pool(processes, recoverer=recoverer, scraping=scraping, threads=max(1, threads // processes))
    try:
        out = in_chunks(pool, _recover_chunk, pairs, REPLAY_CHUNK, recoverer.web, lambda reason: (None, reason, []),
                        log, lambda done: f"{STAGE}: {done}/{len(pairs)} recovered on {processes} processes")
    finally:
        pool.shutdown(cancel_futures=True)
    retry_dead(out, pairs, lambda: forked_pool(1, recoverer=recoverer, scraping=scraping, threads=1),
               lambda one, pair: alone(one, _recover_chunk, pair, recoverer.web), (None, WORKER_DIED, []), log, STAGE,
               "claims")
    return out


def recover_all(
    reviews: list[TrustedReview], articles: list[Article], recoverer: Recoverer, scraping: ScrapingSettings,
    error_budget: ErrorBudgetSettings, log=None, threads: int = LIVE_THREADS, chooser=None, processes: int = 1,
) -> tuple[list[ClaimAppearances], StageYield]:
    """Claims run on ``threads`` threads: their fetches wait on the network and on per-host politeness, so
    several claims in flight keep the web resource busy. Replayed and without a chooser (a model), on
    ``processes`` forked processes, ``threads`` in all, where the work is CPU (``REPLAY_THREADS``). Results keep
    the input order, and are the same either way."""
    by_id = {r.review_id: r for r in reviews}
    stats = StageYield(len(articles))
    pairs = [(by_id.get(a.review_id), a) for a in articles]
    if processes > 1 and recoverer.web.mode == "replay" and chooser is None \
            and not multiprocessing.current_process().daemon:  # a daemonic process (Celery's) starts no children
        recovered = _recover_in_processes(pairs, recoverer, scraping, processes, threads, log)
    else:
        with ThreadPoolExecutor(max(1, threads)) as pool:
            recovered = list(pool.map(lambda pair: _recover_one(recoverer, scraping, *pair, chooser), pairs))
    if chooser is not None:
        stats.extra["chooser/refused_urls"] = sum(len(r[2]) for r in recovered)
        stats.extra["chooser/claims_with_refusals"] = sum(1 for r in recovered if r[2])

    def one(outcome):
        claim, err, _ = outcome
        if isinstance(err, str):  # raised in a worker process (a RecordError), or the worker died
            return None, err
        if err is not None:
            raise err
        usable = [a for a in claim.appearances if a.status == "ok"]
        for a in usable:
            count(stats, f"platform/{a.platform}")
        for a in claim.appearances:  # fetch success by platform, failures included
            count(stats, f"fetch/{a.platform}/{'ok' if a.status == 'ok' else 'failed'}")
            count_ways(stats, a)
        if usable or not scraping.require_appearance:
            return claim, ""
        return None, "appearances_unreachable" if claim.appearances else "no_appearance_found"

    budget = ErrorBudget.for_stage(error_budget, STAGE, len(articles), log)
    return map_records(STAGE, list(zip(articles, recovered)), lambda pair: one(pair[1]), stats, log, budget), stats


@stage_asset(
    "scraping",
    "Stage 4: original posts and archived copies (max 2 usable per claim) and their downloaded media.",
    deps=("articles", "trusted_reviews"),
    pool="web",
)
def appearances(
    context: dg.AssetExecutionContext, scraping: ScrapingSettings, error_budget: ErrorBudgetSettings,
    store: StoreResource, web: WebResource, llm: LLMResource,
) -> dg.MaterializeResult:
    quarter = quarter_of_context(context)
    bad: list = []  # upstream rows that fail validation
    recoverer = Recoverer(web, store.media_store(), scraping)
    chooser = None
    if scraping.appearance_chooser:
        chooser = model_chooser(llm, scraping.appearance_chooser, scraping.max_appearances + 1)
    mark = len(web.fetch_log())
    out, stats = recover_all(
        load_upstream(store, "trusted_reviews", quarter, TrustedReview, bad),
        load_upstream(store, "articles", quarter, Article, bad),
        recoverer,
        scraping,
        error_budget,
        context.log,
        threads=REPLAY_THREADS if web.mode == "replay" else LIVE_THREADS,
        chooser=chooser,
        processes=scraping.scrape_workers,
    )
    stats.extra["media"] = sum(len(c.media) for c in out)
    stats.extra.update(fetch_metadata(web.fetch_log(since=mark)))
    if chooser is not None:
        llm.check_stage(STAGE, context.run_id)  # a dead chooser model fails the stage before its table is written
        stats.extra.update(llm_metadata(llm, STAGE, context.run_id))
    result = finish_stage(context, store, STAGE, quarter, out, ClaimAppearances, stats, bad)
    return result if chooser is None else finish_llm_stage(result, llm, store, STAGE, quarter, context.run_id)
