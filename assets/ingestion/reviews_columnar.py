"""Stages 1-2 at feed scale: the same rules as ``assets.ingestion.reviews.ingest`` and ``assets.ingestion.trusted_reviews.filter_trusted``,
with cleaning, merging and publisher matching done on polars frames instead of per-record pydantic objects.

Rows that the vectorised checks certify (http URL with a plain host, a claim text with a letter or digit and at
most 5,000 characters, dates that parse, claim date not after the review date) are cleaned in batches; every
other row goes through ``clean_row`` one by one, so reasons and results are exactly those of the per-record path
(``tests/test_ingest_columnar.py`` checks the equivalence on the real fixtures).
"""

import gc
import hashlib
from collections import Counter
from datetime import date
from operator import itemgetter
from typing import Any

import polars as pl

from assets.common import StageYield
from assets.ingestion.reviews import (
    SOURCE_PRIORITY,
    STAGE,
    _mine,
    _raw_quarter,
    clean_row,
    detect_language,
    iter_factcheck_api,
    normalize_claim_text,
)
from schemas.frames import polars_schema, quarantine
from schemas.records import Publisher, QuarantineRecord, Review, TrustedReview

BATCH = 10_000
REVIEW_SCHEMA = polars_schema(Review)
_TEXT_FIELDS = ("publisher_name", "publisher_site", "rating_text", "rating_value", "rating_best", "rating_worst",
                "language", "claim_author", "title")
_RAW_SCHEMA = {"review_url": pl.Utf8, "claim_text": pl.Utf8, "claim_date": pl.Utf8, "review_date": pl.Utf8,
               **{f: pl.Utf8 for f in _TEXT_FIELDS}, "appearance_urls": pl.List(pl.Utf8),
               "sources": pl.List(pl.Utf8), "_seq": pl.Int64}
# an http(s) URL whose host is plain ASCII and that holds no whitespace: urlsplit accepts it as it is
_PLAIN_URL = r"^(?i:https?)://[A-Za-z0-9.-]+(:[0-9]{1,5})?([/?#]\S*)?$"
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
    from assets.ingestion.reviews import parse_date

    out = {}
    for value in values.drop_nulls().unique().to_list():
        try:
            out[value] = parse_date(value)
        except ValueError:
            out[value] = _DATE_FAIL
    return out


def _review_ids(urls: list[str], texts: list[str]) -> list[str]:
    normal = {t: normalize_claim_text(t) for t in set(texts)}  # one claim is often reviewed at several URLs
    return [hashlib.sha256(f"{u}\x1f{normal[t]}".encode()).hexdigest()[:16] for u, t in zip(urls, texts)]


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
        & (pl.col("claim_text").str.len_chars() <= 5000)
        & (pl.col("claim_date").is_not_null() | pl.col("review_date").is_not_null())
        & (pl.col("claim_date").is_null() | (pl.col("claim_date") != _DATE_FAIL))
        & (pl.col("review_date").is_null() | (pl.col("review_date") != _DATE_FAIL))
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


def collect_frames(sources: list[tuple[str, str, Any]], quarter: str | None, stats: StageYield,
                   bad: list[QuarantineRecord], batch: int = BATCH) -> list[pl.DataFrame]:
    """Every source's cleaned rows as frames in reading order (unmerged, ``_seq`` = reading order); rejects as in
    ``clean_sources``."""
    from assets.ingestion import sources as more

    iterators = {"datafeed": more.iter_datafeed_any, "factcheck_api": iter_factcheck_api,
                 "page_markup": more.iter_page_markup, "rows": more.iter_triples}
    label = quarter or "all"
    frames: list[pl.DataFrame] = []
    pending: list[dict] = []
    rejected: list[tuple[int, QuarantineRecord]] = []  # kept in reading order, as the per-record path has them
    seq = 0

    def reject(n: int, row: dict | None, reason: str, raw: Any, origin: str) -> None:
        row_quarter = (row.get("quarter") if row is not None else "") or _raw_quarter(raw)
        if not _mine(quarter, row_quarter):
            return
        stats.rows_in += 1
        if reason == "claim_date_after_review_date":
            stats.drop(reason)
        else:
            rejected.append((n, quarantine(STAGE, label, reason, raw, source=origin)))

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
        frames.append(batch_frame.sort("_seq") if cleaned else batch_frame)  # frames stay in reading order
        pending.clear()

    enabled = gc.isenabled()
    gc.disable()  # parsed records are acyclic; generational passes over millions of young dicts only cost time
    try:
        for kind, origin, payload in sources:
            if kind not in iterators:
                raise ValueError(f"unknown source kind {kind!r} (expected one of {sorted(iterators)})")
            for row, reason, raw in iterators[kind](payload, origin):
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
    bad.extend(q for _, q in sorted(rejected, key=lambda pair: pair[0]))
    return frames


_LATE = (pl.col("claim_date") > pl.col("review_date")).fill_null(False)


def merge_frame(frames: list[pl.DataFrame], quarter: str | None = None) -> tuple[pl.DataFrame, StageYield]:
    """``merge_rows`` and the quarter's selection on frames in reading order: per review_id, the first non-empty
    value in source priority order (page > feed > API, then reading order); sources and appearance URLs
    concatenated without repeats. Returns the reviews of ``quarter`` (all if None) whose merged claim date is not
    after the review date, and the counts (rows in, late, duplicates). The list is emptied, so the frames are
    freed as soon as they are merged."""
    df = pl.concat(frames, rechunk=False) if frames else pl.DataFrame(schema={**REVIEW_SCHEMA, "_seq": pl.Int64})
    frames.clear()
    prio = (pl.col("sources").list.first().str.extract(r"^([a-z]+):")
            .replace_strict(SOURCE_PRIORITY, default=99, return_dtype=pl.Int64))
    scalar = [c for c in REVIEW_SCHEMA if c not in ("review_id", "sources", "appearance_urls", "language_detected")]
    df = df.with_columns(_prio=prio)
    if df["_prio"].n_unique() > 1:  # one kind of source: reading order is already priority order
        df = df.sort(["_prio", "_seq"])
    ordered = df.drop("_prio", "_seq").with_row_index("_pos").with_columns(
        _n=pl.len().over("review_id").cast(pl.UInt32),
        quarter=_quarter_expr(pl.coalesce("claim_date", "review_date")))  # the merged dates decide, below
    del df

    def first_set(c: str) -> pl.Expr:
        col = pl.col(c)
        present = col.is_not_null() & (col != "") if REVIEW_SCHEMA[c] == pl.Utf8 else col.is_not_null()
        return col.filter(present).first().alias(c)

    # most reviews come once: only the repeated ones need the (costly) aggregation
    repeated = ordered.filter(pl.col("_n") > 1).group_by("review_id").agg(
        pl.col("_pos").first(),
        *[first_set(c) for c in scalar if c != "quarter"],
        pl.col("sources").flatten().drop_nulls().unique(maintain_order=True),
        pl.col("appearance_urls").flatten().drop_nulls().unique(maintain_order=True),
        pl.col("language_detected").first(),
        pl.col("_n").first(),
    ).with_columns(quarter=_quarter_expr(pl.coalesce("claim_date", "review_date")))
    repeated = repeated.with_columns(pl.col(c).fill_null("") for c in scalar if REVIEW_SCHEMA[c] == pl.Utf8).with_columns(
        pl.col("sources", "appearance_urls").list.drop_nulls())  # an empty list flattens to one null
    mine = pl.lit(True) if quarter is None else pl.col("quarter") == quarter
    stats = StageYield()
    # each review stays where its first copy is; a repeated one gets its merged values written over that copy,
    # column by column and only where merging changed something (string data is shared, not copied)
    firsts = ordered.filter((pl.col("_n") == 1) | pl.col("review_id").is_first_distinct()) if repeated.height else ordered
    del ordered
    repeated = repeated.sort("_pos")
    before = firsts.filter(pl.col("_n") > 1)
    changed = [c for c in repeated.columns
               if c not in ("_pos", "review_id", "_n") and not before[c].equals(repeated[c], null_equal=True)]
    if changed:
        aligned = firsts.select("_pos").join(repeated.select("_pos", *changed), on="_pos", how="left",
                                             maintain_order="left")
        firsts = firsts.with_columns(
            pl.when(pl.col("_n") > 1).then(aligned[c]).otherwise(pl.col(c)).alias(c) for c in changed)
    counts = firsts.select(rows=pl.col("_n").filter(mine).sum(), late=pl.col("_n").filter(mine & _LATE).sum(),
                           dups=(pl.col("_n") - 1).filter(mine & ~_LATE).sum())
    stats.rows_in += int(counts["rows"][0] or 0)
    stats.drop("claim_date_after_review_date", int(counts["late"][0] or 0))
    stats.drop("duplicate", int(counts["dups"][0] or 0))
    keep = firsts.select(mine & ~_LATE).to_series()
    return (firsts if keep.all() else firsts.filter(keep)).drop("_pos", "_n"), stats  # a filter copies every column


def ingest_columnar(sources: list[tuple[str, str, Any]], quarter: str | None,
                    batch: int = BATCH) -> tuple[pl.DataFrame, list[QuarantineRecord], StageYield]:
    """``ingest`` with frames: (reviews frame with the Review columns, quarantine, yield)."""
    stats, bad = StageYield(), []
    kept, merged = merge_frame(collect_frames(sources, quarter, stats, bad, batch), quarter)
    stats.rows_in += merged.rows_in
    for reason in ("claim_date_after_review_date", "duplicate"):
        if merged.drops[reason] or reason == "duplicate":
            stats.drop(reason, merged.drops[reason])
    missing = kept.select(pl.col("claim_text").filter(pl.col("language") == "").unique()).to_series().to_list()
    detected = {text: detect_language(text) for text in missing}
    kept = kept.with_columns(
        language_detected=pl.col("language") == "",
        language=pl.when(pl.col("language") == "").then(pl.col("claim_text").replace_strict(detected, default=""))
        .otherwise(pl.col("language")),
    )
    return kept.select(*REVIEW_SCHEMA), bad, stats


# ---- stage 2 ---------------------------------------------------------------------------------------------------------


def trusted_columnar(reviews: pl.DataFrame, publishers: list[Publisher]) -> tuple[pl.DataFrame, StageYield, Counter]:
    """``filter_trusted`` on a frame: each distinct (host, site, name) is matched once, then joined back."""
    from assets.ingestion.trusted_reviews import PublisherIndex, unknown_key

    index = PublisherIndex(publishers)
    keyed = reviews.with_columns(_netloc=pl.col("review_url").str.extract(r"^[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)"))
    combos = keyed.select("_netloc", "publisher_site", "publisher_name").unique()
    matched = []
    for netloc, site, name in combos.iter_rows():
        url = f"http://{netloc}/" if netloc is not None else ""
        publisher, how = index.match_fields(url, site, name)
        matched.append({"_netloc": netloc, "publisher_site": site, "publisher_name": name,
                        "publisher_id": publisher.publisher_id if publisher else None,
                        "publisher_country": publisher.country if publisher else "",
                        "_trusted": bool(publisher and publisher.trusted), "_how": how,
                        "_unknown": unknown_key(url, name) if publisher is None else ""})
    table = pl.DataFrame(matched, schema={"_netloc": pl.Utf8, "publisher_site": pl.Utf8, "publisher_name": pl.Utf8,
                                         "publisher_id": pl.Utf8, "publisher_country": pl.Utf8, "_trusted": pl.Boolean,
                                         "_how": pl.Utf8, "_unknown": pl.Utf8})
    found = keyed.select("_netloc", "publisher_site", "publisher_name").join(
        table, on=["_netloc", "publisher_site", "publisher_name"], how="left", nulls_equal=True, maintain_order="left")
    joined = keyed.hstack(found.drop("_netloc", "publisher_site", "publisher_name"))  # the review columns are not copied
    stats = StageYield(reviews.height)
    # counts on the few columns they need: a filter of the whole frame would copy every column
    unknown = Counter(dict(found.filter(pl.col("publisher_id").is_null())["_unknown"].value_counts().iter_rows()))
    if unknown:
        stats.drop("unknown_publisher", sum(unknown.values()))
    untrusted = found.filter(pl.col("publisher_id").is_not_null() & ~pl.col("_trusted")).height
    if untrusted:
        stats.drop("not_a_signatory", untrusted)
    for how, n in sorted(found.filter(pl.col("_trusted"))["_how"].value_counts().iter_rows()):
        stats.extra[f"matched_by/{how}"] = int(n)
    return joined.filter(pl.col("_trusted")).select(*polars_schema(TrustedReview)), stats, unknown
