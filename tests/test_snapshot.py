"""The bundled offline demo snapshot (demo/snapshot) is coherent: feed, WARC and fixtures agree."""

import gzip
import io
import json
from collections import Counter
from pathlib import Path

import pytest
from PIL import Image
from warcio.archiveiterator import ArchiveIterator

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "demo" / "snapshot"
FIXTURES = ROOT / "tests" / "fixtures"

AFP_URL = "https://faktencheck.afp.com/doc.afp.com.B2LA2G3"
MISSING_URL = ("https://facta.news/notizia-falsa/2020/05/06/non-e-vero-che-bill-gates-ha-ammesso-che-i-vaccini-"
               "servono-a-sterilizzare-e-ridurre-la-popolazione/")
BOTWALL_URL = ("https://newschecker.in/2020/05/23/a-message-claiming-four-common-treatments-recommended-by-doctors-"
               "at-nanavati-hospital-is-fake/")


def _quarter(date_text):
    # the feed mixes "2020-04-14" and "2026-05-13 15:44"; the first 7 characters are enough here
    year, month = int(date_text[:4]), int(date_text[5:7])
    return f"{year}Q{(month - 1) // 3 + 1}"


@pytest.fixture(scope="module")
def feed():
    return json.loads((SNAPSHOT / "feed.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def reviews(feed):
    return [r for el in feed["dataFeedElement"] for r in (el.get("item") or [])]


@pytest.fixture(scope="module")
def warc():
    """url -> (status, content type, body) for every response record."""
    out = {}
    with open(SNAPSHOT / "pages.warc.gz", "rb") as fh:
        for rec in ArchiveIterator(fh):
            if rec.rec_type == "response":
                url = rec.rec_headers.get_header("WARC-Target-URI")
                out[url] = (rec.http_headers.get_statuscode(), rec.http_headers.get_header("Content-Type"),
                            rec.content_stream().read(), rec.http_headers.get_header("Location"))
    return out


def test_feed_shape_and_messiness(feed):
    elements = feed["dataFeedElement"]
    assert feed["@type"] == "DataFeed"
    assert len(elements) == 23
    assert sum(1 for el in elements if el["item"] is None) == 1
    assert sum(1 for el in elements if el["item"] == []) == 1


def test_claimreview_counts_per_quarter(reviews):
    assert all(r["@type"] == "ClaimReview" for r in reviews)
    quarters = Counter(_quarter(r["itemReviewed"].get("datePublished") or r["datePublished"]) for r in reviews)
    assert quarters == {"2020Q2": 19, "2026Q2": 2}


def test_deliberate_defects(reviews):
    no_url = [r for r in reviews if "url" not in r]
    assert [r["author"]["name"] for r in no_url] == ["TheJournal.ie"]
    keys = Counter((r["url"], r["claimReviewed"]) for r in reviews if "url" in r)
    assert [k[0] for k, n in keys.items() if n > 1] == ["https://fullfact.org/online/tasuku-honjo-coronavirus/"]
    late = [r["url"] for r in reviews if r["itemReviewed"].get("datePublished", "") > r["datePublished"][:10]]
    assert late == ["https://pesacheck.org/false-there-is-no-evidence-that-aspirin-cures-covid-19-1911839c4a68"]
    assert [r["datePublished"] for r in reviews if r.get("url") == AFP_URL] == ["2026-05-13 15:44"]
    assert sum(1 for r in reviews if r["itemReviewed"].get("appearance")) == 6  # 5 + the duplicate
    # the AFP record is the page's own JSON-LD, which has no inLanguage
    assert Counter(type(r.get("inLanguage")).__name__ for r in reviews) == {"str": 12, "dict": 8, "NoneType": 1}


def test_every_review_page_is_archived_except_the_missing_one(reviews, warc):
    urls = {r["url"] for r in reviews if "url" in r}
    assert len(urls) == 19
    assert urls - set(warc) == {MISSING_URL}
    assert warc[BOTWALL_URL][0] == "403"
    assert b"Please verify you are human" in warc[BOTWALL_URL][2]


def test_failures_and_short_links(warc):
    assert warc["https://www.facebook.com/634352629929715/posts/3132801580084795"][0] == "404"
    status, _, _, location = warc["https://t.co/4mQz7XbR2k"]
    assert (status, location) == ("301", "https://twitter.com/monserr066/status/1244918870768582656")
    assert b'value="https://archive.is/2020.04.14-101500/https://www.facebook.com/watch/?v=2585538508365616"' in \
        warc["http://archive.is/Q0ff0"][2]


def test_media_are_real_files(warc):
    jpegs = [body for _, ctype, body, _ in warc.values() if ctype == "image/jpeg"]
    videos = [body for _, ctype, body, _ in warc.values() if ctype == "video/mp4"]
    assert len(jpegs) == 64 and len(videos) == 3
    for body in jpegs:
        with Image.open(io.BytesIO(body)) as img:
            assert img.format == "JPEG"
        assert len(body) < 40_000
    for body in videos:
        assert body[4:8] == b"ftyp" and len(body) < 300_000


def test_afp_page_is_the_real_page(warc):
    with gzip.open(FIXTURES / "afp_B2LA2G3.html.gz", "rb") as fh:
        assert warc[AFP_URL][2] == fh.read()


def test_snapshot_stays_small():
    total = sum(p.stat().st_size for p in SNAPSHOT.rglob("*") if p.is_file())
    assert total < 4_000_000
