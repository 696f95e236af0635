"""A simulated quarter: a DataFeed and a WARC of fact-check pages, posts, archives, images and videos, made from real
records, with a planted truth per claim. Deterministic from the seed; nothing in it is ever fetched live.

Every review URL lives under ``/veritas-sim/`` on its publisher's own domain and every post id is invented, so the
pages exist only in the WARC that the web resource replays. What is real: the claim texts, their languages and
textual ratings, the publishers (all in registry/publishers.csv) and the article paragraphs (AVeriTeC
justifications, questions and answers; 5Pils provenance notes; Fact Check Tools claims). What is ours: the
URLs, dates, page chrome, images, videos, failures and the planted truth.
"""

import csv
import hashlib
import io
import json
import random
import re
from dataclasses import asdict, dataclass, field
from datetime import date, timedelta
from pathlib import Path

import imagehash
import numpy as np
from PIL import Image, ImageDraw

from assets.rules.claim_text import verdict_leak, verdict_phrase
from assets.rules.length import count_sentences, count_words
from assets.rules.ratings import rating_category
from dagster_project.simulation.pages import (
    CHROME,
    CONTEXT,
    LINK_SENTENCE,
    METHOD,
    Archive,
    archive_today_page,
    botwall_page,
    consent_page,
    esc,
    font,
    instagram_embed_page,
    login_page,
    page_shell,
    social_page,
    stamp,
    video_mp4,
    x_shell_page,
)
from dagster_project.simulation.records import claim_key
from dagster_project.simulation.rewrites import rewrites, vocabulary
from dagster_project.stage_settings import PlatformSettings

ROOT = Path(__file__).resolve().parents[2]
REGISTRY = ROOT / "registry" / "publishers.csv"
CATEGORIES = ("intact", "compromised_veracity", "compromised_ooc", "unknown")
# the property that decides each planted category (ties among equal scores go to context coverage first)
DECISIVE = {"intact": "context_coverage", "compromised_veracity": "veracity", "compromised_ooc": "contextualization",
            "unknown": "veracity"}
BIN3 = {"intact": "intact", "compromised_veracity": "compromised", "compromised_ooc": "compromised", "unknown": "unknown"}
FAILURES = ("bot_wall", "not_found", "paywall", "too_short")
# publishers a record without a registered publisher of its own is given, by language
FALLBACK_PUBLISHERS = {
    "en": ["politifact.com", "factcheck.org", "fullfact.org", "leadstories.com", "snopes.com", "africacheck.org",
           "aap.com.au", "factly.in", "pesacheck.org", "newsmeter.in", "dubawa.org", "checkyourfact.com"],
    "ar": ["misbar.com", "fatabyyano.net", "akhbarmeter.org", "maharat-news.com", "falso.ly", "annir.ly", "arij.net"],
}
MAX_CLAIM_WORDS = 55  # a rewrite (dagster_project/simulation/rewrites.py) adds a few words and must stay within 70
SIM_PATH = "veritas-sim"
def planted_category(record: dict) -> str:
    """The planted category of a real record: its textual rating's (assets/rules/ratings.py), out of context for
    an image claim that is not rated true."""
    return rating_category(str(record.get("rating") or ""), bool(record.get("image_claim")))


@dataclass
class QuarterConfig:
    quarter: str = "2025Q3"
    reviews: int = 4000
    seed: int = 13
    # "real": each claim's planted category follows its record's own textual rating (planted_category), so the
    # quarter is as one-sided as the fact-checkers' ratings are; "balanced": drawn from ``shares``
    label_mix: str = "real"
    shares: dict = field(default_factory=lambda: {
        "intact": 0.30, "compromised_veracity": 0.30, "compromised_ooc": 0.25, "unknown": 0.15})
    media_share: float = 0.5  # of the claims that are not out of context: a post with an image or a video
    video_share: float = 0.08  # of the media claims: a short MP4 instead of a photo
    archive_share: float = 0.3  # articles that also link an archived copy of the post
    original_dead_share: float = 0.3  # of those: the post itself is gone, only the archive answers
    near_duplicate_share: float = 0.02  # media claims whose post image is a re-encoded copy of an earlier claim's
    # X and Instagram posts whose page needs a way in, as the real platforms serve them today: an X shell without
    # Open Graph tags (the media only in the syndication JSON), an Instagram login wall (the media only on the embed
    # page); some of the walled X image posts are YouTube videos behind a consent page instead (the thumbnail in
    # oEmbed). Drawn from a generator of their own: with 0.0 the feed and the WARC are byte for byte those without walls.
    walled_share: float = 0.0
    youtube_share: float = 0.2  # of the walled X image posts: a YouTube video instead
    garbled_rewrites: bool = False  # the simulated writer garbles one word of each rewrite (a planted fluency tell)
    rates: dict = field(default_factory=lambda: {
        "bot_wall": 0.02, "not_found": 0.02, "paywall": 0.015, "too_short": 0.015,
        "dead_appearance": 0.03, "duplicate_review": 0.02})

    @property
    def year(self) -> int:
        return int(self.quarter[:4])

    @property
    def first_day(self) -> date:
        return date(self.year, 3 * (int(self.quarter[-1]) - 1) + 1, 1)

    @property
    def partition_key(self) -> str:
        return self.first_day.strftime("%Y-%m")


# ------------------------------------------------------------------------------ media
class _Archive(Archive):
    """The demo's WARC builder with a URL set, so that adding a record stays O(1) at quarter size."""

    def __init__(self):
        super().__init__()
        self.urls: set[str] = set()

    def add(self, url, body, ctype, status=200, reason="OK", extra=()):
        assert url not in self.urls, url
        self.urls.add(url)
        self.records.append((url, status, reason, [("Content-Type", ctype), *extra], body))

    def jpeg(self, url, img):
        if url not in self.urls:
            super().jpeg(url, img)


class Pictures:
    """Photos whose perceptual hashes are all far apart (a blurred random colour grid decides the low frequencies
    pHash reads), and near-duplicates of them on demand (resized, re-encoded)."""

    def __init__(self, min_distance: int = 12):
        self.min_distance = min_distance
        self.hashes = np.zeros(0, dtype=np.uint64)

    @staticmethod
    def _hash(img: Image.Image) -> np.uint64:
        bits = imagehash.phash(img).hash.flatten()
        return np.uint64(int("".join("1" if b else "0" for b in bits), 2))

    def photo(self, rng: random.Random, caption: str, size=(320, 240)) -> Image.Image:
        for _ in range(50):
            grid = np.frombuffer(rng.randbytes(8 * 12 * 3), np.uint8).reshape(8, 12, 3)
            img = Image.fromarray(grid).resize(size, Image.BILINEAR)
            draw = ImageDraw.Draw(img)
            draw.rectangle([0, size[1] - 30, size[0], size[1]], fill=(0, 0, 0))
            draw.text((10, size[1] - 26), caption[:50], fill=(255, 255, 255), font=font(18))
            h = self._hash(img)
            xor = np.bitwise_xor(self.hashes, h)
            distances = np.unpackbits(xor.view(np.uint8).reshape(-1, 8), axis=1).sum(axis=1) if len(xor) else [64]
            if min(distances) >= self.min_distance:
                self.hashes = np.append(self.hashes, h)
                return img
        raise RuntimeError("could not draw a photo far enough from the others")

    @staticmethod
    def near_duplicate(img: Image.Image, scale: float = 0.85) -> bytes:
        small = img.resize((int(img.width * scale), int(img.height * scale)), Image.BILINEAR)
        buf = io.BytesIO()
        small.save(buf, "JPEG", quality=70)
        return buf.getvalue()


# ------------------------------------------------------------------------------ records
def registry_domains(path: Path = REGISTRY) -> dict[str, str]:
    """Registered domain -> publisher name."""
    out = {}
    with open(path, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            for d in row["domains"].split(";"):
                if d:
                    out[d.lower()] = row["name"]
    return out


def _registered(host: str, domains: dict[str, str]) -> str:
    labels = host.split(".")
    for i in range(len(labels) - 1):
        if ".".join(labels[i:]) in domains:
            return ".".join(labels[i:])
    return ""


def fits(claim: str, language: str) -> bool:
    """A claim the pipeline can carry as written: short, at most two sentences, no verdict word."""
    return (20 <= len(claim) and count_words(claim) <= MAX_CLAIM_WORDS and count_sentences(claim) <= 2
            and not verdict_leak(claim, language, positional=False) and '"' not in claim)


def planted_rewrites(picked: list[dict], seed: int, garbled: bool = False) -> dict[str, dict]:
    """claim key -> the simulated writer's rewrites of that claim ({"rewrites": {style: text}, "swap": [old, new]}),
    each swap taken from the quarter's own claims in that language. A rewrite that would read as another claim of
    the quarter (never seen on the real records) is the claim's correction text instead. ``garbled``: the writer
    garbles one word of each rewrite (rewrites.garble: a planted fluency tell)."""
    unique = {claim_key(r["claim"]): r for r in picked}
    words = vocabulary([(r["claim"], r["language"]) for r in unique.values()],
                       {verdict_phrase(r["rating"]) for r in unique.values()})
    out = {}
    for key, r in unique.items():
        made = rewrites(r["claim"], r["language"], words, seed, garbled)
        for style, text in made["rewrites"].items():
            if claim_key(text) in unique:
                made["rewrites"][style] = made["rewrites"]["correction"]
        out[key] = made
    return out


# ------------------------------------------------------------------------------ pages
def _paragraphs(rec: dict, others: list[dict], rng: random.Random, target: int) -> list[str]:
    """Real paragraphs for the article: the record's own, then other records' of the same language."""
    out = list(rec["parts"])
    pool = [o for o in others if o["language"] == rec["language"]]
    while sum(len(p) for p in out) < target and pool:
        other = pool[rng.randrange(len(pool))]
        out.extend(other["parts"][:2] or [other["claim"] + (" " + other["title"] if other["title"] else "")])
    return out


def fact_check_page(rec: dict, review: dict, post_url: str, archive_url: str, figures: dict, others: list[dict],
                    rng: random.Random) -> str:
    lang = rec["language"] if rec["language"] in CHROME else "en"
    c = CHROME[lang]
    org = review["author"]["name"]
    links = [LINK_SENTENCE[lang]["post"].format(u=esc(post_url))]
    if archive_url:
        links.append(LINK_SENTENCE[lang]["archive"].format(u=esc(archive_url)))
    paras = _paragraphs(rec, others, rng, rng.randrange(1500, 9000))
    half = max(1, len(paras) // 2)
    # the record's first paragraph may be a fragment ("Source: Google Reverse Image Search"): a full stop ends it, so
    # that the sentence of the link after it is the link's own, as on a publisher's page
    lead = paras[0].rstrip() + ("" if re.search(r"[.!?।॥。！？؟:]$", paras[0].rstrip()) else ".")
    body = [figures.get("hero", ""), f"<p><strong>{esc(rec['claim'])}</strong></p>",
            f"<p>{esc(lead)} {' '.join(links)}</p>", figures.get("screenshot", "")]
    body += [f"<p>{esc(p)}</p>" for p in paras[1:half]]
    body.append("<h2>What we found</h2>")
    body += [f"<p>{esc(p)}</p>" for p in paras[half:]]
    body += [f"<p>{esc(METHOD['en'][rng.randrange(len(METHOD['en']))])}</p>",
             f"<p>{esc(CONTEXT['en'][rng.randrange(len(CONTEXT['en']))])}</p>", figures["stamp"],
             f"<p>{esc(c['rating'])}: {esc(review['reviewRating']['alternateName'])}</p>"]
    jsonld = {"@context": "https://schema.org", **review}
    return page_shell(lang, review["url"], review["name"], rec["claim"], review["datePublished"], org,
                      "\n".join(b for b in body if b), figures["stamp_url"], [], jsonld)


def paywall_page(review: dict, teaser: str) -> str:
    shell = page_shell("en", review["url"], review["name"], teaser[:150], review["datePublished"],
                       review["author"]["name"], f"<p>{esc(teaser[:400])}</p><div class=\"paywall\"><p>This article is "
                       "for subscribers. Already a subscriber? Log in. To continue reading, please subscribe.</p></div>",
                       "", [])
    return shell


def short_page(review: dict) -> str:
    return (f"<!DOCTYPE html><html><head><title>{esc(review['name'][:60])}</title></head><body>"
            f"<p>This fact check has moved.</p></body></html>")


def not_found_page() -> str:
    return ("<!DOCTYPE html><html><head><title>Page not found</title></head><body><h1>404</h1>"
            "<p>Sorry, the page you are looking for does not exist or has been removed.</p></body></html>")


# ------------------------------------------------------------------------------ the quarter
def pick_records(records: list[dict], config: QuarterConfig, domains: dict[str, str]) -> list[dict]:
    """config.reviews records that fit, shuffled by the seed; the pool is reused (same claim, another
    publisher) when the quarter is larger than it."""
    usable = [r for r in records if fits(r["claim"], r["language"]) and r["language"] in ("en", "ar")]
    rng = random.Random(config.seed)
    rng.shuffle(usable)
    seen, unique = set(), []
    for r in usable:  # the same claim text twice would be one claim with two truths
        if claim_key(r["claim"]) not in seen:
            seen.add(claim_key(r["claim"]))
            unique.append(r)
    return [unique[i % len(unique)] for i in range(config.reviews)]


def walled_post(arch: "_Archive", wall: str, post_url: str, post: dict, image_url: str | None, video_url: str | None,
                gone: bool) -> None:
    """A post whose page holds no media, and the public endpoint that does (at the URL stage 4 asks, with the
    default endpoints), in the shapes of the recorded answers of tests/fixtures/platforms/."""
    from assets.scraping import platforms

    settings = PlatformSettings()
    if wall == "twitter":
        post_id = platforms.tweet_id(post_url)
        arch.html(post_url, x_shell_page(), status=404 if gone else 200, reason="Not Found" if gone else "OK")
        arch.add(platforms.x_syndication_request(post_id, settings), json.dumps(
            {"__typename": "TweetTombstone", "tombstone": {"text": {"text": "This Post was deleted by the Post author."}}}
            if gone else syndication_answer(post_id, post, image_url, video_url)).encode(), "application/json; charset=utf-8")
    elif wall == "instagram":
        code = post_url.rstrip("/").rsplit("/", 1)[1]
        login = f"https://www.instagram.com/accounts/login/?next=/p/{code}/"
        arch.add(post_url, b"", "text/html; charset=utf-8", status=302, reason="Found", extra=[("Location", login)])
        if login not in arch.urls:
            arch.html(login, login_page("Instagram"))
        arch.html(platforms.instagram_embed_request(post_url, settings),
                  instagram_embed_page(post, "" if gone else image_url))
    else:  # youtube: a consent page; oEmbed has the title and the thumbnail
        video_id = post_url.rsplit("=", 1)[1]
        arch.html(post_url, consent_page())
        thumb = f"https://i.ytimg.com/vi/{video_id}/hqdefault.jpg"
        arch.add(platforms.oembed_request(post_url, settings.youtube_oembed_url, {"format": "json"}), json.dumps({
            "title": post["text"][:100], "author_name": post["author"], "type": "video", "version": "1.0",
            "provider_name": "YouTube", "provider_url": "https://www.youtube.com/", "thumbnail_height": 360,
            "thumbnail_width": 480, "thumbnail_url": thumb}).encode(), "application/json; charset=utf-8")
        if image_url and image_url in arch.urls and thumb not in arch.urls:
            arch.add(thumb, next(body for url, *_, body in arch.records if url == image_url), "image/jpeg")


def syndication_answer(post_id: str, post: dict, image_url: str | None, video_url: str | None) -> dict:
    """The tweet-result JSON's fields stage 4 reads, as in the recorded answer (mediaDetails, video_info.variants)."""
    media = []
    if image_url:
        media.append({"type": "photo", "media_url_https": image_url, "display_url": "pic.twitter.com/x",
                      "original_info": {"height": 240, "width": 320}})
    if video_url:
        media.append({"type": "video", "media_url_https": "", "video_info": {"aspect_ratio": [4, 3], "variants": [
            {"bitrate": 832000, "content_type": "video/mp4", "url": video_url}]}})
    return {"__typename": "Tweet", "lang": "en", "id_str": post_id, "text": post["text"],
            "user": {"name": post["author"], "screen_name": post["author"]}, "mediaDetails": media,
            "created_at": "2026-01-01T00:00:00.000Z"}


def generate(out_dir: Path, config: QuarterConfig, records: list[dict], picked: list[dict] | None = None) -> dict:
    """Write feed.json, pages.warc.gz and truth.json into ``out_dir``; returns the truth table.

    ``picked``: the quarter's reviews' records, in order, as a simulated world chooses them (its claims, publishers
    and recurring claims, dagster_project/simulation/world.py); default ``pick_records`` from ``records``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    domains = registry_domains()
    if config.label_mix not in ("real", "balanced"):
        raise ValueError(f"label_mix must be real or balanced, not {config.label_mix!r}")
    if picked is None:
        picked = pick_records(records, config, domains)
    # from a generator of their own: the feed and WARC stay the same
    written = planted_rewrites(picked, config.seed, config.garbled_rewrites)
    rng = random.Random(config.seed * 7919 + 1)
    walls = random.Random(config.seed * 7919 + 2)  # the walls' own draws (see QuarterConfig.walled_share)
    arch, pictures = _Archive(), Pictures()
    cats, weights = list(config.shares), list(config.shares.values())
    truth: dict[str, dict] = {}  # claim key -> planted truth
    elements, stamps = [], {}
    post_images: list[Image.Image] = []
    counts = {"reviews": 0, "feed_elements": 0, **{k: 0 for k in (*FAILURES, "dead_appearance", "duplicate_review",
                                                                   "videos", "images", "near_duplicates", "media_claims")}}
    for i, rec in enumerate(picked):
        key = claim_key(rec["claim"])
        fresh = key not in truth
        if fresh:
            category = rng.choices(cats, weights)[0]  # drawn either way: the rest of the quarter stays the same
            if config.label_mix == "real":
                category = planted_category(rec)
            media = category == "compromised_ooc" or rng.random() < config.media_share
            truth[key] = {"claim": rec["claim"], "language": rec["language"], "category": category,
                          "bin3": BIN3[category], "decisive_property": DECISIVE[category], "media": media,
                          "video": media and rng.random() < config.video_share,
                          "rewrites": written[key]["rewrites"], "rewrite_swap": written[key]["swap"],
                          "rectified": written[key]["rewrites"]["minimal"], "review_urls": [],
                          "source_id": rec["source_id"]}
        t = truth[key]
        host = _registered(rec["domain"], domains) if rec["domain"] else ""
        if not host or (not fresh and host in {u.split("/")[2] for u in t["review_urls"]}):
            options = FALLBACK_PUBLISHERS[rec["language"]]
            host = options[rng.randrange(len(options))]
        day = config.first_day + timedelta(days=rng.randrange(88))
        claim_day = max(config.first_day, day - timedelta(days=rng.randrange(10)))
        slug = hashlib.sha1(f"{config.seed}:{i}".encode()).hexdigest()[:10]
        url = f"https://{host}/{SIM_PATH}/{day:%Y/%m}/{slug}/"
        t["review_urls"].append(url)
        platform = "twitter" if t["video"] else rng.choice(["twitter", "twitter", "facebook", "instagram"])
        post_id = int(hashlib.sha1(f"post:{config.seed}:{i}".encode()).hexdigest()[:15], 16)
        post_url = {"twitter": f"https://twitter.com/user{post_id % 99991}/status/{post_id}",
                    "facebook": f"https://www.facebook.com/user{post_id % 99991}/posts/{post_id}",
                    "instagram": f"https://www.instagram.com/p/C{slug}/"}[platform]
        wall = ""
        if config.walled_share and platform in ("twitter", "instagram") and walls.random() < config.walled_share:
            wall = platform
            if platform == "twitter" and not t["video"] and walls.random() < config.youtube_share:
                wall, post_url = "youtube", f"https://www.youtube.com/watch?v={slug[:10]}Y"
        review = {"@type": "ClaimReview", "datePublished": day.isoformat(), "url": url, "claimReviewed": rec["claim"],
                  "name": rec["title"] or rec["claim"][:110],
                  "author": {"@type": "Organization", "name": domains[host], "url": f"https://{host}/"},
                  "reviewRating": {"@type": "Rating", "alternateName": rec["rating"]},
                  "itemReviewed": {"@type": "Claim", "datePublished": claim_day.isoformat(),
                                   "author": {"@type": "Person", "name": f"user{post_id % 99991}"}},
                  "inLanguage": rec["language"]}
        if rng.random() < 0.4:  # some publishers name the post in their markup, most only link it
            review["itemReviewed"]["appearance"] = [{"@type": "CreativeWork", "url": post_url}]
        elements.append({"@type": "DataFeedItem", "dateCreated": f"{day.isoformat()}T12:00:00Z", "item": [review],
                         "url": url})
        counts["reviews"] += 1
        if rng.random() < config.rates["duplicate_review"]:  # a second crawl of the same review
            elements.append({"@type": "DataFeedItem", "dateCreated": f"{day.isoformat()}T18:00:00Z",
                             "item": [json.loads(json.dumps(review))], "url": url})
            counts["duplicate_review"] += 1

        failure = ""
        draw = rng.random()
        for kind in FAILURES:
            draw -= config.rates[kind]
            if draw < 0:
                failure = kind
                break
        t.setdefault("failures", []).append(failure)
        if failure:
            counts[failure] += 1
            if failure == "bot_wall":
                arch.html(url, botwall_page(), status=403, reason="Forbidden")
            elif failure == "not_found":
                arch.html(url, not_found_page(), status=404, reason="Not Found")
            elif failure == "paywall":
                arch.html(url, paywall_page(review, " ".join(rec["parts"][:1]) or rec["claim"]))
            else:
                arch.html(url, short_page(review))
            continue

        # the post (or its absence), its media, and an archived copy
        site = f"https://{host}"
        dead = rng.random() < config.rates["dead_appearance"]
        archived = not dead and rng.random() < config.archive_share
        original_gone = dead or (archived and rng.random() < config.original_dead_share)
        post = {"platform": platform, "author": f"user{post_id % 99991}", "text": rec["claim"]}
        image_url = video_url = None
        picture = None
        if t["media"]:
            counts["media_claims"] += 1
            if t["video"]:
                video_url = f"https://video.twimg.com/ext_tw_video/{post_id}/pu/vid/320x240/{slug}.mp4"
                arch.mp4(video_url, video_mp4(f"rehearsal:{config.seed}:{key}", rec["claim"][:18]))
                counts["videos"] += 1
            else:
                image_url = {"twitter": f"https://pbs.twimg.com/media/S{slug}.jpg",
                             "facebook": f"https://scontent.xx.fbcdn.net/v/t1.0-9/{slug}_n.jpg",
                             "instagram": f"https://scontent.cdninstagram.com/v/t51.2885-15/e35/{slug}_n.jpg"}[platform]
                if post_images and rng.random() < config.near_duplicate_share:  # a picture reused by another claim
                    picture = post_images[rng.randrange(len(post_images))]
                    arch.jpeg(image_url, Pictures.near_duplicate(picture, 0.9))
                    counts["near_duplicates"] += 1
                else:
                    picture = pictures.photo(rng, rec["claim"][:40])
                    post_images.append(picture)
                    arch.jpeg(image_url, picture)
                counts["images"] += 1
        if wall:
            counts["walled_" + wall] = counts.get("walled_" + wall, 0) + 1  # only in quarters with walls
            walled_post(arch, wall, post_url, post, image_url, video_url, gone=original_gone)
        elif original_gone:
            arch.html(post_url, not_found_page(), status=404, reason="Not Found")
        else:
            arch.html(post_url, social_page(post_url, post, image_url=image_url, video_url=video_url))
        archive_url = ""
        if archived:
            archive_url = f"https://archive.ph/{slug[:5]}"
            if archive_url in arch.urls:
                archive_url = f"https://archive.ph/{slug[:7]}"
            snap_img = f"https://archive.ph/{slug[:5]}/{slug}.jpg"
            arch.html(archive_url, archive_today_page(archive_url, post_url, f"{claim_day.isoformat()} 10:15:00",
                                                      review["name"], rec["claim"], snap_img if picture else ""))
            if picture is not None:
                arch.jpeg(snap_img, Pictures.near_duplicate(picture, 0.95))
        if dead:
            counts["dead_appearance"] += 1

        # the fact-check page: optional header photo, a screenshot of the post, the publisher's rating graphic
        lang = rec["language"] if rec["language"] in CHROME else "en"
        c = CHROME[lang]
        org = domains[host]
        stamp_key = (host, rec["rating"])
        stamp_url = f"{site}/static/img/rating-{hashlib.sha1(rec['rating'].encode()).hexdigest()[:8]}.jpg"
        if stamp_key not in stamps:
            stamps[stamp_key] = stamp_url
            arch.jpeg(stamp_url, stamp(org, rec["rating"][:12], size=(480, 270)))
        figures = {"stamp_url": stamp_url,
                   "stamp": f'<figure class="rating"><img src="{stamp_url}" alt="{esc(c["stamp"].format(org=org))}: '
                            f'{esc(rec["rating"])}" width="480" height="270"><figcaption>{esc(c["rating"])}: '
                            f'{esc(rec["rating"])}</figcaption></figure>'}
        if picture is not None:
            shot_url = f"{site}/wp-content/uploads/{day:%Y/%m}/{slug}-screenshot.jpg"
            arch.jpeg(shot_url, Pictures.near_duplicate(picture, 0.8))
            figures["screenshot"] = (f'<figure><img src="{shot_url}" alt="{esc(c["screenshot"].format(org=org))}" '
                                     f'width="256" height="192"><figcaption>{esc(c["screenshot"].format(org=org))}'
                                     f'</figcaption></figure>')
        if rng.random() < 0.5:
            hero_url = f"{site}/wp-content/uploads/{day:%Y/%m}/{slug}-header.jpg"
            arch.jpeg(hero_url, pictures.photo(rng, review["name"][:40]))
            figures["hero"] = f'<img class="hero" src="{hero_url}" alt="{esc(review["name"])}" width="320" height="240">'
        arch.html(url, fact_check_page(rec, review, post_url, archive_url, figures, picked, rng))

    feed = {"@context": "https://schema.org", "@type": "DataFeed", "dateModified": f"{config.first_day.isoformat()}T00:00:00Z",
            "name": f"veritas simulated quarter {config.quarter} (seed {config.seed})", "dataFeedElement": elements}
    counts["feed_elements"] = len(elements)
    (out_dir / "feed.json").write_text(json.dumps(feed, ensure_ascii=False, indent=0), encoding="utf-8")
    arch.write(out_dir / "pages.warc.gz")
    table = {"simulated": True, "config": asdict(config), "counts": counts, "claims": truth}
    (out_dir / "truth.json").write_text(json.dumps(table, ensure_ascii=False, indent=0), encoding="utf-8")
    return table
