"""Stages 1-4 on 41 real fact-check pages of 22 publishers (issue 26), against hand labels of where each claim
appeared (``tests/fixtures/factcheck_pages/labels.json``; what counts as an appearance is in the fixtures README).

Measured with ``bench/candidate_links.py``: recall 1.00 and precision 0.59 over the corpus. The precision target of
the issue (0.8) is not met: the remaining false candidates are posts and captures the checks cite as evidence (the
original a clip was cut from, denials, official accounts' posts), which only the chooser can tell from the claim's.
"""

import lxml.html
import pytest
import trafilatura

from assets.scraping.appearances import candidate_links, is_post
from assets.scraping.articles import build_article, collect_media
from assets.scraping.links import canonical, embedded_posts, in_chrome, urls_in_text
from bench.candidate_links import CORPUS, load_corpus, page_html, run_page, scores
from dagster_project.config import PipelineResource
from schemas.records import Article, TrustedReview

# the only pages that yield no article, and why (both are short video write-ups: 688 and 835 characters)
NO_ARTICLE = {"aajtak_hindi": "article_too_short", "boom_hindi": "article_too_short"}
# template links of four sites (footer tip lines and app links, a WhatsApp helpline box, an ad banner)
TEMPLATE = ["https://bit.ly/boommedan", "https://bit.ly/telegramboom", "https://goo.gl/qtxzZf",
            "https://goo.gl/BGCmrr", "https://goo.gl/S8unuW", "https://goo.gl/LhVy5E", "https://bit.ly/fatimabot-bc",
            "https://vm.tiktok.com/ZMJkxS59M/"]


@pytest.fixture(scope="module")
def corpus() -> dict:
    return load_corpus()


@pytest.fixture(scope="module")
def results(corpus):
    return {name: run_page(name, entry) for name, entry in corpus.items()}


def _review(url: str) -> TrustedReview:
    return TrustedReview(review_id="r", review_url=url, claim_text="a claim", quarter="2020Q2", publisher_id="t")


def test_corpus_size_and_sources(corpus):
    assert len(corpus) >= 40
    assert len({p["publisher_id"] for p in corpus.values()}) >= 20
    assert len({p["language"] for p in corpus.values()}) >= 6
    for entry in corpus.values():
        assert (CORPUS / entry["file"]).is_file()
        source = entry["source"]
        assert source["repository"] in ("meedan/fetch", "meedan/newspeek") and source["license"] == "MIT"
        assert len(source["commit"]) == 40 and source["path"].startswith("spec/fixtures/")
    assert sum(len(p["appearances"]) for p in corpus.values()) == 103


def test_every_page_gives_an_article_or_a_true_reason(results):
    reasons = {name: result.article_reason for name, (result, _) in results.items() if result.article_reason}
    assert reasons == NO_ARTICLE
    for name in NO_ARTICLE:  # the reason is true of the page: even trafilatura's recall mode finds < 1,000 chars
        entry = load_corpus()[name]
        assert len(trafilatura.extract(page_html(entry), favor_recall=True)) < PipelineResource().min_article_chars


def test_recall_pass_keeps_pages_precision_mode_cuts_short(corpus):
    """BOOM's Claim/Fact page and the Washington Post's column: trafilatura's precision mode keeps 475 and 669
    characters of them; stage 3 called the first too short and the second a paywall."""
    for name in ("boom_en", "wapo"):
        entry = corpus[name]
        article, reason = build_article(_review(entry["url"]), entry["url"], page_html(entry), PipelineResource())
        assert reason == "" and len(article.text) > 1500, name


# stage 1's reasons for the pages whose ClaimReview it does not keep, each true of the page's markup
NO_REVIEW = {"aos_fatos": "non_http_review_url",  # "url": "aosfatos.org/noticias/..." (no scheme)
             "india_today": "no_date"}  # neither the review nor the claim has a datePublished


def test_stage1_keeps_every_claimreview_it_can(results):
    reasons = {name: result.review_reason for name, (result, _) in results.items() if result.review_reason}
    without = {name for name, reason in reasons.items() if reason == "page_without_claimreview"}
    for name in without:  # no ClaimReview in any syntax, not even the word
        assert "claimreview" not in page_html(load_corpus()[name]).lower(), name
    assert {n: r for n, r in reasons.items() if n not in without} == NO_REVIEW
    assert len(without) == 10
    # Estadão's review URL is a path and The Quint's claim a list of one: both are kept
    assert not reasons.keys() & {"estadao", "webqoof"}


def test_stage1_reads_the_real_one_digit_offset(results):
    result, _ = results["vishvas_galwan"]
    assert result.review_reason == ""  # was unparseable_date: datePublished "2020-06-22T12:26:08+5:30"
    html = page_html(load_corpus()["vishvas_galwan"])
    assert '"datePublished": "2020-06-22T12:26:08+5:30"' in html


def test_labels_are_links_of_their_page(results):
    """Every labelled appearance is something the page links or embeds (or its ClaimReview names)."""
    for name, (result, article) in results.items():
        if article is None:
            assert not result.labels, name
            continue
        linked = {canonical(u) for u in article.links}
        assert {canonical(u) for u in result.labels} <= linked, name


def test_recall_and_precision_on_the_corpus(results):
    overall = scores([result for result, _ in results.values()])["all"]
    assert overall["labelled"] == 103
    assert overall["recall"] >= 0.9
    # issue 26 asks for 0.8; measured 0.59 (see the module docstring): this pins what the selection achieves
    assert overall["precision"] >= 0.55


def test_template_links_are_not_candidates(results):
    """Fails without the page-chrome filter: these short links sit in footers, app bars and helpline boxes."""
    candidates = {canonical(u) for result, _ in results.values() for u in result.candidates}
    assert not candidates & {canonical(u) for u in TEMPLATE}
    # and their pages still have the links, outside the article's own links
    html = page_html(load_corpus()["boom_en"])
    doc = lxml.html.fromstring(html)
    [helpline] = doc.xpath("//a[@href='https://bit.ly/boommedan']")
    assert in_chrome(helpline)  # div#subscribe-to-us inside the story body


def test_own_accounts_and_share_bars_are_chrome():
    doc = lxml.html.fromstring(
        "<html><body><article class='node enable-pin-share'><p>Shared <a id='a' href='https://x.com/u/status/1'>"
        "here</a>.</p><div class='social-share'><a id='b' href='https://x.com/intent/tweet'>tweet</a></div>"
        "</article><footer><a id='c' href='https://bit.ly/tipline'>Send us a tip</a></footer>"
        "<div class='nav-social'><a id='d' href='https://twitter.com/ourdesk/status/9'>us</a></div></body></html>"
    )
    chrome = {el.get("id"): in_chrome(el) for el in doc.iter("a")}  # without a page size: any chrome word counts
    assert chrome == {"a": False, "b": True, "c": True, "d": True}


def test_a_wrapper_of_the_whole_page_is_not_chrome():
    """``<div id="app">`` (a single-page app's root) wraps the article; only the footer inside it is chrome."""
    html = ("<html><body><div id='app'><div class='story'><p>" + "The post said so. " * 40 +
            "<a href='https://x.com/u/status/1'>here</a>.</p></div><div class='site-footer'>"
            "<a href='https://bit.ly/tipline'>Send us a tip</a></div></div></body></html>")
    _, _, links = collect_media(html, "https://f.example/check")
    assert links == ["https://x.com/u/status/1"]


def test_text_urls_lose_the_sentence_punctuation():
    """Fails without the trimming: ``.../status/1225090477847973888,`` is no post URL."""
    text = ("The claim was posted at https://twitter.com/someone/status/1225090477847973888, then archived "
            "(https://archive.ph/AbC12). See also https://en.wikipedia.org/wiki/Hoax_(disambiguation).")
    assert urls_in_text(text) == [
        "https://twitter.com/someone/status/1225090477847973888",
        "https://archive.ph/AbC12",
        "https://en.wikipedia.org/wiki/Hoax_(disambiguation)",
    ]
    article = Article(review_id="r", review_url="https://f.example/c", final_url="https://f.example/c",
                      raw_chars=0, text=text)
    assert candidate_links(_review("https://f.example/c"), article) == [
        "https://twitter.com/someone/status/1225090477847973888", "https://archive.ph/AbC12"]


def test_embedded_posts_on_real_pages(results):
    """Fails without the embed reading: a Facebook plugin iframe (an appearance on Vishvas News), an Instagram
    blockquote's permalink, a Facebook post plugin and a tweet blockquote's permalink."""
    _, galwan = results["vishvas_galwan"]
    appearance = "https://www.facebook.com/105887567550635/videos/2762111444007783/"
    assert appearance in galwan.links
    assert appearance in results["vishvas_galwan"][0].candidates
    corpus = load_corpus()
    embeds = {name: embedded_posts(lxml.html.fromstring(page_html(corpus[name])), corpus[name]["url"])
              for name in ("newtral_fakes", "afp_factuel", "fatabyyano")}
    assert "https://www.instagram.com/p/BzfU_QeIsIt/?utm_source=ig_embed&utm_campaign=loading" in embeds["newtral_fakes"]
    assert any("facebook.com/" in u and is_post(u) for u in embeds["afp_factuel"])
    assert "https://twitter.com/mkhfnaakaw/status/1561347776642170880?ref_src=twsrc%5Etfw" in embeds["fatabyyano"]


def test_embed_shapes_and_their_inner_links():
    html = """<html><body><article>
    <blockquote class="tiktok-embed" cite="https://www.tiktok.com/@someone/video/7100000000000000001">
      <a href="https://www.tiktok.com/tag/fake">#fake</a></blockquote>
    <iframe class="lazyload" data-src="https://www.youtube.com/embed/dQw4w9WgXcQ?start=3"></iframe>
    <div class="fb-post" data-href="https://www.facebook.com/somepage/posts/123456789"></div>
    <iframe src="https://www.tiktok.com/embed/v2/7100000000000000002?lang=en"></iframe>
    <blockquote class="twitter-tweet"><p>claim <a href="https://t.co/abcDEF123">pic.twitter.com/abcDEF123</a></p>
      <a href="https://twitter.com/someone/status/1225090477847973888?ref_src=twsrc%5Etfw">June 1, 2020</a>
    </blockquote></article></body></html>"""
    _, _, links = collect_media(html, "https://f.example/check")
    assert links == [
        "https://www.tiktok.com/@someone/video/7100000000000000001",
        "https://www.youtube.com/watch?v=dQw4w9WgXcQ",
        "https://www.facebook.com/somepage/posts/123456789",
        "https://www.tiktok.com/embed/v2/7100000000000000002",
        "https://twitter.com/someone/status/1225090477847973888?ref_src=twsrc%5Etfw",
    ]  # the tweet's media link and the TikTok hashtag are the embedded post's own, not the article's
    assert all(is_post(link) for link in links)


def test_one_candidate_per_post():
    links = ["https://twitter.com/a/status/1?ref_src=twsrc%5Etfw", "https://twitter.com/a/status/1",
             "https://x.com/a/status/1/video/1", "https://www.youtube.com/watch?v=dQw4w9WgXcQ&feature=youtu.be",
             "https://youtu.be/dQw4w9WgXcQ", "https://goo.gl/maps/GJamWVx5gbeY3oGD7",
             "http://web.archive.org/web/*/https://twitter.com/MorenaBCS", "https://archive.is/https://twitter.com/MorenaBCS"]
    article = Article(review_id="r", review_url="https://f.example/c", final_url="https://f.example/c",
                      raw_chars=0, text="", links=links)
    assert candidate_links(_review("https://f.example/c"), article) == [links[0], links[3]]
