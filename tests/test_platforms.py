"""Stage 4's ways in (assets/scraping/platforms.py) at the HTTP boundary, on loopback only.

One loopback server stands in for the services: the public endpoints (configured to its address) answer with
responses recorded from the real services (tests/fixtures/platforms/, origins in tests/fixtures/README.md), and the
post pages and media hosts (mapped to 127.0.0.1 by the packet guard) answer as the tests script them. The recorded
bodies are served unchanged except that their media URLs are pointed at the loopback server (scheme and port).
"""

import io
import json
import os
import re
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import numpy as np
import pytest
from PIL import Image
from warcio.archiveiterator import ArchiveIterator

from assets.scraping import platforms
from assets.scraping.appearances import Recoverer, count_ways, recover_claim
from assets.stage.tables import StageYield
from dagster_project.core.dashboard import media_yield, way_table
from dagster_project.resources.media import MediaStore
from dagster_project.resources.web import WebResource
from dagster_project.stage_settings import PlatformSettings, ScrapingSettings
from dagster_project.yield_report import way_lines
from schemas.records import Article, TrustedReview
from tests.loopback_web import LoopbackServer, PacketGuard, Reply
from tests.test_crawl_stages import _mp4  # the same 1 s clip the crawl tests serve

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "platforms"
# hosts of the post pages and of the media the recordings name; the packet guard resolves them to 127.0.0.1
PAGE_HOSTS = ["x.com", "www.instagram.com", "www.tiktok.com", "www.youtube.com", "t.me", "bsky.app", "www.zew.de",
              "www.example.org",
              "www.facebook.com"]
MEDIA_HOSTS = ["pbs.twimg.com", "video.twimg.com", "p19-pu-sign-useast8.tiktokcdn-us.com", "i.ytimg.com",
               "cdn1.telegram-cdn.org", "bsky.public.url", "scontent.cdninstagram.com", "exa.imgix.net"]
ALLEY = "https://x.com/alleyco/status/1679189879086018562"
LK99 = "https://x.com/Rainmaker1973/status/1684218600456876032"
FIRECRAWL_DOC = "firecrawl_scrape_document_exa_api_evals.json"
TWITTERDEV = "https://x.com/TwitterDev/status/1293593516040269825"  # the post of the recorded X API v2 lookup


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def _jpeg(seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    im = Image.fromarray(rng.integers(0, 255, (96, 128, 3), dtype=np.uint8), "RGB")
    buf = io.BytesIO()
    im.save(buf, format="JPEG")
    return buf.getvalue()


MP4 = _mp4()


class Services:
    """The loopback server with its routes: (host, path prefix) -> Reply or a function of the request."""

    def __init__(self, server: LoopbackServer):
        self.server = server
        self.routes: dict[tuple[str, str], object] = {}

    @property
    def base(self) -> str:
        return self.server.base()

    def local(self, body: bytes) -> bytes:
        """A recorded body with its media hosts pointed at loopback (nothing else changes)."""
        for host in MEDIA_HOSTS:
            body = body.replace(f"https://{host}".encode(), f"http://{host}:{self.server.port}".encode())
        return body

    def page_url(self, url: str) -> str:
        """A post URL on its real host, served by loopback (http and the server's port)."""
        parts = urlsplit(url)
        return f"http://{parts.hostname}:{self.server.port}{parts.path}{'?' + parts.query if parts.query else ''}"

    def requests_to(self, prefix: str) -> list[str]:
        return [r.path for r in self.server.requests if r.path.startswith(prefix)]

    async def handle(self, request) -> Reply:
        host = request.host
        path = unquote(request.path)
        if host in MEDIA_HOSTS:
            if path.split("?")[0].endswith(".mp4"):
                return Reply(200, {"content-type": "video/mp4"}, MP4)
            return Reply(200, {"content-type": "image/jpeg"}, _jpeg(len(path)))
        best = None
        for (h, prefix), answer in self.routes.items():
            if (h == host or (h == "api" and host == "127.0.0.1")) and path.startswith(prefix):
                if best is None or len(prefix) > len(best[0]):
                    best = (prefix, answer)
        if best is None:
            return Reply(404, {"content-type": "text/html"}, b"<html><body>not here</body></html>")
        answer = best[1]
        return answer(request) if callable(answer) else answer


@pytest.fixture(scope="module")
def services():
    holder = {}

    async def handler(request):
        return await holder["services"].handle(request)

    with PacketGuard(names={h: "127.0.0.1" for h in PAGE_HOSTS + MEDIA_HOSTS}) as guard:
        with LoopbackServer(handler) as server:
            holder["services"] = Services(server)
            yield holder["services"]
    assert guard.violations == []


@pytest.fixture
def services_reset(services):
    services.routes = {}
    services.server.requests.clear()
    return services


def settings_for(services: Services, **overrides) -> PlatformSettings:
    base = services.base
    return PlatformSettings(**{
        "x_syndication_url": f"{base}/syndication/tweet-result",
        "x_oembed_url": f"{base}/xoembed",
        "x_api_url": f"{base}/2/tweets",
        "instagram_url": f"{base}/ig",
        "tiktok_oembed_url": f"{base}/tiktok/oembed",
        "youtube_oembed_url": f"{base}/yt/oembed",
        "telegram_url": f"{base}/tg",
        "bluesky_appview_url": f"{base}/bsky",
        "wayback_available_url": f"{base}/wayback/available",
        "wayback_cdx_url": f"{base}/cdx",
        "wayback_web_url": f"{base}/web",
        "archive_today_url": f"{base}/archive",
        **overrides,
    })


def make_recoverer(services: Services, tmp_path: Path, **overrides) -> Recoverer:
    web = WebResource(
        mode="live", archive_dir=str(tmp_path / "warc"), allow_private_hosts=["127.0.0.1", *PAGE_HOSTS, *MEDIA_HOSTS],
        per_host_delay_s=0.0, max_retries=0, connect_timeout_s=2.0, read_timeout_s=10.0,
    )
    scraping = ScrapingSettings(platforms=settings_for(services, **overrides), max_candidate_media=4)
    return Recoverer(web, MediaStore(str(tmp_path / "media")), scraping)


def json_reply(body: bytes, status: int = 200, headers: dict | None = None) -> Reply:
    return Reply(status, {"content-type": "application/json; charset=utf-8", **(headers or {})}, body)


def html_reply(body: bytes | str, status: int = 200, headers: dict | None = None) -> Reply:
    data = body.encode() if isinstance(body, str) else body
    return Reply(status, {"content-type": "text/html; charset=utf-8", **(headers or {})}, data)


NOTHING_ARCHIVED = {  # the archives answer "no capture" (the availability API's empty answer, an empty CDX list)
    ("api", "/wayback/available"): json_reply(b'{"archived_snapshots": {}}'),
    ("api", "/cdx"): Reply(200, {"content-type": "text/plain"}, b""),
    ("api", "/archive/newest/"): html_reply("<html><body>No results</body></html>", 404),
}
X_SHELL = html_reply('<!DOCTYPE html><html><head><title>X</title></head><body><noscript>JavaScript is not '
                     "available.</noscript><div id=\"react-root\"></div></body></html>")


def archived_authorization(warc: str, fragment: str) -> list[str]:
    """The Authorization header of every archived request whose URL holds ``fragment`` (the WARC is gzipped: its
    bytes are read through warcio, never searched raw)."""
    with open(warc, "rb") as fh:
        return [rec.http_headers.get_header("Authorization") for rec in ArchiveIterator(fh)
                if rec.rec_type == "request" and fragment in rec.rec_headers.get_header("WARC-Target-URI")]


def close(recoverer: Recoverer) -> None:
    recoverer.web.close()


# ---- X ----------------------------------------------------------------------------------------------------------


def test_x_syndication_serves_the_recorded_video_tweet(services_reset, tmp_path):
    s = services_reset
    s.routes[("api", "/syndication/tweet-result")] = json_reply(s.local(fixture("x_syndication_1684218600456876032.json")))
    r = make_recoverer(s, tmp_path)
    try:
        appearance, media = r.recover(LK99)
    finally:
        close(r)
    assert (appearance.status, appearance.way, appearance.platform) == ("ok", "x_syndication", "x")
    assert appearance.attempts == ["x_syndication:served"]
    assert appearance.text.startswith("For the first time in the world, researchers succeeded in synthesizing")
    # the highest-bitrate mp4 variant (2176000), then the poster frame; the HLS playlist is skipped
    assert [m.source_url.split("/", 3)[3] for m in media] == [
        "amplify_video/1684020091854225408/vid/886x546/_Mb5SBNFpaVehGMW.mp4?tag=14",
        "amplify_video_thumb/1684020091854225408/img/xtWb477NwDzZ1VvG.jpg",
    ]
    assert [m.kind for m in media] == ["video", "image"] and appearance.media_count == 2
    [request] = s.requests_to("/syndication/")
    query = parse_qs(urlsplit(request).query)
    assert query["id"] == ["1684218600456876032"] and query["token"] == [platforms.syndication_token("1684218600456876032")]
    assert s.requests_to("/xoembed") == []  # served: nothing after it is asked


def test_tombstone_falls_back_to_oembed_text_past_the_x_shell_and_empty_archives(services_reset, tmp_path):
    s = services_reset
    s.routes.update(NOTHING_ARCHIVED)
    # the tombstone shape X gives for deleted, withheld and protected posts (not a recording: see the README)
    s.routes[("api", "/syndication/")] = json_reply(b'{"__typename":"TweetTombstone","tombstone":{"text":{"text":"x"}}}')
    s.routes[("api", "/xoembed")] = json_reply(fixture("x_oembed_1679189879086018562.json"))
    s.routes[("x.com", "/alleyco/")] = X_SHELL
    r = make_recoverer(s, tmp_path)
    try:
        appearance, media = r.recover(s.page_url(ALLEY))
    finally:
        close(r)
    assert appearance.attempts == [
        "x_syndication:tweet_unavailable", "x_oembed:text_only", "page:text_only", "wayback:no_capture",
        "archive_today:no_capture",
    ]
    assert (appearance.status, appearance.way, media) == ("ok", "x_oembed", [])
    assert appearance.text.startswith("We’re a full-service digital agency with the foresight")
    assert appearance.fetched_url.startswith(s.base + "/xoembed?url=")


def test_rate_limited_syndication_and_a_deleted_post_give_their_reasons(services_reset, tmp_path):
    s = services_reset
    s.routes.update(NOTHING_ARCHIVED)
    s.routes[("api", "/syndication/")] = Reply(429, {"retry-after": "600", "content-type": "text/plain"}, b"")
    s.routes[("api", "/xoembed")] = Reply(404, {"content-type": "text/plain"}, b"")
    r = make_recoverer(s, tmp_path)
    try:
        appearance, media = r.recover(s.page_url(ALLEY))  # the page itself is gone too (404)
    finally:
        close(r)
    assert appearance.status == "failed" and media == []
    assert appearance.attempts == [
        "x_syndication:refused:rate_limited", "x_oembed:not_found", "page:fetch_failed:404", "wayback:no_capture",
        "archive_today:no_capture",
    ]
    assert appearance.error.split(";")[:2] == ["x_syndication:refused:rate_limited", "x_oembed:not_found"]


def with_x_api(s: Services, tmp_path: Path, monkeypatch, post_url: str, body: bytes):
    """Recover ``post_url`` with an X API token set, the API answering ``body``: (the Authorization headers the API
    got, the appearance, its media, the WARC path)."""
    seen = []

    def api(request):
        seen.append(request.headers.get("authorization"))
        return json_reply(body)

    s.routes[("api", f"/2/tweets/{platforms.tweet_id(post_url)}")] = api
    monkeypatch.setenv("VERITAS_TEST_X_TOKEN", "secret-token-123")
    r = make_recoverer(s, tmp_path, x_api_key_env="VERITAS_TEST_X_TOKEN")
    try:
        appearance, media = r.recover(s.page_url(post_url))
        return seen, appearance, media, r.web.warc_path
    finally:
        close(r)


def test_x_api_is_used_first_with_its_key_and_the_key_never_reaches_the_warc(services_reset, tmp_path, monkeypatch):
    s = services_reset
    # the shape of X API v2's tweet lookup with media expansions (from its documentation: not a recording)
    body = s.local(json.dumps({
        "data": {"id": "1684218600456876032", "text": "a post", "attachments": {"media_keys": ["3_1"]}},
        "includes": {"media": [{"media_key": "3_1", "type": "photo", "url": "https://pbs.twimg.com/media/a.jpg"}]},
    }).encode())
    seen, appearance, media, warc = with_x_api(s, tmp_path, monkeypatch, LK99, body)
    assert seen == ["Bearer secret-token-123"]
    assert (appearance.way, appearance.attempts, len(media)) == ("x_api", ["x_api:served"], 1)
    assert archived_authorization(warc, "/2/tweets/") == ["[redacted]"]


def test_x_api_recorded_lookup_without_includes_is_text_only(services_reset, tmp_path, monkeypatch):
    """X API v2's recorded answer to /2/tweets/<id> (tweepy's cassette): ``data`` with the text, no ``includes``.
    The text is kept while the public ways in and the archives are asked for the media."""
    s = services_reset
    s.routes.update(NOTHING_ARCHIVED)
    s.routes[("api", "/syndication/")] = Reply(404, {"content-type": "text/plain"}, b"")
    s.routes[("api", "/xoembed")] = Reply(404, {"content-type": "text/plain"}, b"")
    s.routes[("x.com", "/TwitterDev/")] = X_SHELL
    seen, appearance, media, warc = with_x_api(s, tmp_path, monkeypatch, TWITTERDEV,
                                               fixture("x_api_v2_tweet_1293593516040269825.json"))
    assert seen == ["Bearer secret-token-123"] and archived_authorization(warc, "/2/tweets/") == ["[redacted]"]
    assert appearance.attempts == [
        "x_api:text_only", "x_syndication:not_found", "x_oembed:not_found", "page:text_only", "wayback:no_capture",
        "archive_today:no_capture",
    ]
    assert (appearance.status, appearance.way, media) == ("ok", "x_api", [])
    # the recorded text, its surrogate-pair escape (\\uD83E\\uDD41) decoded to one emoji
    assert appearance.text.startswith("It’s finally here! \U0001F941 Say hello to the new #TwitterAPI.")
    assert appearance.text.endswith("https://t.co/32VrwpGaJw https://t.co/KaFSbjWUA8")
    query = parse_qs(urlsplit(s.requests_to("/2/tweets/")[0]).query)
    assert query["expansions"] == ["attachments.media_keys"]


def test_without_a_key_the_paid_backend_is_not_tried(services_reset, tmp_path, monkeypatch):
    s = services_reset
    s.routes[("api", "/syndication/")] = json_reply(s.local(fixture("x_syndication_1684218600456876032.json")))
    monkeypatch.delenv("X_BEARER_TOKEN", raising=False)
    r = make_recoverer(s, tmp_path)
    try:
        appearance, _ = r.recover(s.page_url(LK99))
    finally:
        close(r)
    assert appearance.attempts == ["x_syndication:served"] and s.requests_to("/2/tweets") == []


def test_firecrawl_is_used_first_for_its_platforms_with_its_key(services_reset, tmp_path, monkeypatch):
    s = services_reset
    seen = []

    def scrape(request):
        seen.append((request.method, request.headers.get("authorization"), json.loads(request.body)))
        # the recorded scrape document (tests/fixtures/README.md) in the answer's {"success": true, "data": ...}
        return json_reply(b'{"success": true, "data": ' + s.local(fixture(FIRECRAWL_DOC)) + b"}")

    s.routes[("api", "/v1/scrape")] = scrape
    monkeypatch.setenv("VERITAS_TEST_FC_KEY", "fc-secret-456")
    r = make_recoverer(s, tmp_path, firecrawl_url=f"{s.base}/v1/scrape", firecrawl_key_env="VERITAS_TEST_FC_KEY",
                       firecrawl_platforms=["facebook"])
    try:
        appearance, media = r.recover(s.page_url("https://www.facebook.com/someone/posts/123"))
        x_post, _ = r.recover(s.page_url(LK99))  # X is not among its platforms: never sent to Firecrawl
        warc = r.web.warc_path
    finally:
        close(r)
    assert [(m, a) for m, a, _ in seen] == [("POST", "Bearer fc-secret-456")]
    assert seen[0][2]["url"] == s.page_url("https://www.facebook.com/someone/posts/123")
    assert (appearance.way, appearance.attempts) == ("firecrawl", ["firecrawl:served"])
    assert appearance.text.startswith("Get an inside look at the rigorous evaluation process at Exa.")  # ogDescription
    # ogImage (= og:image), then twitter:image; the list-valued metadata (viewport, keywords) is not read
    assert [urlsplit(m.source_url).path for m in media] == ["/simpleqa-eval-7.png", "/og-image.png/"]
    assert not any(a.startswith("firecrawl") for a in x_post.attempts)
    assert archived_authorization(warc, "/v1/scrape") == ["[redacted]"]


# ---- the archives -----------------------------------------------------------------------------------------------


def zew_routes(s: Services) -> None:
    s.routes[("api", "/wayback/available")] = json_reply(b'{"archived_snapshots": {}}')
    s.routes[("api", "/cdx")] = Reply(200, {"content-type": "text/plain;charset=UTF-8"}, fixture("wayback_cdx_zew.txt"))
    s.routes[("api", "/web/19970427191925id_/http://www.zew.de:80/pics/")] = Reply(
        200, {"content-type": "image/jpeg"}, _jpeg(7))
    s.routes[("api", "/web/19970427191925id_/http://www.zew.de:80/")] = html_reply(
        fixture("wayback_id_zew_19970427191925.html"), headers={"memento-datetime": "Sun, 27 Apr 1997 19:19:25 GMT"})


def test_wayback_capture_nearest_the_claim_date_is_fetched_raw(services_reset, tmp_path):
    import datetime as dt

    s = services_reset
    zew_routes(s)
    r = make_recoverer(s, tmp_path)
    try:
        appearance, media = r.recover(s.page_url("http://www.zew.de/"), dt.date(1997, 5, 1))
    finally:
        close(r)
    assert appearance.attempts == ["page:fetch_failed:404", "wayback:served"]
    assert (appearance.status, appearance.way, appearance.platform) == ("ok", "wayback", "other")
    # 19970427191925 is nearer 1 May 1997 than the July and December captures of the recorded CDX answer
    assert appearance.fetched_url == f"{s.base}/web/19970427191925id_/http://www.zew.de:80/"
    # the capture's images (relative in the raw page) come from the archive too, with the id_ flag
    assert [m.source_url for m in media][:2] == [
        f"{s.base}/web/19970427191925id_/http://www.zew.de:80/pics/homepag.gif",
        f"{s.base}/web/19970427191925id_/http://www.zew.de:80/pics/homelst.gif",
    ]
    cdx = parse_qs(urlsplit(s.requests_to("/cdx")[0]).query)
    assert (cdx["from"], cdx["to"]) == (["19960430"], ["19980502"])
    available = parse_qs(urlsplit(s.requests_to("/wayback/available")[0]).query)
    assert available["timestamp"] == ["19970501"]


def test_availability_api_answer_skips_the_cdx_query(services_reset, tmp_path):
    s = services_reset
    zew_routes(s)
    s.routes[("api", "/wayback/available")] = json_reply(json.dumps({"url": "www.zew.de/", "archived_snapshots": {
        "closest": {"status": "200", "available": True, "timestamp": "19970427191925",
                    "url": "http://web.archive.org/web/19970427191925/http://www.zew.de:80/"}}}).encode())
    r = make_recoverer(s, tmp_path)
    try:
        # the availability answer names the capture; the capture is fetched for the URL as asked
        ask = platforms.Ask(r.web, r.scraping.platforms, "http://www.zew.de:80/", "other")
        assert platforms.wayback_capture(ask) == ("19970427191925", "http://www.zew.de:80/")
    finally:
        close(r)
    assert s.requests_to("/cdx") == []


def test_archive_failures_the_wayback_machine_really_gives(services_reset, tmp_path):
    s = services_reset
    s.routes[("api", "/wayback/available")] = json_reply(b'{"archived_snapshots": {}}')
    s.routes[("api", "/archive/newest/")] = html_reply("<html><body>No results</body></html>", 404)
    blocked = fixture("wayback_cdx_blocked_403.txt")
    s.routes[("api", "/cdx")] = Reply(403, {"content-type": "text/plain;charset=UTF-8", "x-archive-wayback-runtime-error":
                                            blocked.decode().strip()}, blocked)
    import gzip

    def recover(name: str):
        r = make_recoverer(s, tmp_path / name)  # a fresh archive each time: the same capture URL answers anew
        try:
            return r.recover(s.page_url("http://www.zew.de/"))[0]
        finally:
            close(r)

    a1 = recover("blocked")
    # no capture: the CDX list names one, but the id_ fetch answers the recorded "not in archive" page
    s.routes[("api", "/cdx")] = Reply(200, {"content-type": "text/plain"}, fixture("wayback_cdx_zew.txt"))
    s.routes[("api", "/web/")] = html_reply(gzip.decompress(fixture("wayback_id_no_memento_404.html.gz")), 404)
    a2 = recover("missing")
    # the capture is itself an error page: the recorded archived 429 of a site (with Memento-Datetime)
    s.routes[("api", "/web/")] = html_reply(fixture("wayback_id_reddit_archived_429.html"), 429,
                                            {"memento-datetime": "Thu, 29 Jan 2015 03:49:04 GMT"})
    a3 = recover("error_page")
    assert [a.attempts[1] for a in (a1, a2, a3)] == [
        "wayback:refused:blocked_site", "wayback:no_capture", "wayback:capture_is_error_page:429",
    ]
    assert all(a.status == "failed" and a.attempts[-1] == "archive_today:no_capture" for a in (a1, a2, a3))


def test_a_capture_that_is_a_login_page_is_refused_and_archive_today_serves(services_reset, tmp_path):
    s = services_reset
    s.routes[("api", "/wayback/available")] = json_reply(b'{"archived_snapshots": {}}')
    s.routes[("api", "/cdx")] = Reply(200, {"content-type": "text/plain"}, fixture("wayback_cdx_zew.txt"))
    login = ('<html><head><meta property="og:url" content="https://www.facebook.com/login/"></head><body>'
             '<form action="/login/device-based/regular/login/"><input type="email" name="email">'
             '<input type="password" name="pass"></form></body></html>')
    s.routes[("api", "/web/")] = html_reply(login)  # whichever capture the CDX answer names is a login page
    s.routes[("api", "/archive/newest/")] = Reply(302, {"location": f"{s.base}/archive/AbCd1"}, b"")
    s.routes[("api", "/archive/AbCd1")] = html_reply(
        '<html><body><div class="THUMBS-BLOCK"></div><img src="/archive/AbCd1/shot.jpg"></body></html>')
    s.routes[("api", "/archive/AbCd1/shot.jpg")] = Reply(200, {"content-type": "image/jpeg"}, _jpeg(3))
    r = make_recoverer(s, tmp_path)
    try:
        appearance, media = r.recover(s.page_url("https://www.facebook.com/someone/posts/123"))
    finally:
        close(r)
    assert appearance.attempts == ["page:fetch_failed:404", "wayback:capture_is_login_page", "archive_today:served"]
    assert s.requests_to("/web/") == ["/web/19980702113916id_/http://www.zew.de:80/"]  # no claim date: the newest
    assert appearance.fetched_url == f"{s.base}/archive/AbCd1"
    assert [m.source_url for m in media] == [f"{s.base}/archive/AbCd1/shot.jpg"]


# ---- TikTok, YouTube, Bluesky, Telegram, Instagram ----------------------------------------------------------------


def test_tiktok_oembed_gives_the_thumbnail_when_ytdlp_cannot(services_reset, tmp_path):
    s = services_reset
    s.routes[("api", "/tiktok/oembed")] = json_reply(s.local(fixture("tiktok_oembed_7348705314746699054.json")))
    r = make_recoverer(s, tmp_path)
    try:
        appearance, media = r.recover(s.page_url("https://www.tiktok.com/@atribecalledval/video/7348705314746699054"))
    finally:
        close(r)
    # (yt-dlp runs first for video posts, but VIDEO_POST does not match a host with a port: it is not tried here)
    assert appearance.attempts == ["tiktok_oembed:served"]
    assert appearance.text.startswith("Andre 3000 performing at Luna Luna") and appearance.text.endswith("(Valeria Cardona)")
    assert [m.source_url.split("?")[0].rsplit("/", 1)[1] for m in media] == ["afac3ae6ea3343c890e12e3cbbca1218_1711003872"]


def test_youtube_oembed_title_and_thumbnail(services_reset, tmp_path):
    s = services_reset
    s.routes[("api", "/yt/oembed")] = json_reply(s.local(fixture("youtube_oembed_dQw4w9WgXcQ.json")))
    r = make_recoverer(s, tmp_path)
    try:
        appearance, media = r.recover(s.page_url("https://www.youtube.com/watch?v=dQw4w9WgXcQ"))
    finally:
        close(r)
    assert appearance.way == "youtube_oembed"
    assert appearance.text == "Rick Astley - Never Gonna Give You Up (Official Music Video)"
    assert [urlsplit(m.source_url).path for m in media] == ["/vi/dQw4w9WgXcQ/hqdefault.jpg"]


def test_bluesky_getpostthread_images_blocked_and_deleted(services_reset, tmp_path):
    s = services_reset
    s.routes.update(NOTHING_ARCHIVED)
    s.routes[("api", "/bsky/xrpc/app.bsky.feed.getPostThread")] = json_reply(
        s.local(fixture("bluesky_getPostThread_images.json")))
    r = make_recoverer(s, tmp_path)
    try:
        appearance, media = r.recover(s.page_url("https://bsky.app/profile/bob.test/post/3kabc"))
        s.routes[("api", "/bsky/xrpc/app.bsky.feed.getPostThread")] = json_reply(
            fixture("bluesky_getPostThread_blocked.json"))
        blocked, _ = r.recover(s.page_url("https://bsky.app/profile/bob.test/post/3kblk"))
        # the AppView's XRPC error for a deleted post (getPostThread.ts: InvalidRequestError 'NotFound')
        s.routes[("api", "/bsky/xrpc/app.bsky.feed.getPostThread")] = json_reply(
            b'{"error":"NotFound","message":"Post not found: at://bob.test/app.bsky.feed.post/3kdel"}', 400)
        deleted, _ = r.recover(s.page_url("https://bsky.app/profile/bob.test/post/3kdel"))
    finally:
        close(r)
    assert (appearance.way, appearance.text) == ("bluesky_api", "hear that label_me label_me_2")
    assert [urlsplit(m.source_url).path for m in media] == ["/img/feed_fullsize/plain/user(4)/cids(5)"]
    query = parse_qs(urlsplit(s.requests_to("/bsky/")[0]).query)
    assert query["uri"] == ["at://bob.test/app.bsky.feed.post/3kabc"]
    assert blocked.attempts[0] == "bluesky_api:refused:blocked" and blocked.status == "failed"
    assert deleted.attempts[0] == "bluesky_api:post_not_found"


def test_telegram_embed_text_photos_and_videos(services_reset, tmp_path):
    s = services_reset
    s.routes.update(NOTHING_ARCHIVED)
    page = b"<html><body>" + fixture("telegram_tchantest_84.html") + b"</body></html>"
    s.routes[("api", "/tg/tchantest/84")] = html_reply(s.local(page))
    s.routes[("api", "/tg/tchantest/99")] = html_reply(
        '<html><body><div class="tgme_widget_message_error">Post not found</div></body></html>')
    r = make_recoverer(s, tmp_path)
    try:
        appearance, media = r.recover(s.page_url("https://t.me/tchantest/84"))
        gone, _ = r.recover(s.page_url("https://t.me/tchantest/99"))
    finally:
        close(r)
    assert s.requests_to("/tg/tchantest/84")[0].endswith("?embed=1")
    assert (appearance.way, appearance.text) == ("telegram_embed", "Multiple videos and pictures")
    assert [m.kind for m in media] == ["video", "video", "image", "image"]  # max_candidate_media = 4
    assert gone.attempts[0] == "telegram_embed:post_not_found"


def test_instagram_embed_page_and_its_login_wall(services_reset, tmp_path):
    s = services_reset
    s.routes.update(NOTHING_ARCHIVED)
    # written from the embed page's class names (EmbeddedMediaImage, Caption): no recording was found (README)
    s.routes[("api", "/ig/p/CSpmSvAphdf/embed/captioned/")] = html_reply(s.local(
        b'<html><body><div class="Embed"><img class="EmbeddedMediaImage" alt="x" '
        b'src="https://scontent.cdninstagram.com/v/t51/1.jpg"><div class="Caption"><a class="CaptionUsername">u</a>'
        b' caption text</div></div></body></html>'))
    s.routes[("api", "/ig/p/Cwall/embed/captioned/")] = Reply(302, {"location": f"{s.base}/ig/accounts/login/"}, b"")
    s.routes[("api", "/ig/accounts/login/")] = html_reply('<html><body><input type="password"></body></html>')
    s.routes[("www.instagram.com", "/p/Cwall/")] = html_reply('<html><body><input type="password"></body></html>')
    r = make_recoverer(s, tmp_path)
    try:
        appearance, media = r.recover(s.page_url("https://www.instagram.com/p/CSpmSvAphdf/"))
        walled, _ = r.recover(s.page_url("https://www.instagram.com/p/Cwall/"))
    finally:
        close(r)
    assert (appearance.way, appearance.text, len(media)) == ("instagram_embed", "u caption text", 1)
    assert walled.attempts[:2] == ["instagram_embed:refused:login_wall", "page:login_wall"]
    assert walled.status == "failed"


# ---- switched off, and the counters -----------------------------------------------------------------------------


def test_switched_off_the_x_shell_page_is_all_there_is(services_reset, tmp_path):
    s = services_reset
    s.routes[("api", "/syndication/")] = json_reply(s.local(fixture("x_syndication_1684218600456876032.json")))
    s.routes[("x.com", "/alleyco/")] = X_SHELL
    r = make_recoverer(s, tmp_path, enabled=False)
    try:
        appearance, media = r.recover(s.page_url(ALLEY))
    finally:
        close(r)
    assert (appearance.status, appearance.way, appearance.attempts, media) == ("ok", "page", ["page:served"], [])
    assert s.requests_to("/syndication/") == []


def test_counts_per_platform_and_way_reach_the_yields_text(services_reset, tmp_path):
    s = services_reset
    s.routes.update(NOTHING_ARCHIVED)
    s.routes[("api", "/syndication/")] = lambda request: (
        json_reply(s.local(fixture("x_syndication_1684218600456876032.json"))) if "1684218600456876032" in request.path
        else json_reply(b'{"__typename":"TweetTombstone"}'))
    s.routes[("api", "/xoembed")] = json_reply(fixture("x_oembed_1679189879086018562.json"))
    review = TrustedReview(review_id="r1", quarter="2026Q4", review_url="https://factcheck.example/r1", claim_text="c", publisher_name="p",
                           publisher_id="p", appearance_urls=[s.page_url(LK99), s.page_url(ALLEY)])
    article = Article(review_id="r1", review_url=review.review_url, final_url=review.review_url, raw_chars=0, text="")
    r = make_recoverer(s, tmp_path)
    try:
        claim = recover_claim(review, article, r, r.scraping)
    finally:
        close(r)
    stats = StageYield(1)
    for a in claim.appearances:
        count_ways(stats, a)
    table = way_table(stats.extra)
    assert table[("x", "x_syndication")] == {"tried": 2, "served": 1, "text_only": 0, "failed": {"tweet_unavailable": 1}}
    assert table[("x", "x_oembed")]["served"] == 1  # the text-only answer the second appearance kept
    assert table[("x", "page")]["failed"] == {"fetch_failed:404": 1}
    report = {"quarter": "2026Q4", "stages": {"appearances": {"extras": stats.extra}}}
    assert media_yield(report) == {"x": {"appearances": 2, "with_media": 1, "share": 0.5}}
    assert way_lines(report) == ["  ways in, x (media 1/2): x_syndication 1/2 (tweet_unavailable=1); x_oembed 1/1; "
                                 "page 0/1 (fetch_failed:404=1); wayback 0/1 (no_capture=1); archive_today 0/1 (no_capture=1)"]


def test_login_page_detection():
    assert platforms.is_login_page("<html></html>", "https://www.instagram.com/accounts/login/?next=/p/x/")
    assert platforms.is_login_page('<form><input type="password"></form>', "https://example.org/")
    assert not platforms.is_login_page(fixture("wayback_id_zew_19970427191925.html").decode("latin-1"), "http://zew.de/")
    assert re.fullmatch(r"[0-9a-z]+", platforms.syndication_token("1679189879086018562"))


# ---- veritas web check, offline -------------------------------------------------------------------------------


def test_web_check_table_against_the_recordings(services_reset, tmp_path):
    from dagster_project.cli import main
    from dagster_project.commands.web import check_rows, format_table

    s = services_reset
    s.routes.update(NOTHING_ARCHIVED)
    s.routes[("api", "/syndication/")] = json_reply(s.local(fixture("x_syndication_1684218600456876032.json")))
    s.routes[("api", "/xoembed")] = html_reply("<html><body>Sorry, that page does not exist</body></html>")
    s.routes[("api", "/tiktok/oembed")] = Reply(429, {"content-type": "text/plain"}, b"")
    settings = settings_for(s, youtube_oembed_url="http://127.0.0.1:1/oembed", x_api_key_env="VERITAS_NO_SUCH_KEY")
    web = make_recoverer(s, tmp_path).web
    posts = {"x": s.page_url(LK99), "tiktok": s.page_url("https://www.tiktok.com/@a/video/1"),
             "youtube": s.page_url("https://www.youtube.com/watch?v=dQw4w9WgXcQ")}
    try:
        rows = check_rows(web, settings, posts)
    finally:
        web.close()
    got = {(r["platform"], r["way"]): (r["verdict"], r["detail"]) for r in rows}
    assert got == {
        ("x", "x_api"): ("refused", "not_configured"),
        ("x", "x_syndication"): ("works", "2 media, 259 characters of text"),
        ("x", "x_oembed"): ("changed shape", "shape:content_type:text/html"),
        ("x", "wayback"): ("works", "no_capture"),
        ("x", "archive_today"): ("works", "no_capture"),
        ("tiktok", "tiktok_oembed"): ("refused", "refused:rate_limited"),
        ("tiktok", "wayback"): ("works", "no_capture"),
        ("tiktok", "archive_today"): ("works", "no_capture"),
        ("youtube", "youtube_oembed"): ("unreachable", "unreachable:connect_error"),
        ("youtube", "wayback"): ("works", "no_capture"),
        ("youtube", "archive_today"): ("works", "no_capture"),
    }
    table = format_table(rows).splitlines()
    assert table[0].split() == ["platform", "way", "in", "verdict", "detail"]
    assert "x         x_oembed        changed shape  shape:content_type:text/html" in table
    assert table[-1] == "works: 7, changed shape: 1, refused: 2, unreachable: 1"
    assert main(["web", "check", "--post", "x"]) == 2  # not PLATFORM=URL: refused before any request


def test_youtube_gets_a_javascript_runtime_from_pypi(tmp_path):
    """deno (the PyPI package's binary) is the runtime yt-dlp is given, and it runs the yt-dlp-ejs solver offline."""
    import subprocess

    import yt_dlp.dependencies
    from yt_dlp.utils._jsruntime import DenoJsRuntime

    from dagster_project.resources.crawl_ytdlp import js_runtimes

    path = js_runtimes()["deno"]["path"]
    info = DenoJsRuntime(path=path).info
    assert info is not None and info.supported and info.name == "deno"
    assert yt_dlp.dependencies.yt_dlp_ejs is not None  # the solver scripts come from the package, not the network
    env = {**os.environ, "DENO_DIR": str(tmp_path), "DENO_NO_UPDATE_CHECK": "1"}
    out = subprocess.run([path, "eval", "console.log(6 * 7)"], capture_output=True, text=True, env=env, timeout=60)
    assert out.stdout.strip() == "42", out.stderr


def test_ytdlp_refusals_get_their_reasons():
    """Error messages in the form yt-dlp prints them (written here around the reason texts its extractors raise,
    e.g. YouTube's playability reasons; not recordings) map to the drop reasons stage 4 counts."""
    from dagster_project.resources.crawl_ytdlp import failure_reason

    assert failure_reason("ERROR: [youtube] dQw4w9WgXcQ: Sign in to confirm your age. This video may be "
                          "inappropriate for some users. Use --cookies-from-browser or --cookies") == "age_gate"
    assert failure_reason("ERROR: [youtube] abc: Private video. Sign in if you've been granted access") == "private"
    assert failure_reason("ERROR: [youtube] abc: Video unavailable. This video has been removed by the uploader") \
        == "unavailable"
    assert failure_reason("ERROR: [Instagram] C1: This video is only available for registered users. Use "
                          "--cookies-from-browser or --cookies for the authentication.") == "login_required"
    assert failure_reason("ERROR: [TikTok] 1: Unable to download webpage: HTTP Error 429: Too Many Requests") \
        == "rate_limited"
    assert failure_reason("ERROR: Unsupported URL: https://example.org/") == "ytdlp_failed"


# ---- yt-dlp, end to end on loopback ---------------------------------------------------------------------------

CLIP = "https://video.twimg.com/ext_tw_video/571540163135873024/pu/vid/640x360/clip.mp4"


def test_ytdlp_way_in_downloads_a_video_post_through_the_web_resource(services_reset, tmp_path):
    """A video post URL goes to yt-dlp first (Recoverer's ytdlp step); yt-dlp's generic extractor fetches the file
    through the web resource (our User-Agent, the WARC) and the clip is stored with its frames."""
    s = services_reset
    r = make_recoverer(s, tmp_path)
    try:
        appearance, media = r.recover(s.page_url(CLIP))
        warc = r.web.warc_path
    finally:
        close(r)
    assert (appearance.status, appearance.way, appearance.attempts) == ("ok", "ytdlp", ["ytdlp:served"])
    [video] = media
    assert (video.kind, video.source_url) == ("video", s.page_url(CLIP)) and len(video.frame_paths) >= 1
    clip_requests = [r for r in s.server.requests if r.path.endswith("/clip.mp4")]
    assert clip_requests and all(r.headers.get("user-agent", "").startswith("veritas-benchmark/") for r in clip_requests)
    with open(warc, "rb") as fh:
        archived = [rec.rec_headers.get_header("WARC-Target-URI") for rec in ArchiveIterator(fh) if rec.rec_type == "response"]
    assert s.page_url(CLIP) in archived


@pytest.mark.parametrize(("status", "reason"), [(404, "unavailable"), (429, "rate_limited"), (403, "forbidden")])
def test_ytdlp_refused_by_the_host_gives_its_reason_and_the_next_way_is_tried(services_reset, tmp_path, status, reason):
    s = services_reset
    s.routes.update(NOTHING_ARCHIVED)
    gone = "https://www.example.org/media/gone.mp4"
    s.routes[("www.example.org", "/media/")] = Reply(status, {"content-type": "text/html"}, b"<html>no</html>")
    r = make_recoverer(s, tmp_path)
    try:
        appearance, media = r.recover(s.page_url(gone))
    finally:
        close(r)
    assert media == [] and appearance.status == "failed", appearance.error
    assert appearance.attempts[0] == f"ytdlp:video:{reason}"
    assert appearance.attempts[1:] == [f"page:fetch_failed:{status}", "wayback:no_capture", "archive_today:no_capture"]
