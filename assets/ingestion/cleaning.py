"""Stage 1's cleaning rules: every source row is checked, its dates parsed, its review URL normalised and its key
computed; a row that breaks a rule is rejected with a stable reason.

Rows in batches: the vectorised checks certify most rows at once (an http URL with a plain host, a claim text with a
letter or digit and at most 5,000 characters, dates that parse, claim date not after the review date); every other
row goes through ``clean_row`` one by one, so reasons and results are exactly those of the rules below. Reads the
triples of ``assets.ingestion.sources``; ``assets.ingestion.merging`` joins what comes out.
"""

import gc
import re
import unicodedata
from datetime import date, datetime, timezone
from functools import lru_cache
from operator import itemgetter
from typing import Any, Callable, Iterable

import polars as pl
from dateutil import parser as dateparser

from assets.ingestion.sources import ElementRef, normalize_claim_text, read_source
from assets.ingestion.url_rules import url_problem, without_credentials
from assets.rules.ids import stable_id
from dagster_project.core.quarters import FIRST_DAY, LAST_DAY, in_date_range, quarter_of
from schemas.frames import polars_schema, quarantine
from schemas.records import Review

STAGE = "reviews"
MAX_TEXT = 5000


def review_key(url: str, claim_text: str) -> str:
    return stable_id(url.strip(), normalize_claim_text(claim_text))


_EPOCH = re.compile(r"\d{9,13}(\.\d+)?")
_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
# two far-apart defaults: a string that leaves the day, month or year to the default parses differently
_DEFAULTS = (datetime(2001, 2, 3), datetime(2004, 5, 6))


class AmbiguousDate(ValueError):
    """A date written day and month in an order the publisher's locale decides: "12/08/2025" is 8 December in the
    United States and 12 August in most other places."""


# day and month as numbers, then a year: only the order the writer's locale uses tells them apart
_NUMERIC_DAY = re.compile(r"(\d{1,2})[/.-](\d{1,2})[/.-](\d{2}|\d{4})\b")


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
            try:
                parsed = dateparser.isoparse(text)
            except ValueError:
                # ISO with an offset real publishers write short (``+5:30``): dateutil's general parser reads it;
                # what it cannot read (``2020-13-45T...``) still raises and is quarantined
                parsed = dateparser.parse(text)
        else:
            numeric = _NUMERIC_DAY.match(text)
            if numeric and numeric[1] != numeric[2] and max(int(numeric[1]), int(numeric[2])) <= 12:
                raise AmbiguousDate(f"day and month cannot be told apart in {text[:40]!r}")
            parsed, other = (dateparser.parse(text, default=d) for d in _DEFAULTS)
            if parsed.date() != other.date():
                raise ValueError(f"incomplete date {text[:40]!r}")
        if parsed.tzinfo is not None:
            parsed = parsed.astimezone(timezone.utc)
        return parsed.date()
    except (OverflowError, OSError, TypeError) as err:  # out-of-range epochs and years surface as these
        raise ValueError(f"date out of range: {err}") from err


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


def _parse_dates(row: dict) -> str:
    """Parse both dates in place (an unparseable one becomes None); the reason if either was unparseable."""
    problem = ""
    for field in ("claim_date", "review_date"):
        try:
            row[field] = parse_date(row.get(field))
        except ValueError as err:
            row[field] = None
            problem = problem or ("ambiguous_date" if isinstance(err, AmbiguousDate) else "unparseable_date")
    return problem


def clean_row(row: dict, quarter: str | None) -> tuple[dict | None, str]:
    """Apply the ingestion rules to one row; returns (row, "") or (None, reason).

    ``row["quarter"]`` is set as soon as a date anchors the row (claim date, else review date), also when the
    row is then rejected, so that a rejection is counted in its own partition only; an anchor outside the
    partitions (``date_out_of_range``: year 9999, year 1) leaves it "", counted in every quarter as undated."""
    date_problem = _parse_dates(row)
    anchor = row["claim_date"] or row["review_date"]
    row["quarter"] = quarter_of(anchor) if anchor and in_date_range(anchor) else ""
    if quarter is not None and anchor and row["quarter"] != quarter:
        return None, "other_quarter"
    row["review_url"], reason = url_problem(row.get("review_url"))
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
    if date_problem:
        return None, date_problem
    if not all(in_date_range(day) for day in (row["claim_date"], row["review_date"]) if day):
        return None, "date_out_of_range"
    if row["claim_date"] and row["review_date"] and row["claim_date"] > row["review_date"]:
        return None, "claim_date_after_review_date"
    if anchor is None:
        return None, "no_date"
    row["review_id"] = review_key(row["review_url"], row["claim_text"])
    return row, ""



def _raw_quarter(raw: Any) -> str:
    """The quarter of a record the iterators could not turn into a row, from any date it carries ("" if none, or if
    the date is outside the partitions)."""
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
            return quarter_of(day) if in_date_range(day) else ""
    return ""


# ---- rows in batches --------------------------------------------------------------------------------------------

BATCH = 10_000
REVIEW_SCHEMA = polars_schema(Review)
_TEXT_FIELDS = ("publisher_name", "publisher_site", "rating_text", "rating_value", "rating_best", "rating_worst",
                "language", "claim_author", "title")
_RAW_SCHEMA = {"review_url": pl.Utf8, "claim_text": pl.Utf8, "claim_date": pl.Utf8, "review_date": pl.Utf8,
               **{f: pl.Utf8 for f in _TEXT_FIELDS}, "appearance_urls": pl.List(pl.Utf8),
               "sources": pl.List(pl.Utf8), "_seq": pl.Int64}
# an http(s) URL whose host is plain ASCII and that holds no whitespace: urlsplit accepts it as it is
_PLAIN_URL = r"^(?i:https?)://[A-Za-z0-9.-]+([/?#]\S*)?$"  # a port goes the per-record way: is it one?
_HAS_WORD = r"[\p{L}\p{N}]"  # a letter or digit: the text is not blank or invisible-only
_DATE_FAIL = date(1, 1, 1)  # marks a date string that parse_date rejects


_SEP = "\x1f"  # list fields travel as one joined string into the frame, split again there


_DATE_TYPES = (str, type(None))


def _plain_list(values: list) -> bool:
    """No empty entry and no separator in any: the list survives the join and split of ``_raw_frame``."""
    try:  # one C-level join instead of a generator per row
        return "" not in values and _SEP not in "".join(values)
    except TypeError:  # an entry that is not a string
        return all(u and _SEP not in u for u in values)


def _simple(row: dict) -> bool:
    """Field types the vectorised path handles; anything else is cleaned record by record."""
    return (type(row["review_url"]) is str and type(row["claim_text"]) is str
            and type(row["claim_date"]) in _DATE_TYPES and type(row["review_date"]) in _DATE_TYPES
            and _plain_list(row["appearance_urls"]) and _plain_list(row["sources"]))


def _raw_frame(rows: list[dict]) -> pl.DataFrame:
    """Rows to a frame column by column (list fields joined), much faster than polars' own dict reader."""
    names = list(_RAW_SCHEMA)
    try:  # feed rows have every field: one C-level pass picks them all, then zip turns rows into columns
        picked = list(zip(*map(itemgetter(*names), rows))) if rows else [() for _ in names]
    except KeyError:  # e.g. API rows, which have no rating scale
        picked = [[r.get(c) for r in rows] for c in names]
    columns: dict[str, Any] = dict(zip(names, picked))
    columns["appearance_urls"] = list(map(_SEP.join, columns["appearance_urls"]))
    columns["sources"] = list(map(_SEP.join, columns["sources"]))
    schema = {**_RAW_SCHEMA, "appearance_urls": pl.Utf8, "sources": pl.Utf8}
    df = pl.DataFrame(columns, schema=schema)
    empty = pl.lit([], dtype=pl.List(pl.Utf8))
    return df.with_columns(
        pl.when(pl.col(c) == "").then(empty).otherwise(pl.col(c).str.split(_SEP)).alias(c)
        for c in ("appearance_urls", "sources")
    ).with_columns(pl.col(c).fill_null("") for c in _TEXT_FIELDS)


def _parse_unique(values: pl.Series) -> dict[str, date | None]:
    out = {}
    for value in values.drop_nulls().unique().to_list():
        try:
            out[value] = parse_date(value)
        except ValueError:
            out[value] = _DATE_FAIL
    return out


def _review_ids(urls: list[str], texts: list[str]) -> list[str]:
    normal = {t: normalize_claim_text(t) for t in set(texts)}  # one claim is often reviewed at several URLs
    return [stable_id(u, normal[t]) for u, t in zip(urls, texts)]


def _quarter_expr(day: pl.Expr) -> pl.Expr:
    return pl.concat_str(day.dt.year().cast(pl.Utf8), pl.lit("Q"), ((day.dt.month() - 1) // 3 + 1).cast(pl.Utf8))


def _clean_batch(rows: list[dict]) -> tuple[pl.DataFrame, list[dict]]:
    """(certified clean rows as a frame, rows for the per-record path)."""
    try:
        raw = _raw_frame(rows)
    except Exception:  # noqa: BLE001 - e.g. a lone surrogate that Arrow cannot hold: let clean_row judge
        return pl.DataFrame(schema={**REVIEW_SCHEMA, "_seq": pl.Int64}), rows
    dates = _parse_unique(pl.concat([raw["claim_date"], raw["review_date"]]))
    df = raw.with_columns(
        pl.col("claim_date").replace_strict(dates, default=None, return_dtype=pl.Date),
        pl.col("review_date").replace_strict(dates, default=None, return_dtype=pl.Date),
    )
    ok = (
        pl.col("review_url").str.contains(_PLAIN_URL)
        & pl.col("claim_text").str.contains(_HAS_WORD)
        & (pl.col("claim_text").str.len_chars() <= MAX_TEXT)
        & (pl.col("claim_date").is_not_null() | pl.col("review_date").is_not_null())
        & (pl.col("claim_date").is_null() | (pl.col("claim_date") != _DATE_FAIL))
        & (pl.col("review_date").is_null() | (pl.col("review_date") != _DATE_FAIL))
        # outside the partitions (and _DATE_FAIL): the per-record path names the reason
        & (pl.col("claim_date").is_null() | pl.col("claim_date").is_between(FIRST_DAY, LAST_DAY))
        & (pl.col("review_date").is_null() | pl.col("review_date").is_between(FIRST_DAY, LAST_DAY))
        & ~(pl.col("claim_date") > pl.col("review_date")).fill_null(False)
    )
    df = df.with_columns(_ok=ok)
    rest_seq = set(df.filter(~pl.col("_ok"))["_seq"].to_list())
    good = df.filter(pl.col("_ok")).drop("_ok").with_columns(
        # the scheme lower-cased, the rest kept as written (what clean_row does)
        review_url=pl.col("review_url").str.slice(0, pl.col("review_url").str.find("://")).str.to_lowercase()
        + pl.col("review_url").str.slice(pl.col("review_url").str.find("://")),
        quarter=_quarter_expr(pl.coalesce("claim_date", "review_date")),
        language_detected=pl.lit(False),
    )
    good = good.with_columns(review_id=pl.Series(_review_ids(good["review_url"].to_list(), good["claim_text"].to_list()),
                                                 dtype=pl.Utf8))
    return good.select(*REVIEW_SCHEMA, "_seq"), [r for r in rows if r["_seq"] in rest_seq]


def _frame_of_clean(rows: list[dict]) -> pl.DataFrame:
    for row in rows:
        row.setdefault("language_detected", False)
    df = pl.DataFrame(rows, schema={**REVIEW_SCHEMA, "_seq": pl.Int64}, orient="row" if not rows else None)
    return df.with_columns(pl.col(c).fill_null("") for c in _TEXT_FIELDS)  # absent fields are "" as in Review


# the record as UTF-8 bytes, lone surrogates kept (legal in JSON escapes, refused by Arrow strings)
REJECT_SCHEMA = {"_seq": pl.Int64, "quarter": pl.Utf8, "reason": pl.Utf8, "source": pl.Utf8, "record": pl.Binary}


def reject_record(reason: str, raw: Any) -> bytes:
    """A rejected record's ``record`` value (``REJECT_SCHEMA``)."""
    return quarantine(STAGE, "", reason, without_credentials(raw)).record.encode("utf-8", "surrogatepass")


def collect_frames(sources: Iterable[tuple[str, str, Any]], batch: int = BATCH,
                   emit: Callable[[pl.DataFrame], None] | None = None,
                   seq: int = 0) -> tuple[list[pl.DataFrame], pl.DataFrame]:
    """Every source's cleaned rows as frames in reading order (unmerged, ``_seq`` = reading order, counted on from
    ``seq``), and every rejected record: its reading order, the quarter its own dates give ("" when it has none),
    reason, source, the record as JSON text and ``_ref``, whether the record names an element by its index.
    ``emit`` takes each frame as it is made instead of the list (which is then empty)."""
    frames: list[pl.DataFrame] = []
    emit = emit or frames.append
    pending: list[tuple[dict, Any, str]] = []
    rejected: list[tuple] = []

    def reject(n: int, row: dict | None, reason: str, raw: Any, origin: str) -> None:
        row_quarter = (row.get("quarter") if row is not None else "") or _raw_quarter(raw)
        rejected.append((n, row_quarter, reason, origin, reject_record(reason, raw), isinstance(raw, ElementRef)))

    def flush() -> None:
        simple, other = [], []
        for entry in pending:
            (simple if _simple(entry[0]) else other).append(entry)
        good, rest = _clean_batch([row for row, _, _ in simple])
        if rest:
            rest_ids = {id(r) for r in rest}
            other.extend(entry for entry in simple if id(entry[0]) in rest_ids)
        cleaned = []
        for row, raw, origin in other:
            n = row.pop("_seq")
            done, reason = clean_row(row, None)
            if done is None:
                reject(n, row, reason, raw, origin)
            else:
                done["_seq"] = n
                cleaned.append(done)
        batch_frame = pl.concat([good, _frame_of_clean(cleaned)]) if cleaned else good
        emit(batch_frame.sort("_seq") if cleaned else batch_frame)  # frames stay in reading order
        pending.clear()

    enabled = gc.isenabled()
    gc.disable()  # parsed records are acyclic; generational passes over millions of young dicts only cost time
    try:
        for kind, origin, payload in sources:
            for row, reason, raw in read_source(kind, origin, payload):
                seq += 1
                if row is None:
                    reject(seq, None, reason, raw, origin)
                    continue
                row["_seq"] = seq
                pending.append((row, raw, origin))
                if len(pending) >= batch:
                    flush()
        flush()
    finally:
        if enabled:
            gc.enable()
    rejects = pl.DataFrame(sorted(rejected, key=itemgetter(0)), schema={**REJECT_SCHEMA, "_ref": pl.Boolean},
                           orient="row")
    return frames, rejects
