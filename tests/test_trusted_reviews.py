"""Stage 2 (publisher filtering) on the real Fact Check Tools excerpt and demo feed, and on tricky URLs."""

import json
from collections import Counter
from pathlib import Path

import pytest

from assets.ingestion import publishers as matching
from assets.ingestion.merging import ingest
from assets.ingestion.publishers import PublisherIndex, host_of, load_registry
from schemas.frames import from_frame, to_frame
from schemas.records import Review, TrustedReview

ROOT = Path(__file__).resolve().parents[1]
REGISTRY = ROOT / "registry" / "publishers.csv"



def filter_trusted(reviews: list[Review], publishers):
    """The stage's frame filter, given and giving records."""
    kept, stats, unknown = matching.filter_trusted(to_frame(reviews, Review), publishers)
    return from_frame(kept, TrustedReview), stats, unknown


@pytest.fixture(scope="module")
def publishers():
    return load_registry(str(REGISTRY))


@pytest.fixture(scope="module")
def index(publishers):
    return PublisherIndex(publishers)


@pytest.fixture(scope="module")
def gfc_reviews():
    claims = json.loads((ROOT / "tests" / "fixtures" / "gfc_claims_search_ar_excerpt.json").read_text(encoding="utf-8"))
    good, _, _ = ingest([("factcheck_api", "gfc.json", claims)], None)
    return good


def _review(url: str, name: str = "", site: str = "") -> Review:
    return Review(review_id="t", review_url=url, claim_text="c", quarter="2020Q2", publisher_name=name, publisher_site=site)


def test_registry_loads(publishers):
    assert len(publishers) == 114
    # 73 IFCN only (Medical Dialogues since issue 25) + 28 IFCN and EFCSN; 12 listed without status, The
    # Conversation FactCheck's IFCN status expired
    assert sum(p.trusted for p in publishers) == 101
    afp = next(p for p in publishers if p.publisher_id == "afp-fact-check")
    assert afp.domains == ["afp.com"] and "في ميزان فرانس برس" in afp.aliases and afp.trusted
    yoop = next(p for p in publishers if p.publisher_id == "yoop-yup")
    assert yoop.domains == ["yoopyup.com"] and not yoop.trusted


def test_gfc_reviews_by_registry(gfc_reviews, publishers, index):
    assert len(gfc_reviews) == 48
    matches = [index.match(r) for r in gfc_reviews]
    assert Counter(how for _, how in matches) == {"domain": 48}  # every review URL host is registered
    by_publisher = Counter(p.publisher_id for p, _ in matches)
    assert by_publisher == {"misbar": 18, "afp-fact-check": 12, "fatabyyano": 11, "yoop-yup": 2, "falso": 1,
                            "al-mushahid": 1, "chayyek": 1, "maharat-news": 1, "tayqan": 1}
    kept, stats, unknown = filter_trusted(gfc_reviews, publishers)
    assert len(kept) == 41
    assert stats.rows_in == 48
    assert dict(stats.drops) == {"not_a_signatory": 7}
    assert stats.extra["matched_by/domain"] == 41 and "matched_by/alias" not in stats.extra
    assert unknown == Counter()  # no unknown publisher in this excerpt
    assert Counter(r.publisher_id for r in kept) == {"misbar": 18, "afp-fact-check": 12, "fatabyyano": 11}
    assert {r.publisher_country for r in kept} == {"Qatar", "France", "Jordan"}
    # the two Misbar reviews without a publisher name are matched by URL all the same
    assert sum(r.publisher_name == "" and r.publisher_id == "misbar" for r in kept) == 2


def test_gfc_reviews_without_url_match_fall_back_to_site_and_alias(gfc_reviews, publishers):
    # hide the review URLs behind an unknown host: the API's bare `site` and then the name must still identify them
    hidden = [r.model_copy(update={"review_url": "https://mirror.example.net/x"}) for r in gfc_reviews]
    kept, stats, unknown = filter_trusted(hidden, publishers)
    assert len(kept) == 41 and stats.extra["matched_by/domain"] == 41
    no_site = [r.model_copy(update={"publisher_site": ""}) for r in hidden]
    kept, stats, unknown = filter_trusted(no_site, publishers)
    # now the 2 nameless Misbar reviews and AFP's Burmese-named review (its name is no alias) are unknown;
    # every other review matches by its Arabic or English name
    assert unknown == Counter({"example.net": 3})  # reported by registered domain
    assert stats.extra["matched_by/alias"] == 38
    assert dict(stats.drops) == {"not_a_signatory": 7, "unknown_publisher": 3}


@pytest.mark.parametrize(
    "url, name, site, expected, how",
    [
        ("https://factuel.afp.com/le-prix-nobel", "", "", "afp-fact-check", "domain"),
        ("https://factcheckarabic.afp.com/doc.afp.com.1", "", "", "afp-fact-check", "domain"),
        ("https://hindi.boomlive.in/fake-news/x", "", "", "boom", "domain"),
        ("https://www.politifact.com/factchecks/2020/apr/07/x/", "", "", "politifact", "domain"),
        ("https://WWW.FullFact.ORG/online/x/", "", "", "full-fact", "domain"),  # stage 1 lower-cases the scheme
        ("https://fullfact.org:443/online/x/", "", "", "full-fact", "domain"),
        ("https://factuel.afp.com./x", "", "", "afp-fact-check", "domain"),
        ("https://science.feedback.org/review/x", "", "", "science-feedback", "domain"),
        ("https://politica.estadao.com.br/blogs/estadao-verifica/x", "", "", "estadão-verifica", "domain"),
        ("https://notafp.com/x", "", "", None, ""),  # a lookalike must not match afp.com
        ("https://afp.com.evil.net/x", "", "", None, ""),
        ("https://feedback.org/x", "", "", None, ""),  # the parent of a registered subdomain is not it
        ("https://notafp.com/x", "AFP Factuel", "", "afp-fact-check", "alias"),
        ("https://mirror.example.net/x", "في ميزان فرانس برس", "", "afp-fact-check", "alias"),
        ("https://mirror.example.net/x", "  afp   FAKTENCHECK ", "", "afp-fact-check", "alias"),
        ("https://mirror.example.net/x", "Maldita", "", "maldita-es", "alias"),
        ("https://mirror.example.net/x", "Morning Buzz News", "", None, ""),
        ("https://mirror.example.net/x", "", "misbar.com", "misbar", "domain"),  # the API's bare site
        ("https://mirror.example.net/x", "AFP", "https://www.snopes.com/", "snopes", "domain"),  # domain beats name
        ("https://www.snopes.com/x", "AFP", "", "snopes", "domain"),
        ("http://[::1/x", "", "", None, ""),  # an unparseable host is no match, not an error
    ],
)
def test_publisher_index_tricky_urls(index, url, name, site, expected, how):
    publisher, matched_by = index.match(_review(url, name, site))
    assert (publisher.publisher_id if publisher else None, matched_by) == (expected, how)


def test_host_of():
    assert host_of("https://WWW.Factuel.AFP.com/x?y=1") == "factuel.afp.com"
    assert host_of("misbar.com") == "misbar.com"
    assert host_of("www.misbar.com/path") == "misbar.com"
    assert host_of("") == ""
    assert host_of("http://[::1") == ""


def test_demo_feed_trusted(publishers):
    feed = json.loads((ROOT / "demo" / "snapshot" / "feed.json").read_text(encoding="utf-8"))
    q2, _, _ = ingest([("datafeed", "feed.json", feed)], "2020Q2")
    kept, stats, unknown = filter_trusted(q2, publishers)
    assert len(kept) == 16 and dict(stats.drops) == {}
    assert Counter(r.publisher_id for r in kept) == {
        "afp-fact-check": 2, "full-fact": 2, "politifact": 2, "africa-check": 1, "maldita-es": 1, "teyit": 1,
        "animal-político": 1, "checknews": 1, "aap-factcheck": 1, "science-feedback": 1, "factcheck-org": 1,
        "newschecker": 1, "facta": 1}
    assert stats.extra["matched_by/domain"] == 16
    q26, _, _ = ingest([("datafeed", "feed.json", feed)], "2026Q2")
    kept, stats, unknown = filter_trusted(q26, publishers)
    assert [r.publisher_id for r in kept] == ["afp-fact-check"]
    assert unknown == Counter({"morningbuzz-news.com": 1})
    assert dict(stats.drops) == {"unknown_publisher": 1}
