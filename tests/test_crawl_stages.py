"""Issue 4, stages 3-4 over loopback: the real AFP page served live, its WARC replayed with zero sockets,
archive and short links mapped back to their originals, a video fetched through yt-dlp, a chooser held to
the article's literal URLs."""

import gzip
import io
import json
import os
import socket
from pathlib import Path

import imageio_ffmpeg
import numpy as np
import pytest
from PIL import Image
from warcio.archiveiterator import ArchiveIterator

from assets.rules.ids import stable_id
from assets.scraping.appearances import (
    Recoverer,
    accept_llm_choice,
    archive_kind,
    candidate_links,
    is_post,
    model_chooser,
    recover_all,
    recover_claim,
)
from assets.scraping.articles import fetch_article, scrape
from dagster_project.resources.llm import EnsembleMember, LLMResource
from dagster_project.resources.media import MediaStore
from dagster_project.resources.web import FetchResult, WebResource
from dagster_project.simulation.openai_stub import OpenAIStub
from dagster_project.stage_settings import ErrorBudgetSettings, ScrapingSettings
from schemas.records import Article, TrustedReview
from tests.loopback_web import LoopbackServer, PacketGuard, Reply, Request

FIXTURES = Path(__file__).resolve().parent / "fixtures"
AFP_HOST = "faktencheck.afp.com"
AFP_PATH = "/doc.afp.com.B2LA2G3"
AFP_HTML = gzip.decompress((FIXTURES / "afp_B2LA2G3.html.gz").read_bytes())
AFP_POST = "https://x.com/RealAlexJones/status/2052459009425252459"
FB_POST = "https://www.facebook.com/634352629929715/posts/3132801580084795"
TIKTOK_VIDEO = "https://www.tiktok.com/@someone/video/7234567890123456789"
NAMES = {AFP_HOST: "127.0.0.1", "archive.ph": "127.0.0.1", "bit.ly": "127.0.0.1", "videos.test": "127.0.0.1"}


def _norm(text: str) -> str:
    return " ".join(text.split())


def _review(url: str) -> TrustedReview:
    """A trusted review as stage 2 hands it on (built directly: stage 1 is not under test here)."""
    return TrustedReview(review_id=stable_id(url), review_url=url, claim_text="a claim", quarter="2026Q2",
                         publisher_id="afp")


def _mp4() -> bytes:
    """1 s, 96x64 H.264 whose colour changes every 0.2 s."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "clip.mp4")
        writer = imageio_ffmpeg.write_frames(path, (96, 64), fps=10, codec="libx264", macro_block_size=8,
                                             ffmpeg_log_level="error")
        writer.send(None)
        for i in range(10):
            frame = np.zeros((64, 96, 3), np.uint8)
            frame[:] = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (0, 255, 255)][i // 2]
            writer.send(frame.tobytes())
        writer.close()
        with open(path, "rb") as fh:
            return fh.read()


def _archive_page(original: str) -> bytes:
    return (
        "<html><head><title>archive.ph</title></head><body>"
        f'<input id="SHARE_LONGLINK" value="https://archive.ph/2020.04.07-101500/{original}" readonly>'
        "<p>archived copy</p></body></html>"
    ).encode()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One loopback server plays the AFP site, archive.ph, bit.ly and a video host; fetched live once."""
    mp4 = _mp4()

    async def handle(req: Request) -> Reply:
        host, path = req.host, req.path
        if host == AFP_HOST and path == AFP_PATH:
            return Reply(200, {"Content-Type": "text/html; charset=utf-8", "Content-Encoding": "gzip"},
                         gzip.compress(AFP_HTML))
        if host == "archive.ph" and path == "/AbCd1":
            return Reply(200, {"Content-Type": "text/html"}, _archive_page(FB_POST))
        if host == "bit.ly" and path == "/3xYz":
            return Reply(301, {"Location": TIKTOK_VIDEO})
        if host == "videos.test" and path == "/clip.mp4":
            return Reply(200, {"Content-Type": "video/mp4"}, mp4)
        return Reply(404, {"Content-Type": "text/plain"}, b"no")

    archive = tmp_path_factory.mktemp("stage-warc")
    with PacketGuard(NAMES) as guard, LoopbackServer(handle) as srv:
        port = srv.port
        web = WebResource(mode="live", archive_dir=str(archive), allow_private_hosts=list(NAMES),
                          per_host_delay_s=0.0, max_retries=0)
        review = _review(f"http://{AFP_HOST}:{port}{AFP_PATH}")
        try:
            article, reason = fetch_article(review, web, ScrapingSettings())
            recoverer = Recoverer(web, MediaStore(str(tmp_path_factory.mktemp("media"))), ScrapingSettings())
            resolved = {
                "archive": recoverer.resolve(f"http://archive.ph:{port}/AbCd1"),
                "short": recoverer.resolve(f"http://bit.ly:{port}/3xYz"),
                "wayback": recoverer.resolve("https://web.archive.org/web/20200520103842/https:/twitter.com/a/status/1"),
            }
            video, video_reason, info = recoverer.download_video(f"http://videos.test:{port}/clip.mp4", "article")
            store = recoverer.media
        finally:
            web.close()
        requests = list(srv.requests)
    return {"article": article, "reason": reason, "review": review, "port": port, "archive": archive,
            "resolved": resolved, "video": video, "video_reason": video_reason, "info": info, "store": store,
            "requests": requests, "violations": guard.violations}


def test_afp_page_served_live_matches_title_date_and_body(served):
    expected = json.loads((FIXTURES / "afp_B2LA2G3_expected.json").read_text(encoding="utf-8"))["V1"]
    article = served["article"]
    assert served["reason"] == "" and article is not None
    assert article.title == "Angst vor dem Hantavirus lässt Verschwörungserzählungen aus der Corona-Zeit wiederaufleben"
    assert article.published == "2026-05-13" and article.language == "de"
    body = _norm(article.text)
    for paragraph in (expected["body"]["summary"][0], expected["body"]["sections"][0]["paragraphs"][0],
                      expected["body"]["sections"][-1]["paragraphs"][-1]):
        assert _norm(paragraph) in body
    assert 1000 <= len(article.text) <= 40000
    # the real images, with their alt/caption fields present, and the post the ClaimReview names
    assert article.images[0].src.endswith("c6259af572280a0428adef2686490b9d-de.jpeg")
    assert AFP_POST in article.links and is_post(AFP_POST)
    assert sum(archive_kind(link) == "perma" for link in article.links) == 11
    assert served["violations"] == []


def test_archive_short_and_wayback_links_map_to_their_originals(served):
    port = served["port"]
    assert served["resolved"]["archive"] == (FB_POST, f"http://archive.ph:{port}/AbCd1")
    assert served["resolved"]["short"] == (TIKTOK_VIDEO, "")
    assert served["resolved"]["wayback"] == (
        "https://twitter.com/a/status/1", "https://web.archive.org/web/20200520103842/https:/twitter.com/a/status/1")


def test_video_through_ytdlp_from_loopback_saves_five_frames(served):
    video = served["video"]
    assert served["video_reason"] == "" and video is not None and video.kind == "video"
    assert served["info"]["extractor"] == "generic"
    assert len(video.frame_paths) == 5
    colours = []
    for rel in video.frame_paths:
        with Image.open(io.BytesIO(served["store"].read(rel))) as im:
            assert im.format == "JPEG" and im.size == (96, 64)
            colours.append(tuple(int(c) // 64 for c in im.convert("RGB").getpixel((48, 32))))
    assert len(set(colours)) == 5  # one frame from each fifth of the clip
    # yt-dlp's requests went through the web resource: our User-Agent, one fetch, the rest from the archive
    clip = [r for r in served["requests"] if r.path == "/clip.mp4"]
    assert len(clip) == 1 and clip[0].headers["user-agent"].startswith("veritas-benchmark/")


class _NoSockets:
    """Fails (and records) any socket creation, name lookup or connection while active."""

    def __init__(self, monkeypatch):
        self.attempts: list[str] = []
        real = socket.socket
        guard = self

        class Refusing(real):
            def __init__(self, *args, **kwargs):
                guard.attempts.append(f"socket{args}")
                raise AssertionError("stage 3 replay opened a socket")

        def refuse(name):
            def inner(*args, **kwargs):
                guard.attempts.append(f"{name}{args[:2]}")
                raise AssertionError(f"stage 3 replay called socket.{name}")
            return inner

        monkeypatch.setattr(socket, "socket", Refusing)
        for name in ("create_connection", "getaddrinfo", "socketpair", "gethostbyname"):
            monkeypatch.setattr(socket, name, refuse(name))


@pytest.mark.parametrize("workers", [1, 2])
def test_stage3_from_warc_replay_opens_zero_sockets(served, monkeypatch, workers):
    """With 2 workers the forked workers read the archive: a socket there would raise in the worker and turn
    the page into an error drop, so the exact drops and article below also hold the workers to zero sockets."""
    review = served["review"]
    other = _review(f"http://{AFP_HOST}:{served['port']}/never-fetched")
    replay = WebResource(mode="replay", warc_paths=[str(served["archive"])])
    guard = _NoSockets(monkeypatch)
    articles, stats = scrape([review, other], replay, ScrapingSettings(), ErrorBudgetSettings(), workers=workers,
                             replay_chunk=1)
    monkeypatch.undo()
    assert guard.attempts == []
    assert dict(stats.drops) == {"fetch_failed:not_archived": 1}
    assert [a.model_dump() for a in articles] == [served["article"].model_dump()]
    # the workers' fetch-log entries reach the parent's log, in input order, for the stage's yields
    assert [(e["url"], e["error"]) for e in replay.fetch_log()] == [(review.review_url, None), (other.review_url, "not_archived")]


def test_a_chosen_url_not_in_the_article_is_never_accepted(served, tmp_path):
    review, article = served["review"], served["article"]
    invented = "https://x.com/RealAlexJones/status/2052459009425252450"  # one digit off the real post
    text_url = "https://example.org/report.pdf"  # written out in the body text, not linked
    with_text = Article(**{**article.model_dump(), "text": article.text + f" Quelle: {text_url}."})
    chosen = [invented, AFP_POST, "not a url", "https://x.com", text_url, "https://example.org/report"]
    accepted, rejected = accept_llm_choice(chosen, review, with_text)
    assert accepted == [AFP_POST, text_url]
    assert rejected == [invented, "not a url", "https://x.com", "https://example.org/report"]

    calls = []
    recoverer = Recoverer(_NoNetwork(calls), MediaStore(str(tmp_path)), ScrapingSettings())
    small = Article(**{**article.model_dump(), "images": [], "video_urls": []})
    refused: list[str] = []
    claim = recover_claim(review, small, recoverer, ScrapingSettings(), chooser=lambda r, a, c: [invented], rejected=refused)
    assert refused == [invented] and invented not in calls
    assert all(a.url != invented for a in claim.appearances)
    assert _pages(calls)[0] == AFP_POST and candidate_links(review, small)[0] == AFP_POST
    assert calls[0].startswith(ScrapingSettings().platforms.x_syndication_url)  # X's public endpoints come first


def _pages(calls: list[str]) -> list[str]:
    """The post pages among the fetches: without the ways in of stage 4 (public endpoints, archives) tried around them."""
    settings = ScrapingSettings().platforms
    endpoints = tuple(getattr(settings, name) for name in (
        "x_syndication_url", "x_oembed_url", "x_api_url", "tiktok_oembed_url", "youtube_oembed_url",
        "bluesky_appview_url", "wayback_available_url", "wayback_cdx_url", "wayback_web_url", "archive_today_url"))
    return [c for c in calls if not c.startswith(endpoints) and "/embed/captioned/" not in c and "?embed=1" not in c]


class _NoNetwork:
    """A web resource that records what was asked and has nothing (a chooser test must not fetch anything)."""

    def __init__(self, calls: list):
        self.calls = calls

    def fetch(self, url, *a, **kw):
        self.calls.append(url)
        return FetchResult(url=url, final_url=url, status=None, error="not_archived")


def test_a_model_chooser_through_litellm_is_held_to_the_articles_urls(served, tmp_path, monkeypatch):
    """The stage-4 chooser asks an ensemble member over real HTTP (litellm against a loopback stub): its picks
    are tried first, an invented URL is refused and never fetched, and a second run is answered by the cache."""
    review, article = served["review"], served["article"]
    small = Article(**{**article.model_dump(), "images": [], "video_urls": []})
    candidates = candidate_links(review, small)
    # an outbound link that is no candidate (a capture left out as a source would be fetched through its archive)
    other = next(link for link in small.links
                 if link not in candidates and link.startswith("https://") and not archive_kind(link))
    invented = AFP_POST[:-1] + "0"
    prompts = []

    def respond(mode, body):
        prompts.append(body["messages"][-1]["content"])
        return 200, json.dumps({"urls": [invented, other, AFP_POST], "reason": "the post that carried the claim"})

    stub = OpenAIStub(respond)
    monkeypatch.setenv("CHOOSER_STUB_KEY", "sk-test")
    llm = LLMResource(members=[EnsembleMember(name="picker", model="openai/scripted", api_base=stub.base("pick"),
                                              api_key_env="CHOOSER_STUB_KEY")],
                      cache_path=str(tmp_path / "llm.sqlite"))
    scraping = ScrapingSettings(appearance_chooser="picker")
    runs = []
    try:
        for _ in range(2):
            calls: list[str] = []
            recoverer = Recoverer(_NoNetwork(calls), MediaStore(str(tmp_path / "media")), scraping)
            claims, stats = recover_all([review], [small], recoverer, scraping, ErrorBudgetSettings(), threads=1,
                                        chooser=model_chooser(llm, "picker", scraping.max_appearances + 1))
            runs.append((calls, stats))
    finally:
        stub.close()
        llm.close()
    (calls, stats), (again, _) = runs
    assert len(prompts) == 1  # the second run came from the cache
    assert AFP_POST in prompts[0] and other in prompts[0] and invented not in prompts[0]
    assert _pages(calls)[:2] == [other, AFP_POST] and invented not in calls  # its picks first, in its order
    assert again == calls
    assert stats.extra["chooser/refused_urls"] == 1 and stats.extra["chooser/claims_with_refusals"] == 1
    assert llm.ledger_summary(stage="appearances")["calls"] == 2


def test_paywall_markup_and_non_html_answers_are_recorded_with_a_reason(tmp_path):
    teaser = "<p>" + "Die ersten Sätze des Artikels stehen frei, der Rest nur für Abonnenten. " * 40 + "</p>"
    ld = json.dumps({"@context": "https://schema.org", "@type": "NewsArticle", "headline": "Bezahlartikel",
                     "isAccessibleForFree": "False", "hasPart": {"@type": "WebPageElement",
                                                              "isAccessibleForFree": "False", "cssSelector": ".paid"}})
    page = (f'<html lang="de"><head><title>Bezahlartikel</title><script type="application/ld+json">{ld}</script>'
            f'</head><body><article><h1>Bezahlartikel</h1>{teaser}<div class="paid"></div></article></body></html>')

    async def handle(req: Request) -> Reply:
        if req.path == "/paid":
            return Reply(200, {"Content-Type": "text/html; charset=utf-8"}, page.encode())
        return Reply(200, {"Content-Type": "application/pdf"}, b"%PDF-1.4" + b"0" * 4000)

    with PacketGuard({"news.test": "127.0.0.1"}), LoopbackServer(handle) as srv:
        web = WebResource(mode="live", archive_dir=str(tmp_path), allow_private_hosts=["news.test"],
                          per_host_delay_s=0.0, max_retries=0)
        reviews = [_review(f"http://news.test:{srv.port}/paid"), _review(f"http://news.test:{srv.port}/report.pdf")]
        try:
            articles, stats = scrape(reviews, web, ScrapingSettings(), ErrorBudgetSettings(), workers=1)
        finally:
            web.close()
    assert articles == [] and dict(stats.drops) == {"paywall": 1, "not_html": 1}


def test_a_page_cut_short_in_the_archive_by_a_crash_is_fetched_again(tmp_path):
    async def handle(req: Request) -> Reply:
        return Reply(200, {"Content-Type": "text/html; charset=utf-8"}, AFP_HTML)

    with PacketGuard({AFP_HOST: "127.0.0.1"}), LoopbackServer(handle) as srv:
        url = f"http://{AFP_HOST}:{srv.port}/page"
        results = []
        for _ in range(2):
            web = WebResource(mode="live", archive_dir=str(tmp_path / "warc"), allow_private_hosts=[AFP_HOST],
                              per_host_delay_s=0.0)
            try:
                results.append(web.fetch(url, content_types=("text/html",), reuse=True))
            finally:
                web.close()
            if len(results) == 1:  # the first run "crashes" while writing the page: its WARC ends mid-record
                warc = Path(web.warc_path)
                with open(warc, "rb") as fh:
                    records = ArchiveIterator(fh)
                    offset = next(records.get_record_offset() for r in records if r.rec_type == "response")
                warc.write_bytes(warc.read_bytes()[: offset + 2000])
    first, second = results
    assert first.ok and not second.from_archive and second.ok and second.content == AFP_HTML
    assert [r.path for r in srv.requests] == ["/page", "/page"]  # the damaged copy was not served as the page


def test_a_page_that_kills_its_worker_loses_only_itself(tmp_path, monkeypatch):
    """A worker process that dies (here: os._exit in the extraction of one page, as an OOM kill or a crash in
    a C extension would) fails every page it had; those are tried again one at a time, live and in replay."""
    import assets.scraping.articles as stage3

    real_extract = stage3.extract_article

    def fragile(html, url, min_chars=1000):
        if "/killer" in url:
            os._exit(9)  # only ever in a forked worker: the parent extracts nothing with 2 workers
        return real_extract(html, url, min_chars)

    monkeypatch.setattr(stage3, "extract_article", fragile)

    async def handle(req: Request) -> Reply:
        return Reply(200, {"Content-Type": "text/html; charset=utf-8"}, AFP_HTML)

    archive = tmp_path / "warc"
    with PacketGuard({AFP_HOST: "127.0.0.1"}), LoopbackServer(handle) as srv:
        reviews = [_review(f"http://{AFP_HOST}:{srv.port}/{name}")
                   for name in ("a", "b", "killer", "c", "d", "e", "f", "g", "h", "i")]
        web = WebResource(mode="live", archive_dir=str(archive), allow_private_hosts=[AFP_HOST], per_host_delay_s=0.0)
        try:
            live, live_stats = scrape(reviews, web, ScrapingSettings(), ErrorBudgetSettings(), workers=2, batch=4)
        finally:
            web.close()
        assert sorted(r.path for r in srv.requests) == sorted(f"/{n}" for n in "abcdefghi") + ["/killer"]  # each once
    replay = WebResource(mode="replay", warc_paths=[str(archive)])
    replayed, replay_stats = scrape(reviews, replay, ScrapingSettings(), ErrorBudgetSettings(), workers=2,
                                    replay_chunk=3)
    for articles, stats in ((live, live_stats), (replayed, replay_stats)):
        assert dict(stats.drops) == {"worker_died": 1}
        assert [a.review_url.rsplit("/", 1)[1] for a in articles] == list("abcdefghi")
    # each page once in the fetch log, but the killer: its entry went down with the worker that read it
    assert sorted(e["url"] for e in replay.fetch_log()) == sorted(r.review_url for r in reviews if "killer" not in r.review_url)


def test_a_stage3_rerun_fetches_only_the_pages_that_failed(tmp_path):
    calls: dict[str, int] = {}

    async def handle(req: Request) -> Reply:
        calls[req.path] = calls.get(req.path, 0) + 1
        if req.path == "/flaky" and calls[req.path] == 1:
            return Reply(503, {"Content-Type": "text/plain", "Retry-After": "3600"}, b"busy")
        return Reply(200, {"Content-Type": "text/html; charset=utf-8"}, AFP_HTML)

    with PacketGuard({AFP_HOST: "127.0.0.1"}), LoopbackServer(handle) as srv:
        reviews = [_review(f"http://{AFP_HOST}:{srv.port}/steady"), _review(f"http://{AFP_HOST}:{srv.port}/flaky")]
        runs = []
        for _ in range(2):
            web = WebResource(mode="live", archive_dir=str(tmp_path), allow_private_hosts=[AFP_HOST],
                              per_host_delay_s=0.0)
            before = len(srv.requests)
            try:
                articles, stats = scrape(reviews, web, ScrapingSettings(), ErrorBudgetSettings(), workers=1)
            finally:
                web.close()
            runs.append((len(articles), dict(stats.drops), sorted(r.path for r in srv.requests[before:])))
    # run 1: the 503 asks for an hour, so it is not retried in-run; run 2 asks the network for that page only
    assert runs[0] == (1, {"fetch_failed:503": 1}, ["/flaky", "/steady"])
    assert runs[1] == (2, {}, ["/flaky"])
