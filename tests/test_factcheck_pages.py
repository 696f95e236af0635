"""Stages 1-4 on 41 real fact-check pages of 22 publishers (issue 26), against hand labels of where each claim
appeared (``tests/fixtures/factcheck_pages/labels.json``; what counts as an appearance is in the fixtures README).

Measured with ``bench/candidate_links.py``: recall 0.99 and precision 0.82 over the corpus (0.59 before links cited
as evidence were left out, ``links.cited_as_evidence``). On the publishers' held-out half the precision is 0.78: the
target of the issue (0.8) is met overall and on the tuning half only.
"""

import lxml.html
import pytest
import trafilatura

from assets.scraping.appearances import candidate_links, is_post
from assets.scraping.articles import build_article, collect_media
from assets.scraping.links import (LATE, canonical, cited_as_evidence, cues, embedded_posts, in_chrome, link_context,
                                   position_in, text_url_sentence, urls_in_text)
from bench.candidate_links import CORPUS, halves, load_corpus, page_html, run_page, scores
from dagster_project.stage_settings import ScrapingSettings
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
        assert len(trafilatura.extract(page_html(entry), favor_recall=True)) < ScrapingSettings().min_article_chars


def test_recall_pass_keeps_pages_precision_mode_cuts_short(corpus):
    """BOOM's Claim/Fact page and the Washington Post's column: trafilatura's precision mode keeps 475 and 669
    characters of them; stage 3 called the first too short and the second a paywall."""
    for name in ("boom_en", "wapo"):
        entry = corpus[name]
        article, reason = build_article(_review(entry["url"]), entry["url"], page_html(entry), ScrapingSettings())
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
    assert overall["precision"] >= 0.8
    split = halves([result for result, _ in results.values()])
    assert split["tuning"]["publishers"] == split["held-out"]["publishers"] == 11
    assert split["tuning"]["precision"] >= 0.8 and split["tuning"]["recall"] >= 0.9
    # the held-out half: 0.78 (see the module docstring); this pins what the rule achieves there
    assert split["held-out"]["precision"] >= 0.75 and split["held-out"]["recall"] >= 0.9


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


def _context(article, url):
    return next(c for c in article.link_contexts if c.url == url)


def test_each_link_keeps_its_anchor_and_sentence(corpus, results):
    """Fails without ``links.link_context``: the sentence a link sits in (here a list of three links), and for an
    embedded tweet the sentence that introduces it."""
    _, afp_en = results["afp_en"]
    context = _context(afp_en, "https://perma.cc/9NCN-6AXY")
    assert context.anchor == "here"
    assert context.sentence == "More versions of the post are available on Facebook here, here and here."
    _, galwan = results["vishvas_galwan"]
    tweet = next(c for c in galwan.link_contexts if "Sheikh_faisal1" in c.url)
    assert tweet.anchor == "" and "ट्विटर हैंडल" in tweet.sentence
    doc = lxml.html.fromstring(page_html(corpus["afp_en"]))
    [link] = doc.xpath("//a[@href='https://perma.cc/9NCN-6AXY']")
    assert link_context(link) == (context.anchor, context.sentence)


# links the checks cite as evidence early in the article, in sentences that say so: a reverse image search and the
# real video's publisher ("sitio web oficial ... publicó el vídeo real")
EARLY_EVIDENCE = {"fatabyyano": "https://archive.ph/v3Fb7", "newtral_fakes": "https://www.youtube.com/watch?v=_MjNSf1hjts"}


def test_links_whose_sentence_cites_evidence_are_not_candidates(results):
    """Fails without the cue rule: each sentence is in the first ``LATE`` of its article, so only its words (evidence
    cues outnumbering appearance cues by two) leave the link out; the labelled appearances of the pages stay."""
    for name, url in EARLY_EVIDENCE.items():
        result, article = results[name]
        sentence = _context(article, url).sentence
        appearance, evidence = cues(sentence)
        assert position_in(article.text, sentence) <= LATE and evidence - appearance >= 2, name
        assert canonical(url) not in {canonical(u) for u in result.candidates}, name
        assert url in article.links and not result.misses, name


def test_late_links_need_words_of_sharing(results):
    """Fails without the position rule: four YouTube videos of the game a clip came from, past ``LATE`` of
    Fatabyyano's check, pointed at with a bare "here" and no cue either way, are left out; a late archive link whose
    sentence says it is the post's ("The archive link of the post can be found here") stays."""
    result, article = results["fatabyyano"]
    videos = [c for c in article.link_contexts if c.anchor == "هنـا" and "youtube.com" in c.url]
    assert len(videos) == 4
    for context in videos:
        assert cues(context.sentence) == (0, 0) and position_in(article.text, context.sentence) > LATE
        assert context.url not in result.candidates
    result, article = results["vishvas_en"]
    context = _context(article, "https://perma.cc/UN6H-3EHA")
    assert position_in(article.text, context.sentence) > LATE and not cited_as_evidence(context.sentence, 0.9)
    assert context.url in result.candidates


def test_a_text_url_is_judged_by_its_sentence():
    text = ("The claim was shared at https://twitter.com/someone/status/1225090477847973888 on Monday. "
            "The original video, according to its source, is https://www.youtube.com/watch?v=dQw4w9WgXcQ. ")
    assert text_url_sentence(text, "https://www.youtube.com/watch?v=dQw4w9WgXcQ") == (
        "The original video, according to its source, is https://www.youtube.com/watch?v=dQw4w9WgXcQ.")
    article = Article(review_id="r", review_url="https://f.example/c", final_url="https://f.example/c",
                      raw_chars=0, text=text)
    assert candidate_links(_review("https://f.example/c"), article) == [
        "https://twitter.com/someone/status/1225090477847973888"]
