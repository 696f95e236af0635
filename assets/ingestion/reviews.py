"""Stage 1: ClaimReview ingestion from the Data Commons feed and Fact Check Tools dumps, merged and cleaned."""

import re
import unicodedata
from collections import Counter
from datetime import date, datetime, timezone
from functools import lru_cache
from typing import Any, Iterator
from urllib.parse import urlsplit

import dagster as dg
from dateutil import parser as dateparser

from assets.common import StageYield, finish_stage, quarter_of_context, stable_id, stage_asset
from dagster_project.config import PipelineResource
from dagster_project.partitions import quarter_of
from dagster_project.resources.store import StoreResource
from dagster_project.resources.web import WebResource
from schemas.frames import quarantine, validate_rows
from schemas.records import QuarantineRecord, Review

STAGE = "reviews"
SOURCE_PRIORITY = {"page": 0, "feed": 1, "api": 2}  # lower wins when fields disagree
MAX_TEXT = 5000


def normalize_claim_text(text: str) -> str:
    """The claim text used in the review key: NFKC, case-folded, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).split()).casefold()  # split() drops the same spaces as \s


def review_key(url: str, claim_text: str) -> str:
    return stable_id(url.strip(), normalize_claim_text(claim_text))


_EPOCH = re.compile(r"\d{9,13}(\.\d+)?")
_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
# two far-apart defaults: a string that leaves the day, month or year to the default parses differently
_DEFAULTS = (datetime(2001, 2, 3), datetime(2004, 5, 6))


def parse_date(value: Any) -> date | None:
    """Dates in the forms real feeds use: ISO, '2026-05-13 15:44', date-only, offsets, epoch seconds or ms.

    Offsets are converted to UTC; anything that is not a complete calendar date raises ValueError."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError("boolean is not a date")
    if isinstance(value, (str, int, float)):
        return _parse_date_cached(value)  # a feed repeats few distinct date strings; dateutil is the slow part
    return _parse_date(value)


@lru_cache(maxsize=65536, typed=True)
def _parse_date_cached(value: str | float) -> date | None:
    return _parse_date(value)


def _parse_date(value: Any) -> date | None:
    try:
        if isinstance(value, (int, float)):
            seconds = value / 1000 if value > 1e11 else value
            return datetime.fromtimestamp(seconds, tz=timezone.utc).date()
        if not isinstance(value, str):
            raise ValueError(f"unsupported date type {type(value).__name__}")
        text = value.strip()
        if _EPOCH.fullmatch(text):
            return parse_date(float(text) if "." in text else int(text))
        if _ISO_DAY.match(text):
            try:  # the C parser takes most real ISO forms; dateutil below takes the rest
                parsed = datetime.fromisoformat(text)
                return (parsed.astimezone(timezone.utc) if parsed.tzinfo else parsed).date()
            except ValueError:
                pass
        if re.match(r"^\d{4}-\d{2}-\d{2}T", text):
            parsed = dateparser.isoparse(text)
        else:
            parsed, other = (dateparser.parse(text, default=d) for d in _DEFAULTS)
            if parsed.date() != other.date():
                raise ValueError(f"incomplete date {text[:40]!r}")
        if parsed.tzinfo is not None:
            parsed = parsed.astimezone(timezone.utc)
        return parsed.date()
    except (OverflowError, OSError, TypeError) as err:  # out-of-range epochs and years surface as these
        raise ValueError(f"date out of range: {err}") from err


def _text(value: Any) -> str:
    if type(value) is str:  # the usual case first: this runs ten times per record
        return value.strip()
    if value is None:
        return ""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value).strip()
    if isinstance(value, dict):
        return _text(value.get("name") or value.get("alternateName") or value.get("@value"))
    if isinstance(value, list) and value:
        return _text(value[0])
    return ""


def _language(value: Any) -> str:
    """``inLanguage`` as a code, a name, or a Language object; the code is preferred, a name becomes its code."""
    if isinstance(value, dict):
        code = _text(value.get("alternateName"))
        return language_code(code or _text(value.get("name")))
    return language_code(_text(value))


@lru_cache(maxsize=1)
def _language_names() -> dict[str, str]:
    """English language names -> ISO codes (babel's CLDR data), e.g. 'spanish' -> 'es'."""
    from babel import Locale

    names = {}
    for code, name in Locale("en").languages.items():
        if "_" not in code:
            names.setdefault(name.casefold(), code)
    return names


@lru_cache(maxsize=4096)
def language_code(value: str) -> str:
    """A language as written in a feed ('en', 'pt-BR', 'Spanish') -> a lower-case code; unknown names kept."""
    text = value.strip().lower()
    if not text or re.fullmatch(r"[a-z]{2,3}([-_][a-z0-9]{2,8})*", text):
        return text.replace("_", "-")
    return _language_names().get(text.casefold(), text)


@lru_cache(maxsize=65536)
def detect_language(text: str) -> str:
    """The language of a claim whose record names none (py3langid; texts repeat across sources, hence the cache)."""
    import py3langid

    return py3langid.classify(text)[0] if text.strip() else ""


def _urls(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        url = item.get("url") if isinstance(item, dict) else item
        if isinstance(url, str) and url.strip().startswith(("http://", "https://")):
            out.append(url.strip())
    return out


def _required(value: Any) -> Any:
    """A required text field: stripped if it is a string, else kept as is for clean_row to reject by type."""
    return value.strip() if isinstance(value, str) else value


_NO_FIELDS: dict = {}  # read-only stand-in for an absent or malformed sub-object


def claimreview_to_row(item: dict, source: str) -> dict:
    """One schema.org ClaimReview object (feed or page markup) to a review row; raises ValueError if unusable."""
    if not isinstance(item, dict):
        raise ValueError("not_an_object")
    # this runs once per record of a feed: plain strings are stripped inline, other shapes go through _text
    get = item.get
    reviewed = get("itemReviewed")
    if not isinstance(reviewed, dict):
        reviewed = _NO_FIELDS
    rating = get("reviewRating")
    if not isinstance(rating, dict):
        rating = _NO_FIELDS
    author = get("author")
    if isinstance(author, list) and author:
        author = author[0]
    if not isinstance(author, dict):
        author = {"name": author}
    appearance, first = reviewed.get("appearance"), reviewed.get("firstAppearance")
    appearances = (_urls(appearance) if appearance is not None else []) + (_urls(first) if first is not None else [])
    if isinstance(reviewed.get("url"), str):
        appearances += _urls(reviewed["url"])
    return {
        "review_url": v.strip() if type(v := get("url")) is str else _required(v),
        "claim_text": v.strip() if type(v := get("claimReviewed")) is str else _required(v),
        "claim_date": reviewed.get("datePublished"),
        "review_date": get("datePublished"),
        "publisher_name": v.strip() if type(v := author.get("name")) is str else _text(v),
        "publisher_site": v.strip() if type(v := author.get("url")) is str else _text(v),
        "rating_text": v.strip() if type(v := rating.get("alternateName")) is str else _text(v),
        "rating_value": v.strip() if type(v := rating.get("ratingValue")) is str else _text(v),
        "rating_best": v.strip() if type(v := rating.get("bestRating")) is str else _text(v),
        "rating_worst": v.strip() if type(v := rating.get("worstRating")) is str else _text(v),
        "language": language_code(v.strip()) if type(v := get("inLanguage")) is str else _language(v),
        "claim_author": v.strip() if type(v := reviewed.get("author")) is str else _text(v),
        "title": v.strip() if type(v := get("name") or get("headline")) is str else _text(v),
        "appearance_urls": list(dict.fromkeys(appearances)) if len(appearances) > 1 else appearances,
        "sources": [source],
    }


def iter_datafeed(feed: dict, origin: str) -> Iterator[tuple[dict | None, str, Any]]:
    """Yield (row or None, reason, raw item) for every ClaimReview of a DataFeed."""
    elements = feed.get("dataFeedElement") if isinstance(feed, dict) else None
    if not isinstance(elements, list):
        yield None, "feed_without_dataFeedElement", feed
        return
    for i, element in enumerate(elements):
        yield from datafeed_element_rows(element, i, origin)


def datafeed_element_rows(element: Any, i: int, origin: str) -> Iterator[tuple[dict | None, str, Any]]:
    """The rows of one ``dataFeedElement`` entry (shared by the in-memory and the streaming feed readers)."""
    items = element.get("item") if isinstance(element, dict) else None
    if items is None:
        yield None, "element_without_items", element
        return
    for j, item in enumerate(items if isinstance(items, list) else [items]):
        try:
            yield claimreview_to_row(item, f"feed:{origin}#{i}.{j}"), "", item
        except ValueError as err:
            yield None, str(err), item


def iter_factcheck_api(claims: Any, origin: str) -> Iterator[tuple[dict | None, str, Any]]:
    """Yield rows from a Fact Check Tools ``claims:search`` answer (a list, or an object with ``claims``)."""
    if isinstance(claims, dict):
        claims = claims.get("claims")
    if not isinstance(claims, list):
        yield None, "api_without_claims", claims
        return
    for i, claim in enumerate(claims):
        if not isinstance(claim, dict) or not isinstance(claim.get("claimReview"), list):
            yield None, "claim_without_claimReview", claim
            continue
        for j, review in enumerate(claim["claimReview"]):
            if not isinstance(review, dict):
                yield None, "not_an_object", review
                continue
            publisher = review.get("publisher") if isinstance(review.get("publisher"), dict) else {}
            yield {
                "review_url": _required(review.get("url")),
                "claim_text": _required(claim.get("text")),
                "claim_date": claim.get("claimDate"),
                "review_date": review.get("reviewDate"),
                "publisher_name": _text(publisher.get("name")),
                "publisher_site": _text(publisher.get("site")),
                "rating_text": _text(review.get("textualRating")),
                "language": _language(review.get("languageCode")),
                "claim_author": _text(claim.get("claimant")),
                "title": _text(review.get("title")),
                "appearance_urls": [],
                "sources": [f"api:{origin}#{i}.{j}"],
            }, "", review


_INVISIBLE = {"Cc", "Cf", "Zs", "Zl", "Zp"}  # control, format (zero-width, bidi) and space characters


def _has_surrogates(row: dict) -> bool:
    """Lone surrogates (legal in JSON escapes) cannot be written as UTF-8, so a row holding one breaks the table."""
    texts = [v for v in row.values() if isinstance(v, str)]
    texts += [x for v in row.values() if isinstance(v, list) for x in v if isinstance(x, str)]
    try:
        "".join(texts).encode("utf-8")  # one encode per row: a lone surrogate fails wherever it sits
    except UnicodeEncodeError:
        return True
    return False


_SPACE = re.compile(r"\s")  # the same characters as str.isspace, found in C


def _url_problem(url: Any) -> tuple[str, str]:
    """(normalised url, "") or ("", reason) for a review URL."""
    if url is None or url == "":
        return "", "missing_review_url"
    if not isinstance(url, str):
        return "", "review_url_not_a_string"
    try:
        parts = urlsplit(url)
    except ValueError:
        return "", "malformed_review_url"
    if parts.scheme.lower() not in ("http", "https"):
        return "", "non_http_review_url"
    if not parts.hostname or _SPACE.search(url):
        return "", "malformed_review_url"
    return parts.scheme.lower() + url[len(parts.scheme):], ""


def _parse_dates(row: dict) -> bool:
    """Parse both dates in place (an unparseable one becomes None); False if either was unparseable."""
    ok = True
    for field in ("claim_date", "review_date"):
        try:
            row[field] = parse_date(row.get(field))
        except ValueError:
            row[field], ok = None, False
    return ok


def clean_row(row: dict, quarter: str | None) -> tuple[dict | None, str]:
    """Apply the ingestion rules to one row; returns (row, "") or (None, reason).

    ``row["quarter"]`` is set as soon as a date anchors the row (claim date, else review date), also when the
    row is then rejected, so that a rejection is counted in its own partition only."""
    dates_ok = _parse_dates(row)
    anchor = row["claim_date"] or row["review_date"]
    row["quarter"] = quarter_of(anchor) if anchor else ""
    if quarter is not None and anchor and row["quarter"] != quarter:
        return None, "other_quarter"
    row["review_url"], reason = _url_problem(row.get("review_url"))
    if reason:
        return None, reason
    text = row.get("claim_text")
    if text is not None and not isinstance(text, str):
        return None, "claim_text_not_a_string"
    if not text or all(unicodedata.category(c) in _INVISIBLE for c in text):
        return None, "missing_claim_text"
    if len(text) > MAX_TEXT:
        return None, "claim_text_too_long"
    if _has_surrogates(row):
        return None, "invalid_unicode"
    if not dates_ok:
        return None, "unparseable_date"
    if row["claim_date"] and row["review_date"] and row["claim_date"] > row["review_date"]:
        return None, "claim_date_after_review_date"
    if anchor is None:
        return None, "no_date"
    row["review_id"] = review_key(row["review_url"], row["claim_text"])
    return row, ""


def merge_rows(rows: list[dict]) -> list[dict]:
    """Duplicates (same review URL + claim text) count once; page > feed > API field by field."""
    merged: dict[str, dict] = {}
    for row in sorted(rows, key=lambda r: min(SOURCE_PRIORITY[s.split(":")[0]] for s in r["sources"])):
        seen = merged.get(row["review_id"])
        if seen is None:
            merged[row["review_id"]] = dict(row)
            continue
        for field, value in row.items():
            if field == "sources" or field == "appearance_urls":
                seen[field] = list(dict.fromkeys(seen[field] + value))
            elif not seen.get(field) and value:
                seen[field] = value
    return list(merged.values())


def fill_language(row: dict) -> None:
    """A merged review that no source gave a language gets the detected language of its claim, flagged as such."""
    if not row.get("language"):
        row["language"] = detect_language(row["claim_text"])
        row["language_detected"] = True


def _raw_quarter(raw: Any) -> str:
    """The quarter of a record the iterators could not turn into a row, from any date it carries ("" if none)."""
    if not isinstance(raw, dict):
        return ""
    reviewed = raw.get("itemReviewed") if isinstance(raw.get("itemReviewed"), dict) else {}
    for value in (reviewed.get("datePublished"), raw.get("claimDate"), raw.get("datePublished"),
                  raw.get("reviewDate"), raw.get("dateCreated")):
        try:
            day = parse_date(value)
        except ValueError:
            continue
        if day:
            return quarter_of(day)
    return ""


def clean_sources(
    sources: list[tuple[str, str, Any]], quarter: str | None, stats: StageYield, bad: list[QuarantineRecord]
) -> Iterator[dict]:
    """The cleaned rows of every source, unmerged; rejected records of the quarter are counted and quarantined.

    Kinds: datafeed (parsed JSON, or a local path that is streamed), factcheck_api, page_markup and rows
    (cached triples); ``assets.ingestion.sources.load_sources`` builds these from the config."""
    from assets.ingestion import sources as more  # assets.ingestion.sources imports this module, so its readers load here

    iterators = {"datafeed": more.iter_datafeed_any, "factcheck_api": iter_factcheck_api,
                 "page_markup": more.iter_page_markup, "rows": more.iter_triples}
    label = quarter or "all"
    for kind, origin, payload in sources:
        if kind not in iterators:
            raise ValueError(f"unknown source kind {kind!r} (expected one of {sorted(iterators)})")
        for row, reason, raw in iterators[kind](payload, origin):
            if row is not None:
                cleaned, reason = clean_row(row, None)
                if cleaned is not None:
                    yield cleaned
                    continue
            row_quarter = (row.get("quarter") if row is not None else "") or _raw_quarter(raw)
            if not _mine(quarter, row_quarter):
                continue
            stats.rows_in += 1
            if reason == "claim_date_after_review_date":
                stats.drop(reason)
            else:
                bad.append(quarantine(STAGE, label, reason, raw, source=origin))


def _mine(quarter: str | None, row_quarter: str) -> bool:
    """Whether a row counts in this partition: undated rejects count in every one."""
    return quarter is None or not row_quarter or row_quarter == quarter


def ingest(sources: list[tuple[str, str, Any]], quarter: str | None) -> tuple[list[Review], list[QuarantineRecord], StageYield]:
    """All sources for one quarter: (kind, origin, payload) -> clean merged rows, quarantine, yield.

    Rows are merged across all sources before the quarter is chosen, so that a review's partition follows its
    merged dates. Records with no usable date are quarantined in every partition (they belong to none).
    ``assets.ingestion.reviews_columnar.ingest_columnar`` gives the same result as a polars frame, at scale."""
    bad: list[QuarantineRecord] = []
    stats = StageYield()
    label = quarter or "all"
    rows = list(clean_sources(sources, quarter, stats, bad))
    copies = Counter(r["review_id"] for r in rows)
    kept = []
    for row in merge_rows(rows):
        anchor = row["claim_date"] or row["review_date"]
        row["quarter"] = quarter_of(anchor)  # the merged dates decide, not the first source's
        if not _mine(quarter, row["quarter"]):
            continue
        n = copies[row["review_id"]]
        stats.rows_in += n
        if row["claim_date"] and row["review_date"] and row["claim_date"] > row["review_date"]:
            stats.drop("claim_date_after_review_date", n)  # dates from different sources can clash after merging
            continue
        stats.drop("duplicate", n - 1)
        fill_language(row)
        kept.append(row)
    if "duplicate" not in stats.drops:
        stats.drop("duplicate", 0)
    good, invalid = validate_rows(kept, Review, STAGE, label)
    return good, bad + invalid, stats


@stage_asset(
    "ingestion",
    "Stage 1: ClaimReview records of the quarter from every configured source, merged and cleaned.",
)
def reviews(
    context: dg.AssetExecutionContext, pipeline: PipelineResource, store: StoreResource, web: WebResource
) -> dg.MaterializeResult:
    quarter = quarter_of_context(context)
    if not pipeline.sources:
        raise dg.Failure("no ClaimReview sources configured (config file: sources:)")
    from assets.ingestion.sources import load_sources

    from assets.ingestion.reviews_columnar import ingest_columnar

    payloads, source_status = load_sources(pipeline.sources, web, store.base / "sources")
    frame, bad, stats = ingest_columnar(payloads, quarter)  # the whole feed is read for every quarter: frames, not objects
    records, invalid = validate_rows(frame.iter_rows(named=True), Review, STAGE, quarter)
    stats.extra["sources"] = dg.MetadataValue.json(source_status)  # new / changed / unchanged per feed URL
    stats.extra.update(mix_metadata(records, lambda r: _site_of(r.review_url)))
    return finish_stage(context, store, STAGE, quarter, records, Review, stats, bad + invalid)


TOP_PUBLISHERS = 10
TOP_LANGUAGES = 20


def _site_of(url: str) -> str:
    from assets.ingestion.trusted_reviews import host_of, registered_domain

    host = host_of(url)
    return registered_domain(host) if host else ""


def mix_metadata(records: list, publisher_of) -> dict:
    """The quarter's top publishers and language mix as numeric metadata (``publisher/<key>``, ``language/<code>``,
    the rest summed as ``.../other``), plus the full language counts as JSON."""
    out: dict = {}
    publishers = Counter(publisher_of(r) or "unknown" for r in records)
    languages = Counter(r.language or "unknown" for r in records)
    for prefix, counts, top in (("publisher", publishers, TOP_PUBLISHERS), ("language", languages, TOP_LANGUAGES)):
        shown = counts.most_common(top)
        for key, n in shown:
            out[f"{prefix}/{key}"] = n
        rest = sum(counts.values()) - sum(n for _, n in shown)
        if rest:
            out[f"{prefix}/other"] = rest
    out["languages_detected"] = sum(1 for r in records if r.language_detected)
    out["languages"] = dg.MetadataValue.json(dict(languages.most_common()))
    return out
