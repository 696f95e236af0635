"""Stage 4's ways in to a post besides its page: public endpoints (tried before the page) and archives (after it).

Each way in is a function ``(Ask) -> Served`` that raises ``WayError(reason)`` with a short drop reason; every
request goes through the web resource (politeness, SSRF guard, caps, retries, WARC). ``Recoverer.recover`` in
``appearances.py`` runs them in the order of ``ways_before`` / ``ARCHIVES`` and records which one served.

Reasons are grouped by their first word so that ``veritas web check`` can say what went wrong:
``unreachable:*`` (no answer), ``refused:*`` (401/403/429, login walls, a missing key), ``shape:*`` (an answer that
is not what the service used to send), anything else (the service answered: not found, unavailable, no capture).
"""

import datetime as dt
import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlencode, urlsplit

import lxml.html

from dagster_project.resources.web import FetchResult, WebResource
from dagster_project.stage_settings import PlatformSettings

# Ways in before the post page, per platform (yt-dlp for video posts runs before these; see appearances.py).
BEFORE = {
    "x": ("x_api", "x_syndication", "x_oembed"),
    "instagram": ("instagram_embed",),
    "tiktok": ("tiktok_oembed",),
    "youtube": ("youtube_oembed",),
    "telegram": ("telegram_embed",),
    "bluesky": ("bluesky_api",),
}
ARCHIVES = ("wayback", "archive_today")  # after the post page (and a linked archive copy), for any URL
# Where a way in needs no network: the names Recoverer uses for its own steps (counted like the others).
PAGE, LINKED_ARCHIVE, YTDLP = "page", "linked_archive", "ytdlp"
JSON_TYPES = ("application/json", "text/javascript", "application/javascript", "text/plain")


class WayError(Exception):
    """A way in that did not serve: ``reason`` is the drop reason counted in the stage's metadata."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class Served:
    """What a way in found: the post's text and its media URLs (images or video files), best first."""

    text: str = ""
    media: list[str] = field(default_factory=list)
    url: str = ""  # the request that served it (an API URL, an embed page, an archive capture)


@dataclass
class Ask:
    """One request for a post: its URL (the original, not an archive link), platform and the claim date."""

    web: WebResource
    settings: PlatformSettings
    url: str
    platform: str
    when: dt.date | None = None
    # (html, base URL) -> (text, media URLs): how an archived page is read (appearances.page_media, Open Graph
    # first); passed in, so that this module does not import the stage that imports it
    read_page: Callable[[str, str], tuple[str, list[str]]] | None = None


def ways_before(platform: str, settings: PlatformSettings) -> list[str]:
    """The endpoints tried before the post page for this platform, as configured: a paid backend first (the X API;
    Firecrawl where the platform is in ``firecrawl_platforms``), then the public endpoints."""
    if not settings.enabled:
        return []
    ways = list(BEFORE.get(platform, ()))
    if platform in settings.firecrawl_platforms:
        ways.insert(1 if ways[:1] == ["x_api"] else 0, "firecrawl")
    return [w for w in ways if w in settings.ways]


def ways_after(settings: PlatformSettings) -> list[str]:
    """The archives tried after the post page."""
    if not settings.enabled:
        return []
    return [w for w in ARCHIVES if w in settings.ways]


def run_way(name: str, ask: Ask) -> Served:
    """Run one way in; a way that does not apply to the URL raises ``WayError('not_applicable')``."""
    return WAYS[name](ask)


# ---- HTTP helpers ---------------------------------------------------------------------------------------------


def _get(ask: Ask, url: str, headers: dict | None = None, content_types=None) -> FetchResult:
    """GET through the web resource; anything but a 2xx raises with the reason the services' answers mean."""
    return _check(ask.web.fetch(url, headers, reuse=True, content_types=content_types))


def _check(result: FetchResult) -> FetchResult:
    if result.error:
        if result.error == "not_archived":
            raise WayError("unreachable:not_archived")  # replay of a run that never asked
        if result.error == "bad_content_type":
            raise WayError(f"shape:content_type:{result.content_type or 'none'}")
        if result.error in ("robots_disallowed", "blocked_address", "bad_scheme", "bad_url"):
            raise WayError(f"refused:{result.error}")  # refused by the web resource itself, before any answer
        if result.error in ("redirect_loop", "too_many_redirects", "too_large", "truncated", "damaged_in_archive"):
            raise WayError(f"shape:{result.error}")  # an answer, but not one a way in can read
        raise WayError(f"unreachable:{result.error}")  # connect_error, timeout, read_error, http_error...
    status = result.status or 0
    if status == 429:
        raise WayError("refused:rate_limited")
    if status in (401, 403):
        raise WayError(f"refused:http_{status}")
    if status in (404, 410):
        raise WayError("not_found")
    if not 200 <= status < 300:
        raise WayError(f"http_{status}")
    return result


def _json(result: FetchResult):
    try:
        return json.loads(result.content.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise WayError("shape:not_json") from None


def _doc(result: FetchResult):
    text = result.text()
    if not text.strip():
        raise WayError("shape:empty_page")
    try:
        return lxml.html.fromstring(text)
    except (lxml.etree.ParserError, ValueError):
        raise WayError("shape:not_html") from None


def _clean(text: str) -> str:
    return re.sub(r"\s+", " ", text or "").strip()


def _media_of(text: str, media: list[str], url: str) -> Served:
    return Served(text=_clean(text), media=list(dict.fromkeys(m for m in media if m)), url=url)


LOGIN_PATH = re.compile(r"/(accounts/login|login(\.php)?|i/flow/login|checkpoint|signin)(/|\?|$)", re.IGNORECASE)


def is_login_page(html: str, url: str = "") -> bool:
    """A login wall: the URL is a login path, or the page holds a password field or points its og:url at one."""
    if LOGIN_PATH.search(urlsplit(url).path + ("?" if urlsplit(url).query else "")):
        return True
    try:
        doc = lxml.html.fromstring(html)
    except (lxml.etree.ParserError, ValueError):
        return False
    if doc.xpath("//input[@type='password']"):
        return True
    return any(LOGIN_PATH.search(urlsplit(u).path) for u in doc.xpath("//meta[@property='og:url']/@content"))


# ---- X / Twitter ----------------------------------------------------------------------------------------------

X_STATUS = re.compile(r"/status(?:es)?/(\d+)")


def tweet_id(url: str) -> str:
    match = X_STATUS.search(urlsplit(url).path)
    if not match:
        raise WayError("not_applicable")
    return match.group(1)


def syndication_token(post_id: str) -> str:
    """The token parameter embed widgets send: (id / 1e15 * pi) written in base 36 without zeros and the point."""
    value = int(post_id) / 1e15 * math.pi
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    whole, frac = int(value), value - int(value)
    out = ""
    while whole:
        whole, rest = divmod(whole, 36)
        out = digits[rest] + out
    out = (out or "0") + "."
    for _ in range(11):  # a double holds about 11 base-36 digits of fraction
        frac *= 36
        out += digits[int(frac)]
        frac -= int(frac)
    return re.sub(r"0+|\.", "", out)


def best_mp4(variants: list[dict], url_key: str = "url", rate_key: str = "bitrate") -> str:
    """The mp4 variant with the highest bitrate (HLS playlists are skipped: the media store wants a file)."""
    mp4 = [v for v in variants or [] if str(v.get("content_type") or v.get("type") or "").startswith("video/mp4")]
    mp4.sort(key=lambda v: -(v.get(rate_key) or 0))
    return str(mp4[0].get(url_key) or "") if mp4 else ""


def x_syndication_request(post_id: str, settings: PlatformSettings) -> str:
    return f"{settings.x_syndication_url}?{urlencode({'id': post_id, 'lang': 'en', 'token': syndication_token(post_id)})}"


def x_syndication(ask: Ask) -> Served:
    """cdn.syndication.twimg.com/tweet-result: the JSON X's embed widgets read (text, photos, video variants)."""
    post_id = tweet_id(ask.url)
    url = x_syndication_request(post_id, ask.settings)
    data = _json(_get(ask, url, content_types=JSON_TYPES))
    if not isinstance(data, dict):
        raise WayError("shape:not_an_object")
    kind = data.get("__typename")
    if not data or kind == "TweetTombstone":
        raise WayError("tweet_unavailable")  # deleted, withheld, age-gated or from a protected account
    if kind not in (None, "Tweet") or "id_str" not in data:
        raise WayError(f"shape:typename:{kind}")
    media = []
    for item in data.get("mediaDetails") or []:
        if item.get("type") in ("video", "animated_gif"):
            media.append(best_mp4((item.get("video_info") or {}).get("variants") or []))
        media.append(item.get("media_url_https") or "")  # the photo, or the video's poster frame
    return _media_of(data.get("text") or "", media, url)


def x_oembed(ask: Ask) -> Served:
    """publish.x.com/oembed: the post's text inside the embed blockquote (no media)."""
    tweet_id(ask.url)
    url = f"{ask.settings.x_oembed_url}?{urlencode({'url': ask.url})}"
    data = _json(_get(ask, url, content_types=JSON_TYPES))
    html = data.get("html") if isinstance(data, dict) else None
    if not html:
        raise WayError("shape:no_html")
    paragraphs = lxml.html.fromstring(html).xpath("//blockquote//p")
    if not paragraphs:
        raise WayError("shape:no_text")
    return _media_of(" ".join(p.text_content() for p in paragraphs), [], url)


def x_api(ask: Ask) -> Served:
    """X API v2 tweet lookup (paid): used when the configured variable holds a bearer token."""
    post_id = tweet_id(ask.url)
    token = os.environ.get(ask.settings.x_api_key_env or "", "").strip()
    if not token:
        raise WayError("not_configured")
    query = urlencode({
        "expansions": "attachments.media_keys",
        "media.fields": "type,url,preview_image_url,variants",
        "tweet.fields": "text",
    })
    url = f"{ask.settings.x_api_url}/{post_id}?{query}"
    data = _json(_get(ask, url, headers={"Authorization": f"Bearer {token}"}, content_types=JSON_TYPES))
    if not isinstance(data, dict):
        raise WayError("shape:not_an_object")
    if "data" not in data:
        titles = [str(e.get("title") or e.get("type") or "") for e in data.get("errors") or []]
        if any("Not Found" in t or "not-found" in t for t in titles):
            raise WayError("not_found")
        if any("Authorization" in t or "Forbidden" in t for t in titles):
            raise WayError("refused:not_authorized")
        raise WayError("shape:no_data")
    media = []
    for item in (data.get("includes") or {}).get("media") or []:
        if item.get("type") in ("video", "animated_gif"):
            media.append(best_mp4(item.get("variants") or [], rate_key="bit_rate"))
            media.append(item.get("preview_image_url") or "")
        else:
            media.append(item.get("url") or "")
    return _media_of(data["data"].get("text") or "", media, url)


def firecrawl(ask: Ask) -> Served:
    """Firecrawl's scrape API (paid): the page as its browser saw it, read from the Open Graph fields it returns."""
    token = os.environ.get(ask.settings.firecrawl_key_env or "", "").strip()
    if ask.platform not in ask.settings.firecrawl_platforms or not token:
        raise WayError("not_configured")
    body = json.dumps({"url": ask.url, "formats": ["markdown"], "onlyMainContent": True}, sort_keys=True).encode()
    result = ask.web.fetch(ask.settings.firecrawl_url, {"Authorization": f"Bearer {token}",
                                                        "Content-Type": "application/json"},
                           reuse=True, content_types=JSON_TYPES, method="POST", data=body)
    if result.status == 402:
        raise WayError("refused:payment_required")  # the account's credits are spent
    data = _json(_check(result))
    if not isinstance(data, dict) or not data.get("success") or not isinstance(data.get("data"), dict):
        raise WayError("shape:no_data")
    page = data["data"]
    meta = page.get("metadata") or {}
    status = meta.get("statusCode")
    if isinstance(status, int) and status >= 400:
        raise WayError("not_found" if status in (404, 410) else f"page_http_{status}")
    if is_login_page(page.get("html") or "", str(meta.get("url") or meta.get("sourceURL") or "")):
        raise WayError("refused:login_wall")
    media = []
    for key in ("ogImage", "og:image", "twitter:image"):
        value = meta.get(key)
        media += value if isinstance(value, list) else [value]
    text = meta.get("ogDescription") or meta.get("og:description") or meta.get("description") or ""
    return _media_of(str(text or page.get("markdown") or "")[:5000], [m for m in media if isinstance(m, str)],
                     ask.settings.firecrawl_url)


# ---- Instagram, TikTok, YouTube, Telegram, Bluesky ------------------------------------------------------------

INSTAGRAM_POST = re.compile(r"^/(?:[\w.]+/)?(p|reel|reels|tv)/([\w-]+)")


def instagram_embed_request(post_url: str, settings: PlatformSettings) -> str:
    match = INSTAGRAM_POST.search(urlsplit(post_url).path)
    if not match:
        raise WayError("not_applicable")
    return f"{settings.instagram_url}/p/{match.group(2)}/embed/captioned/"


def instagram_embed(ask: Ask) -> Served:
    """The public embed page of a post (<instagram>/p/<code>/embed/captioned/): its image and caption."""
    url = instagram_embed_request(ask.url, ask.settings)
    result = _get(ask, url)
    if is_login_page(result.text(), result.final_url):
        raise WayError("refused:login_wall")
    doc = _doc(result)
    images = doc.xpath("//img[contains(concat(' ', normalize-space(@class), ' '), ' EmbeddedMediaImage ')]/@src")
    videos = doc.xpath("//video/@src")
    if not images and not videos:
        # private, deleted and age-restricted posts answer with an embed page that has no media
        raise WayError("post_unavailable")
    caption = doc.xpath("//div[contains(concat(' ', normalize-space(@class), ' '), ' Caption ')]")
    text = caption[0].text_content() if caption else ""
    return _media_of(text, videos + images, url)


def oembed_request(post_url: str, endpoint: str, extra: dict | None = None) -> str:
    return f"{endpoint}?{urlencode({'url': post_url, **(extra or {})})}"


def _oembed(ask: Ask, endpoint: str, extra: dict | None = None) -> tuple[dict, str]:
    url = oembed_request(ask.url, endpoint, extra)
    data = _json(_get(ask, url, content_types=JSON_TYPES))
    if not isinstance(data, dict):
        raise WayError("shape:not_an_object")
    if "code" in data and "title" not in data:  # TikTok answers errors as {"code": 400, "message": ...}
        raise WayError("not_found")
    return data, url


def tiktok_oembed(ask: Ask) -> Served:
    """TikTok's oEmbed: the title, the author and the thumbnail (the video itself comes from yt-dlp)."""
    data, url = _oembed(ask, ask.settings.tiktok_oembed_url)
    if not data.get("thumbnail_url") and not data.get("title"):
        raise WayError("shape:no_title_or_thumbnail")
    author = data.get("author_name") or ""
    return _media_of(f"{data.get('title') or ''}{f' ({author})' if author else ''}", [data.get("thumbnail_url")], url)


def youtube_oembed(ask: Ask) -> Served:
    """YouTube's oEmbed: the title and the thumbnail, for when yt-dlp cannot get the video."""
    data, url = _oembed(ask, ask.settings.youtube_oembed_url, {"format": "json"})
    if not data.get("thumbnail_url") and not data.get("title"):
        raise WayError("shape:no_title_or_thumbnail")
    return _media_of(data.get("title") or "", [data.get("thumbnail_url")], url)


TELEGRAM_POST = re.compile(r"^/(?:s/)?([\w_]+)/(\d+)")
BACKGROUND_URL = re.compile(r"background-image:\s*url\(['\"]?([^'\")]+)")


def telegram_embed(ask: Ask) -> Served:
    """The public ?embed=1 view of a channel post: its text, photos and video files."""
    match = TELEGRAM_POST.search(urlsplit(ask.url).path)
    if not match:
        raise WayError("not_applicable")
    url = f"{ask.settings.telegram_url}/{match.group(1)}/{match.group(2)}?embed=1"
    doc = _doc(_get(ask, url))
    if doc.xpath("//*[contains(@class, 'tgme_widget_message_error')]"):
        raise WayError("post_not_found")  # deleted posts and private channels
    if not doc.xpath("//*[contains(@class, 'tgme_widget_message')]"):
        raise WayError("shape:no_message")
    texts = doc.xpath("//div[contains(concat(' ', normalize-space(@class), ' '), ' tgme_widget_message_text ')]")
    photos = [m.group(1) for style in doc.xpath("//*[contains(@class, 'tgme_widget_message_photo_wrap')]/@style")
              if (m := BACKGROUND_URL.search(style))]
    videos = doc.xpath("//video[contains(@class, 'tgme_widget_message_video')]/@src")
    return _media_of(texts[0].text_content() if texts else "", videos + photos, url)


BLUESKY_POST = re.compile(r"^/profile/([^/]+)/post/([\w]+)")


def bluesky_api(ask: Ask) -> Served:
    """Bluesky's public AppView, app.bsky.feed.getPostThread: the post's text and its images (or video thumbnail)."""
    match = BLUESKY_POST.search(urlsplit(ask.url).path)
    if not match:
        raise WayError("not_applicable")
    uri = f"at://{match.group(1)}/app.bsky.feed.post/{match.group(2)}"
    url = f"{ask.settings.bluesky_appview_url}/xrpc/app.bsky.feed.getPostThread?{urlencode({'uri': uri, 'depth': 0, 'parentHeight': 0})}"
    result = ask.web.fetch(url, reuse=True, content_types=JSON_TYPES)
    if result.status == 400 and not result.error:  # the XRPC error body: {"error": "NotFound", "message": ...}
        body = _json(result) if result.content else {}
        error = str(body.get("error") or "") if isinstance(body, dict) else ""
        raise WayError("post_not_found" if error == "NotFound" else f"http_400:{error or 'no_error_name'}")
    data = _json(_check(result))
    thread = data.get("thread") if isinstance(data, dict) else None
    kind = str((thread or {}).get("$type") or "")
    if kind.endswith("#notFoundPost"):
        raise WayError("post_not_found")
    if kind.endswith("#blockedPost"):
        raise WayError("refused:blocked")
    post = (thread or {}).get("post")
    if not isinstance(post, dict):
        raise WayError(f"shape:thread:{kind or 'missing'}")
    embed = post.get("embed") or {}
    embed = embed.get("media") or embed  # recordWithMedia: the media beside the quoted post
    media = [i.get("fullsize") or i.get("thumb") or "" for i in embed.get("images") or []]
    media.append(embed.get("thumbnail") or "")  # a video's poster frame (its HLS playlist is no file)
    return _media_of((post.get("record") or {}).get("text") or "", media, url)


# ---- archives -------------------------------------------------------------------------------------------------


def _stamp(when: dt.date | None) -> str:
    return when.strftime("%Y%m%d") if when else ""


def _distance(timestamp: str, when: dt.date | None) -> float:
    if not when:
        return -float(timestamp[:14].ljust(14, "0"))  # no date: the newest capture
    try:
        taken = dt.datetime.strptime(timestamp[:8], "%Y%m%d").date()
    except ValueError:
        return float("inf")
    return abs((taken - when).days)


def wayback_capture(ask: Ask) -> tuple[str, str]:
    """(timestamp, original URL) of the capture nearest the claim date: the availability API, then the CDX API."""
    target = ask.url
    notes = []
    try:
        query = {"url": target, **({"timestamp": _stamp(ask.when)} if ask.when else {})}
        data = _json(_get(ask, f"{ask.settings.wayback_available_url}?{urlencode(query)}", content_types=JSON_TYPES))
        closest = ((data or {}).get("archived_snapshots") or {}).get("closest") or {}
        if closest.get("available") and str(closest.get("status", "200")).startswith("2") and closest.get("timestamp"):
            return str(closest["timestamp"]), target
        notes.append("no_capture")
    except WayError as err:
        notes.append(err.reason)
    query = {"url": target, "limit": ask.settings.wayback_cdx_limit}
    if ask.when:
        query |= {"from": _stamp(ask.when - dt.timedelta(days=366)), "to": _stamp(ask.when + dt.timedelta(days=366))}
    try:
        result = _get(ask, f"{ask.settings.wayback_cdx_url}?{urlencode(query)}", content_types=JSON_TYPES)
    except WayError as err:
        if err.reason == "refused:http_403":
            raise WayError("refused:blocked_site") from None  # "AdministrativeAccessControlException: Blocked Site"
        raise
    rows = []
    for line in result.text().splitlines():
        parts = line.split()
        # urlkey timestamp original mimetype statuscode digest length
        if len(parts) >= 5 and parts[1].isdigit() and parts[4] in ("200", "-"):
            rows.append((parts[1], parts[2]))
    if not rows:
        if result.text().strip() and not any(len(line.split()) >= 5 for line in result.text().splitlines()):
            raise WayError("shape:cdx_lines")
        raise WayError("no_capture")
    timestamp, original = min(rows, key=lambda r: _distance(r[0], ask.when))
    return timestamp, original


def wayback(ask: Ask) -> Served:
    """The Wayback capture nearest the claim date, fetched raw (the id_ flag); its media from captures too."""
    timestamp, original = wayback_capture(ask)
    base = ask.settings.wayback_web_url
    url = f"{base}/{timestamp}id_/{original}"
    result = ask.web.fetch(url, reuse=True)
    if result.status and not 200 <= result.status < 300 and "memento-datetime" in result.headers:
        # the capture itself is an error page the site gave the crawler (e.g. an archived 429): not the post
        raise WayError(f"capture_is_error_page:{result.status}")
    try:
        _check(result)
    except WayError as err:
        raise WayError("no_capture" if err.reason == "not_found" else err.reason) from None
    return _archived_page(ask, result, original, lambda m: m if m.startswith(base) else f"{base}/{timestamp}id_/{m}")


def archive_today(ask: Ask) -> Served:
    """archive.today's newest capture of the URL (<archive.today>/newest/<url>)."""
    url = f"{ask.settings.archive_today_url}/newest/{ask.url}"
    try:
        result = _get(ask, url)
    except WayError as err:
        raise WayError("no_capture" if err.reason == "not_found" else err.reason) from None
    return _archived_page(ask, result, result.final_url, lambda media: media)


def _archived_page(ask: Ask, result: FetchResult, base_url: str, rewrite) -> Served:
    if ask.read_page is None:
        raise WayError("not_applicable")  # a caller that reads no pages
    if result.content_type.startswith(("image/", "video/")):
        return Served(media=[result.final_url], url=result.final_url)
    html = result.text()
    if is_login_page(html, result.final_url) or is_login_page(html, base_url):
        raise WayError("capture_is_login_page")
    text, media = ask.read_page(html, base_url)
    if not media and not text:
        raise WayError("capture_without_content")
    return _media_of(text, [rewrite(m) for m in media], result.final_url)


WAYS = {
    "x_api": x_api,
    "firecrawl": firecrawl,
    "x_syndication": x_syndication,
    "x_oembed": x_oembed,
    "instagram_embed": instagram_embed,
    "tiktok_oembed": tiktok_oembed,
    "youtube_oembed": youtube_oembed,
    "telegram_embed": telegram_embed,
    "bluesky_api": bluesky_api,
    "wayback": wayback,
    "archive_today": archive_today,
}
