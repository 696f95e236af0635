"""Stage 3 on real pages: the AFP fact-check, the CORRECTIV negative control, and the demo WARC's bot wall."""

import gzip
import json
import re
from pathlib import Path

import pytest

from assets.scraping.appearances import archive_kind, is_post
from assets.scraping.articles import build_article, collect_media, detect_wall, extract_article, scrape
from assets.ingestion.cleaning import clean_row
from assets.ingestion.sources import claimreview_to_row
from dagster_project.resources.web import WebResource
from dagster_project.stage_settings import ErrorBudgetSettings, ScrapingSettings
from schemas.records import TrustedReview

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "demo" / "snapshot"
FIXTURES = ROOT / "tests" / "fixtures"

AFP_URL = "https://faktencheck.afp.com/doc.afp.com.B2LA2G3"
AFP_TITLE = "Angst vor dem Hantavirus lässt Verschwörungserzählungen aus der Corona-Zeit wiederaufleben"
AFP_POST = "https://x.com/RealAlexJones/status/2052459009425252459"
AFP_PERMA = {
    "https://perma.cc/BU4E-V797", "https://perma.cc/LK9M-EQU5", "https://perma.cc/JL8J-5SUW",
    "https://perma.cc/ZV27-HF5S", "https://perma.cc/96BL-EPT7", "https://perma.cc/RL2X-KAWN",
    "https://perma.cc/PJ9V-UMHK", "https://perma.cc/WHH7-CXRB", "https://perma.cc/4YA3-8SUT",
    "https://perma.cc/8XD5-C8PQ", "https://perma.cc/5Y68-26V3",
}
CORRECTIV_URL = (
    "https://correctiv.org/hybride-kriegsfuehrung/2026/05/21/von-muenchen-bis-aachen-im-netz-der-china-agenten/"
)
BOTWALL_URL = (
    "https://newschecker.in/2020/05/23/a-message-claiming-four-common-treatments-recommended-by-doctors-"
    "at-nanavati-hospital-is-fake/"
)
MISSING_URL = (
    "https://facta.news/notizia-falsa/2020/05/06/non-e-vero-che-bill-gates-ha-ammesso-che-i-vaccini-"
    "servono-a-sterilizzare-e-ridurre-la-popolazione/"
)
DEAD_POST = "https://www.facebook.com/634352629929715/posts/3132801580084795"  # a 404 in the demo WARC


def _norm(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def web():
    return WebResource(mode="replay", warc_paths=[str(SNAPSHOT / "pages.warc.gz")])


@pytest.fixture(scope="module")
def feed_reviews() -> dict[str, TrustedReview]:
    """Feed rows as stage 1 cleans them (review_url -> TrustedReview); unusable rows are left out."""
    feed = json.loads((SNAPSHOT / "feed.json").read_text(encoding="utf-8"))
    out = {}
    for i, element in enumerate(feed["dataFeedElement"]):
        for j, item in enumerate(element.get("item") or []):
            row, reason = clean_row(claimreview_to_row(item, f"feed:feed.json#{i}.{j}"), None)
            if row is not None:
                out.setdefault(row["review_url"], TrustedReview(**row, publisher_id=row["publisher_name"].lower()))
    return out


def _review(url: str, claim: str = "a claim") -> TrustedReview:
    row, reason = clean_row(
        {**claimreview_to_row({"url": url, "claimReviewed": claim, "datePublished": "2026-05-21"}, "test"),
         "sources": ["feed:test#0"]},
        None,
    )
    assert reason == ""
    return TrustedReview(**row, publisher_id="test")


@pytest.fixture(scope="module")
def expected() -> dict:
    return json.loads((FIXTURES / "afp_B2LA2G3_expected.json").read_text(encoding="utf-8"))["V1"]


@pytest.fixture(scope="module")
def afp_article(web, feed_reviews):
    result = web.fetch(AFP_URL)
    assert result.status == 200 and result.content_type == "text/html"
    article, reason = build_article(feed_reviews[AFP_URL], result.final_url, result.text(), ScrapingSettings())
    assert reason == ""
    return article


def test_afp_metadata(afp_article, feed_reviews):
    assert afp_article.title == AFP_TITLE
    assert afp_article.published == "2026-05-13"
    assert afp_article.language == "de"
    assert afp_article.final_url == AFP_URL
    assert afp_article.review_id == feed_reviews[AFP_URL].review_id
    assert afp_article.raw_chars > 60000


def test_afp_body_matches_the_expected_paragraphs(afp_article, expected):
    sections = expected["body"]["sections"]
    first, last = sections[0]["paragraphs"][0], sections[-1]["paragraphs"][-1]
    body = _norm(afp_article.text)
    assert first.startswith("Die Weltgesundheitsorganisation WHO betonte am 8. Mai 2026")
    assert _norm(first) in body
    assert _norm(last) in body
    assert _norm(expected["body"]["summary"][0]) in body
    assert 1000 <= len(afp_article.text) <= 40000
    # chrome stays out: no cookie/consent or footer legal text
    assert "Impressum" not in afp_article.text


def test_afp_images_are_absolute_real_and_not_logos(afp_article, expected):
    srcs = [image.src for image in afp_article.images]
    real = [version["url"] for image in expected["images"] for version in image["versions"]]
    assert real == [
        "https://faktencheck.afp.com/sites/default/files/medias/factchecking/g2/2026-05/"
        "c6259af572280a0428adef2686490b9d-de.jpeg",
        "https://faktencheck.afp.com/sites/default/files/styles/image_in_article/public/medias/factchecking/g2/"
        "2026-05/7ccc569c74259087f3a55907ff4ff1ea-de.jpeg?itok=_Aeh2szO",
    ]
    assert srcs[:2] == real  # cover first, then the in-article picture, in page order
    assert len(srcs) == 6  # + 4 header crops of related articles; the SVG logo and two 80px badges are skipped
    assert all(src.startswith("https://faktencheck.afp.com/sites/default/files/") for src in srcs)
    assert not any(re.search(r"\.svg|\.png|afp-logo|badge", src) for src in srcs)


def test_afp_links_keep_the_post_and_the_archives(afp_article):
    links = afp_article.links
    assert AFP_POST in links  # named only by the page's ClaimReview markup (itemReviewed.url)
    assert is_post(AFP_POST)
    perma = {link for link in links if archive_kind(link) == "perma"}
    assert perma == AFP_PERMA
    # the publisher's own accounts sit in the page's follow bar and footer: page chrome, not the article's links
    assert not any("AFPfaktencheck" in link or "afpfaktencheck" in link for link in links)
    for own in ("https://twitter.com/AFPfaktencheck", "https://twitter.com/AFPFactCheck",
                "https://www.facebook.com/afpfaktencheck", "https://www.instagram.com/afpfaktencheck/"):
        assert not is_post(own)
    # the tip line's banner sits in the article body: a link, but not a post
    tipline = [link for link in links if "whatsapp.com" in link]
    assert tipline == ["https://api.whatsapp.com/send?phone=491722524054&text=&source=&data="]
    assert not is_post(tipline[0])
    # links to the page's own host are not outbound
    assert not any(link.startswith("https://faktencheck.afp.com/") for link in links)


def test_build_article_on_the_fixture_bytes_matches_the_warc(afp_article, feed_reviews):
    html = gzip.decompress((FIXTURES / "afp_B2LA2G3.html.gz").read_bytes()).decode("utf-8")
    article, reason = build_article(feed_reviews[AFP_URL], AFP_URL, html, ScrapingSettings())
    assert reason == ""
    assert article.model_dump() == afp_article.model_dump()


def test_correctiv_page_is_extracted_and_not_a_wall(web):
    html = gzip.decompress((FIXTURES / "correctiv_no_claimreview.html.gz").read_bytes()).decode("utf-8")
    fields = extract_article(html, CORRECTIV_URL)
    assert fields["language"] == "de"
    assert 1000 <= len(fields["text"]) <= 40000
    assert detect_wall(html, len(fields["text"])) == ""
    article, reason = build_article(_review(CORRECTIV_URL), CORRECTIV_URL, html, ScrapingSettings())
    assert reason == ""
    assert article.title == fields["title"] and article.title
    assert article.text == fields["text"]
    # the same bytes sit in the demo WARC under the canonical URL
    result = web.fetch(CORRECTIV_URL)
    assert result.status == 200
    assert result.text() == html


def test_detect_wall_rules(web):
    wall_html = web.fetch(BOTWALL_URL).text()
    assert "Please verify you are human" in wall_html
    assert detect_wall(wall_html, 0) == "bot_wall"
    assert detect_wall("<p>Subscribe to continue reading this story.</p>", 40) == "paywall"
    # a full article that merely mentions a captcha is not a wall
    assert detect_wall("<p>" + "A fake captcha page was shared. " * 120 + "</p>", 3800) == ""
    # the real AFP page has a `.captcha__description` CSS rule: styles and scripts are not page text
    afp_html = gzip.decompress((FIXTURES / "afp_B2LA2G3.html.gz").read_bytes()).decode("utf-8")
    assert ".captcha__description" in afp_html
    assert detect_wall(afp_html, 0) == ""


def test_scrape_records_bot_wall_and_missing_page(web, feed_reviews):
    reviews = [feed_reviews[BOTWALL_URL], feed_reviews[MISSING_URL], feed_reviews[AFP_URL], _review(DEAD_POST)]
    articles, stats = scrape(reviews, web, ScrapingSettings(), ErrorBudgetSettings())
    assert stats.rows_in == 4
    # 403 challenge page -> its wall reason, not just the HTTP status; a plain 404 stays a fetch failure
    assert dict(stats.drops) == {"bot_wall": 1, "fetch_failed:not_archived": 1, "fetch_failed:404": 1}
    assert [a.review_url for a in articles] == [AFP_URL]


def test_scrape_whole_demo_feed(web, feed_reviews):
    reviews = list(feed_reviews.values())
    articles, stats = scrape(reviews, web, ScrapingSettings(), ErrorBudgetSettings())
    assert len(reviews) == 18  # 21 items less the late-claim-date one, the one without url and the duplicate
    assert dict(stats.drops) == {"bot_wall": 1, "fetch_failed:not_archived": 1}
    assert len(articles) == 16
    by_url = {a.review_url: a for a in articles}
    # JSON-LD/meta say 2020-04-07 while the feed says 2020-04-02: the page wins
    politifact = next(a for url, a in by_url.items() if "no-video-doesnt-show" in url)
    assert politifact.published == "2020-04-07"
    assert {a.language for a in articles} >= {"en", "fr", "es", "de", "tr"}


def test_length_rules_follow_the_pipeline_thresholds(afp_article, feed_reviews):
    html = gzip.decompress((FIXTURES / "afp_B2LA2G3.html.gz").read_bytes()).decode("utf-8")
    review, n = feed_reviews[AFP_URL], len(afp_article.text)
    assert 5000 < n < 7000
    cases = [
        (ScrapingSettings(min_raw_chars=len(html) + 1), "raw_page_too_short"),
        (ScrapingSettings(min_article_chars=len(html)), "article_too_short"),  # longer than any extraction
        (ScrapingSettings(max_article_chars=n - 1), "article_too_long"),
    ]
    for scraping, reason in cases:
        assert build_article(review, AFP_URL, html, scraping) == (None, reason)
    small = ScrapingSettings(min_raw_chars=10, min_article_chars=10, max_article_chars=n)
    article, reason = build_article(review, AFP_URL, html, small)
    assert reason == "" and len(article.text) == n
    # a short page that is a wall says so even below the raw-size limit
    assert build_article(review, AFP_URL, "<p>Checking your browser before accessing</p>", small) == (None, "bot_wall")


def test_collect_media_srcset_caption_and_videos():
    html = """<html><body><figure><img srcset="/a-320.jpg 320w, /a-1280.jpg 1280w" src="/a.jpg" alt=" A ">
    <figcaption>Screenshot <b>of the post</b></figcaption></figure>
    <img src="/icon.png" width="32"><img src="data:image/gif;base64,R0lGOD">
    <video src="/clip.mp4"></video><iframe src="https://www.youtube.com/embed/uzXguH9wirM"></iframe>
    <a href="/file.webm">clip</a><a href="#top">top</a><a href="mailto:x@y.z">mail</a></body></html>"""
    images, videos, links = collect_media(html, "https://example.org/check/1")
    assert [(i.src, i.alt, i.caption) for i in images] == [
        ("https://example.org/a-1280.jpg", "A", "Screenshot of the post")
    ]
    assert videos == [
        "https://example.org/clip.mp4", "https://www.youtube.com/embed/uzXguH9wirM", "https://example.org/file.webm"
    ]
    # the embedded player is a link to its video (stage 4 reads embedded posts from the links)
    assert links == ["https://www.youtube.com/watch?v=uzXguH9wirM", "https://example.org/file.webm"]
