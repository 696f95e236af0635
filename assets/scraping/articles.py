"""Stage 3: fetch each fact-check page, extract the article text, its images, video links and outbound links."""

import json
import multiprocessing
import re
from concurrent.futures import Future, ProcessPoolExecutor
from types import SimpleNamespace
from urllib.parse import urljoin, urlsplit

import dagster as dg
import lxml.etree
import lxml.html

from assets.scraping.fetch_log import fetch_metadata
from assets.scraping.links import (
    embed_of,
    in_chrome,
    in_embed,
    link_context,
    page_chars,
)
from assets.scraping.workers import (
    STATE,
    WORKER_DIED,
    alone,
    forked_pool,
    in_chunks,
    retry_dead,
    submit,
)
from assets.stage.record_errors import ErrorBudget, RecordError, map_records
from assets.stage.tables import StageYield, finish_stage, load_upstream
from assets.stage.wiring import quarter_of_context, stage_asset
from dagster_project.resources.store import StoreResource
from dagster_project.resources.web import FetchResult, WebResource
from dagster_project.stage_settings import ErrorBudgetSettings, ScrapingSettings
from schemas.records import Article, ImageRef, LinkContext, TrustedReview

STAGE = "articles"

WALL_PATTERNS = {
    "bot_wall": re.compile(
        r"verify (that )?you are (a )?human|are you a robot|captcha|checking your browser|"
        r"enable javascript and cookies to continue|access denied|attention required",
        re.IGNORECASE,
    ),
    "paywall": re.compile(
        r"subscribe to (continue|read)|this (article|content) is for subscribers|"
        r"already a subscriber\?|to continue reading,? (please )?(subscribe|log in)",
        re.IGNORECASE,
    ),
}
VIDEO_HOSTS = ("youtube.com", "youtu.be", "vimeo.com", "dailymotion.com", "tiktok.com", "facebook.com/watch")
VIDEO_EXT = re.compile(r"\.(mp4|webm|mov|m4v)(\?|$)", re.IGNORECASE)
SKIP_IMAGE = re.compile(r"\.svg(\?|$)|^data:|/(logo|icon|sprite|avatar|badge)[^/]*$", re.IGNORECASE)


def detect_wall(html: str, text_chars: int) -> str:
    """A paywall or bot wall leaves little text and says so; such pages are recorded, not silently dropped."""
    if text_chars >= 3000:
        return ""  # a full article that merely mentions "captcha" is not a wall
    visible = _visible_text(html)
    for reason, pattern in WALL_PATTERNS.items():
        if pattern.search(visible):
            return reason
    if _marked_not_free(html):
        return "paywall"  # schema.org paywall markup, and the page shows only a teaser
    return ""


def _marked_not_free(html: str) -> bool:
    """The publisher's own JSON-LD says the article is not free to read (isAccessibleForFree: false)."""
    if "isaccessibleforfree" not in html.lower():
        return False
    try:
        doc = lxml.html.fromstring(html)
    except (lxml.etree.ParserError, ValueError):
        return False
    for script in doc.xpath("//script[@type='application/ld+json']/text()"):
        try:
            data = json.loads(script)
        except ValueError:
            continue
        for node in _jsonld_nodes(data):
            if str(node.get("isAccessibleForFree", "")).strip().lower() == "false":
                return True
    return False


def _visible_text(html: str) -> str:
    """Page text without scripts and styles (CSS classes like `.captcha__description` are not a wall)."""
    try:
        doc = lxml.html.fromstring(html)
    except (lxml.etree.ParserError, ValueError):
        return html
    for el in doc.xpath("//script | //style | //template"):
        el.drop_tree()
    return " ".join(doc.text_content().split())


def _largest_srcset(srcset: str) -> str:
    best, best_w = "", -1
    for part in srcset.split(","):
        bits = part.strip().split()
        if not bits:
            continue
        width = int(re.sub(r"\D", "", bits[1]) or 0) if len(bits) > 1 else 0
        if width > best_w:
            best, best_w = bits[0], width
    return best


def _jsonld_nodes(value):
    if isinstance(value, list):
        for item in value:
            yield from _jsonld_nodes(item)
    elif isinstance(value, dict):
        yield value
        yield from _jsonld_nodes(value.get("@graph"))


def _markup_appearances(doc) -> list[str]:
    """URLs the page's own ClaimReview markup names for the reviewed item (often not linked in the text)."""
    out = []
    for script in doc.xpath("//script[@type='application/ld+json']/text()"):
        try:
            data = json.loads(script)
        except ValueError:
            continue  # broken JSON-LD is common; the visible links still count
        for node in _jsonld_nodes(data):
            reviewed = node.get("itemReviewed") if "ClaimReview" in str(node.get("@type", "")) else None
            if not isinstance(reviewed, dict):
                continue
            for key in ("url", "appearance", "firstAppearance"):
                for item in reviewed.get(key) if isinstance(reviewed.get(key), list) else [reviewed.get(key)]:
                    url = item.get("url") if isinstance(item, dict) else item
                    if isinstance(url, str) and url.strip().startswith(("http://", "https://")):
                        out.append(url.strip())
    return out


def collect_media(html: str, base_url: str) -> tuple[list[ImageRef], list[str], list[str]]:
    """Images (src or the largest srcset entry, alt, figure caption), video links, and all outbound links."""
    images, videos, links, _ = collect_media_and_contexts(html, base_url)
    return images, videos, links


def collect_media_and_contexts(
    html: str, base_url: str,
) -> tuple[list[ImageRef], list[str], list[str], list[LinkContext]]:
    """``collect_media`` and the words around each link (the first place the page links it)."""
    doc = lxml.html.fromstring(html)
    images, seen = [], set()
    for img in doc.iter("img"):
        src = _largest_srcset(img.get("srcset", "")) or img.get("src") or img.get("data-src") or ""
        src = urljoin(base_url, src.strip()) if src.strip() else ""
        if not src or src in seen or SKIP_IMAGE.search(src):
            continue
        width = re.sub(r"\D", "", img.get("width") or "")
        if width and int(width) < 100:
            continue  # icons and badges
        seen.add(src)
        figure = next((a for a in img.iterancestors("figure")), None)
        caption = ""
        if figure is not None:
            caption = " ".join(" ".join(c.itertext()) for c in figure.iter("figcaption"))
            caption = " ".join(caption.split())
        images.append(ImageRef(src=src, alt=(img.get("alt") or "").strip(), caption=caption,
                               srcset=" ".join((img.get("srcset") or "").split())))
    videos = []
    for el in doc.xpath("//video[@src] | //video/source[@src] | //iframe[@src] | //meta[@property='og:video']"):
        src = urljoin(base_url, (el.get("src") or el.get("content") or "").strip())
        if VIDEO_EXT.search(src) or any(h in src for h in VIDEO_HOSTS):
            videos.append(src)
    # the ClaimReview's own appearances, then the article's links in page order with the posts it embeds; links in
    # page chrome (share bars, the publisher's accounts, footers) and inside an embed (its media) are not its links
    links = _markup_appearances(doc)
    contexts: dict[str, LinkContext] = {}
    chars, sizes = page_chars(doc), {}
    for el in doc.iter("a", "blockquote", "div", "iframe"):
        if el.tag != "a":
            embedded = embed_of(el, base_url)
            if embedded:
                links.append(embedded.split("#")[0])
                _note_context(contexts, links[-1], el)
            continue
        href = (el.get("href") or "").strip()
        skip = href.startswith(("#", "mailto:", "javascript:", "tel:")) or in_chrome(el, chars, sizes) or in_embed(el)
        if href and not skip:
            url = urljoin(base_url, href).split("#")[0]
            links.append(url)
            _note_context(contexts, url, el)
            if VIDEO_EXT.search(url):
                videos.append(url)
    return images, list(dict.fromkeys(videos)), list(dict.fromkeys(links)), list(contexts.values())


def _note_context(contexts: dict, url: str, el) -> None:
    if url not in contexts:
        anchor, sentence = link_context(el)
        contexts[url] = LinkContext(url=url, anchor=anchor[:200], sentence=sentence[:800])


def extract_article(html: str, url: str, min_chars: int = 1000) -> dict:
    """Main text and metadata with trafilatura; the page's lang attribute backs up the language.

    The fast pass (no fallback extractors) is tried first; the slower fallbacks run only when it finds less
    than ``min_chars``, which halves the cost on ordinary article pages, and a recall pass only when those too
    find less.
    """
    import trafilatura  # here, not with the module: the code location imports it for every stage's runs (0.3 s, 40 MB)

    data = {}
    # precision first (fast, then with fallbacks); a page still short gets one recall pass: trafilatura's precision
    # mode drops whole sections of some real pages (BOOM's Claim/Fact blocks, the Washington Post's body), which
    # were then dropped as too short or, below 3,000 characters, taken for a paywall
    for fast, precision in ((True, True), (False, True), (False, False)):
        extracted = trafilatura.extract(
            html, url=url, output_format="json", with_metadata=True, include_comments=False,
            favor_precision=precision, favor_recall=not precision, fast=fast,
        )
        found = json.loads(extracted) if extracted else {}
        if len((found.get("text") or "").strip()) >= len((data.get("text") or "").strip()):
            data = found
        if len((data.get("text") or "").strip()) >= min_chars:
            break
    language = data.get("language") or ""
    if not language:
        match = re.search(r"<html[^>]*\blang=[\"']?([A-Za-z-]+)", html[:5000], re.IGNORECASE)
        language = match.group(1).split("-")[0].lower() if match else ""
    return {
        "text": (data.get("text") or "").strip(),
        "title": data.get("title") or "",
        "published": data.get("date") or "",
        "language": language,
    }


def build_article(review: TrustedReview, final_url: str, html: str, scraping: ScrapingSettings) -> tuple[Article | None, str]:
    """Apply the reference length rules and the wall detection; (article, "") or (None, reason)."""
    if len(html) < scraping.min_raw_chars:
        wall = detect_wall(html, 0)
        return None, wall or "raw_page_too_short"
    fields = extract_article(html, final_url, scraping.min_article_chars)
    wall = detect_wall(html, len(fields["text"]))
    if wall:
        return None, wall
    if len(fields["text"]) < scraping.min_article_chars:
        return None, "article_too_short"
    if len(fields["text"]) > scraping.max_article_chars:
        return None, "article_too_long"
    images, videos, links, contexts = collect_media_and_contexts(html, final_url)
    own_host = urlsplit(final_url).hostname or ""
    return Article(
        review_id=review.review_id,
        review_url=review.review_url,
        final_url=final_url,
        raw_chars=len(html),
        images=images,
        video_urls=videos,
        links=[link for link in links if (urlsplit(link).hostname or "") != own_host],
        link_contexts=[c for c in contexts if (urlsplit(c.url).hostname or "") != own_host],
        **fields,
    ), ""


HTML_TYPES = ("text/html", "application/xhtml+xml")


def _after_fetch(review: TrustedReview, result: FetchResult) -> tuple[str, str]:
    """("", html) when the page is worth extracting, else (the reason it yields no article, "")."""
    is_html = result.content_type.startswith(HTML_TYPES) or not result.content_type
    if result.error == "bad_content_type":
        return "not_html", ""  # refused by the web resource before its body was read
    if not result.ok:
        # bot walls answer 403/429/503 with a challenge page: record the wall, not just the status
        wall = ""
        if result.error is None and result.content and is_html:
            html = result.text()
            wall = detect_wall(html, len(extract_article(html, result.final_url)["text"]))
        return wall or f"fetch_failed:{result.error or result.status}", ""
    if not is_html:
        return "not_html", ""
    return "", result.text()


def fetch_article(review: TrustedReview, web: WebResource, scraping: ScrapingSettings) -> tuple[Article | None, str]:
    """One review page: (article, "") or (None, the reason it yields no article)."""
    result = web.fetch(review.review_url, content_types=HTML_TYPES, reuse=True)
    return _outcome(review, result, _limits(scraping))


def _limits(scraping: ScrapingSettings) -> SimpleNamespace:
    # a plain namespace: it crosses to worker processes, where a Dagster resource per page would cost more
    keys = ("min_raw_chars", "min_article_chars", "max_article_chars")
    return SimpleNamespace(**{k: getattr(scraping, k) for k in keys})


def _outcome(review: TrustedReview, result: FetchResult, limits: SimpleNamespace) -> tuple[Article | None, str]:
    """A fetched page to (article, "") or (None, reason); a page that raises is an error reason, never lost."""
    try:
        reason, html = _after_fetch(review, result)
        return (None, reason) if reason else build_article(review, result.final_url, html, limits)
    except Exception as err:  # noqa: BLE001 - one page must not lose the others
        return None, RecordError.of(err)  # the cause and the traceback cross back from the worker process


def _replay_chunk(reviews: list[TrustedReview]) -> tuple[list, list[dict]]:
    """Worker entry in replay mode, where fetching is file reading and decompression (CPU work like the
    extraction): fetch and extract a few pages; the fetch-log entries go back to the parent's log."""
    web, limits = STATE["web"], STATE["limits"]
    mark = web.fetch_log_size()
    results = web.fetch_many([r.review_url for r in reviews], content_types=HTML_TYPES, reuse=True)
    return [_outcome(review, result, limits) for review, result in zip(reviews, results)], web.fetch_log(since=mark)


def _resolved(outcome) -> tuple[Article | None, str]:
    if not isinstance(outcome, Future):
        return outcome
    error = outcome.exception()  # a worker that died (e.g. killed for memory) loses its page, not the stage
    return (None, RecordError.of(error)) if error else outcome.result()


def scrape(
    reviews: list[TrustedReview], web: WebResource, scraping: ScrapingSettings, error_budget: ErrorBudgetSettings,
    log=None, workers: int | None = None, batch: int = 64, replay_chunk: int = 8,
) -> tuple[list[Article], StageYield]:
    """Fetch and extract every page on ``workers`` processes (trafilatura is CPU-bound); results keep the input
    order. Live, the parent fetches in concurrent batches (politeness is the web resource's job) while the pool
    extracts; replay fetching is CPU work too, so the workers read the archive themselves, ``replay_chunk``
    pages per task."""
    workers = max(1, workers if workers is not None else scraping.scrape_workers)
    if multiprocessing.current_process().daemon:
        workers = 1  # daemonic processes (e.g. a Celery prefork worker) may not start children
    limits = _limits(scraping)
    stats = StageYield(len(reviews))
    outcomes: list = []  # (article, reason) or a Future of it, in input order
    pool = _pool(workers, web, limits) if workers > 1 else None
    try:
        if pool and web.mode == "replay":
            outcomes = in_chunks(pool, _replay_chunk, reviews, replay_chunk, web, lambda reason: (None, reason), log,
                                 lambda done: f"{STAGE}: {done}/{len(reviews)} fetched and extracted")
        else:
            for start in range(0, len(reviews), batch):
                chunk = reviews[start : start + batch]
                # the next batch is fetched while the pool still extracts the previous one
                results = web.fetch_many([r.review_url for r in chunk], content_types=HTML_TYPES, reuse=True)
                for review, result in zip(chunk, results):
                    job = (review, result, limits)
                    outcomes.append(submit(pool, _outcome, *job) if pool else _outcome(*job))
                in_flight = [o for o in outcomes[: max(0, len(outcomes) - 2 * batch)] if isinstance(o, Future)]
                for future in in_flight:  # bound memory: at most two batches of pages wait in the pool
                    future.exception()
                if log:
                    log.info(f"{STAGE}: {len(outcomes)}/{len(reviews)} fetched")
            outcomes = [_resolved(o) for o in outcomes]
    finally:
        if pool:
            pool.shutdown(cancel_futures=True)
    retry_dead(outcomes, reviews, lambda: _pool(1, web, limits), lambda one, review: _alone(one, review, web, limits),
               (None, WORKER_DIED), log, STAGE, "pages")
    budget = ErrorBudget.for_stage(error_budget, STAGE, len(reviews), log)
    return map_records(STAGE, list(zip(reviews, outcomes)), lambda pair: pair[1], stats, budget=budget), stats


def _pool(count: int, web: WebResource, limits: SimpleNamespace) -> ProcessPoolExecutor:
    """Forked workers; in replay mode they get the web resource (its index built once, before the fork)."""
    if web.mode != "replay":
        return forked_pool(count)
    web.load_replay_index()
    return forked_pool(count, web=web, limits=limits)


def _alone(pool: ProcessPoolExecutor, review: TrustedReview, web: WebResource, limits: SimpleNamespace):
    """A page whose worker process died (killed for memory, a crash in a C extension), in a worker of its own
    (``retry_dead``). Live, the page comes from the archive the first pass wrote."""
    if web.mode == "replay":
        return alone(pool, _replay_chunk, review, web)
    result = web.fetch(review.review_url, content_types=HTML_TYPES, reuse=True)
    return pool.submit(_outcome, review, result, limits).result()


@stage_asset(
    "scraping",
    "Stage 3: fact-check article text (trafilatura), images, video links; walls recorded with a reason.",
    deps=("trusted_reviews",),
    pool="web",
)
def articles(
    context: dg.AssetExecutionContext, scraping: ScrapingSettings, error_budget: ErrorBudgetSettings,
    store: StoreResource, web: WebResource,
) -> dg.MaterializeResult:
    quarter = quarter_of_context(context)
    bad: list = []  # upstream rows that fail validation
    reviews = load_upstream(store, "trusted_reviews", quarter, TrustedReview, bad)
    mark = len(web.fetch_log())
    kept, stats = scrape(reviews, web, scraping, error_budget, context.log)
    stats.extra.update(fetch_metadata(web.fetch_log(since=mark)))
    return finish_stage(context, store, STAGE, quarter, kept, Article, stats, bad)
