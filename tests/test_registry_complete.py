"""Issue 14: the publisher registry knows every publisher of the real records, and the ones Q4-2025 reported unknown.

Fixtures: one real record per distinct (organisation, fact-check host) of the IFCN CoronaVirusFacts sample
(109 rows) and one real Fact Check Tools claim per distinct (publisher, site, host) of the Arabic set (22 claims,
25 reviews); see tests/fixtures/README.md."""

import csv
import json
from collections import Counter

import pytest

from assets.ingestion.publisher_registry import REGISTRY_COLUMNS, read_registry_rows, registry_csv
from assets.ingestion.merging import ingest
from assets.ingestion.publishers import load_registry
from tests.test_trusted_reviews import filter_trusted  # the stage's frame filter, given and giving records
from dagster_project.config import PROJECT_ROOT
from schemas.records import Review
from tests.ingest_shapes import FIXTURES, feed, ifcn_api_claims, ifcn_feed_items

REGISTRY = PROJECT_ROOT / "registry" / "publishers.csv"


@pytest.fixture(scope="module")
def publishers():
    return load_registry(str(REGISTRY))


@pytest.fixture(scope="module")
def real_reviews():
    with open(FIXTURES / "ifcn_publishers_excerpt.csv", newline="", encoding="utf-8") as fh:
        ifcn = list(csv.DictReader(fh))
    gfc = json.loads((FIXTURES / "gfc_publishers_excerpt.json").read_text(encoding="utf-8"))
    good, bad, _ = ingest([("factcheck_api", "gfc.json", gfc), ("datafeed", "ifcn_feed.json", feed(ifcn_feed_items(ifcn))),
                           ("factcheck_api", "ifcn_api.json", ifcn_api_claims(ifcn))], None)
    assert bad == []
    return good


# Known publishers that are no IFCN/EFCSN signatory (no status in the registry): dropped, never reported unknown.
NOT_SIGNATORY_NAMES = {"يوب يوب", "منصة فالصو لرصد خطاب الكراهية والأخبار الزائفة", "المشاهد نت", "المشاهد", "شييك",
                       "تيقن", "Maharat News", '"إعلاميون من أجل صحافة استقصائية عربية (أريج)"',
                       "Agencia Ocote", "Spondeo Media", "El Surtidor", "INFACT"}


def test_stages_1_2_on_real_records_report_no_publisher_unknown(real_reviews, publishers):
    assert len(real_reviews) == 133  # 109 IFCN rows (feed and API merged) + 24 gfc reviews (one late claim dropped)
    kept, stats, unknown = filter_trusted(real_reviews, publishers)
    assert unknown == Counter()  # every publisher of the real records is in the registry
    assert len(kept) == 120 and dict(stats.drops) == {"not_a_signatory": 13}  # Yoop Yup twice
    assert len({k.publisher_id for k in kept}) == 79
    kept_ids = {k.review_id for k in kept}
    assert {r.publisher_name for r in real_reviews if r.review_id not in kept_ids} == NOT_SIGNATORY_NAMES


def _review(url: str, name: str = "") -> Review:
    return Review(review_id=url, review_url=url, claim_text="c", quarter="2025Q4", publisher_name=name)


# Real pages of each publisher (their own URLs, from the IFCN application pages and the publishers' sites).
ISSUE_14 = [
    ("https://www.altnews.in/englishclone/methodology-for-fact-checking/", "alt-news", True),
    ("https://factcheckhub.com/ifcn-pauses-acceptance-of-new-signatories/", "factcheckhub", True),
    ("https://medicaldialogues.in/fact-check-methodology", "medical-dialogues", True),  # IFCN profile (issue 25)
    ("https://health.medicaldialogues.in/fact-check-methodology", "medical-dialogues", True),
    ("https://theconversation.com/au/factcheck", "the-conversation-factcheck", False),
    ("https://www.reuters.com/fact-check/about/", "reuters-fact-check", True),
]


@pytest.mark.parametrize("url, publisher_id, trusted", ISSUE_14)
def test_issue_14_publishers_are_known(publishers, url, publisher_id, trusted):
    kept, stats, unknown = filter_trusted([_review(url)], publishers)
    assert unknown == Counter()
    assert [k.publisher_id for k in kept] == ([publisher_id] if trusted else [])
    assert dict(stats.drops) == ({} if trusted else {"not_a_signatory": 1})
    row = next(p for p in publishers if p.publisher_id == publisher_id)
    assert row.trusted is trusted


def test_reuters_is_found_by_name_too(publishers):
    kept, _, unknown = filter_trusted([_review("https://example.org/x", "Reuters")], publishers)
    assert unknown == Counter() and [k.publisher_id for k in kept] == ["reuters-fact-check"]


def test_every_row_names_its_source_and_round_trips():
    rows = read_registry_rows(REGISTRY)
    assert REGISTRY_COLUMNS[-1] == "source"
    assert [r["publisher_id"] for r in rows if not r["source"].strip()] == []
    assert registry_csv(rows) == REGISTRY.read_text(encoding="utf-8")  # the refresh writes the file back unchanged
    ids = [r["publisher_id"] for r in rows]
    assert len(ids) == len(set(ids))
    domains = [d for r in rows for d in r["domains"].split(";") if d]
    assert len(domains) == len(set(domains))  # one domain, one publisher
