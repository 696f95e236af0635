"""Stage 1's merging: the cleaned rows of every source become one review per key (page > feed > API, field by
field), each in the quarter its merged dates give; languages no source named are detected. Then any quarter's
slice, its quarantine and its yield come from the merged whole, which is parsed once per feed version.

Reads what ``assets.ingestion.cleaning`` makes of the sources; ``assets.ingestion.snapshot`` stores the result.
"""

import itertools
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from assets.ingestion.cleaning import BATCH, REVIEW_SCHEMA, STAGE, _quarter_expr
from assets.ingestion.feed_ranges import collect_sources
from assets.ingestion.languages import detect_languages
from assets.stage.tables import StageYield
from schemas.frames import validate_rows
from schemas.records import QuarantineRecord, Review

SOURCE_PRIORITY = {"page": 0, "feed": 1, "api": 2}  # lower wins when fields disagree
COUNT_SCHEMA = {"quarter": pl.Utf8, "rows_in": pl.Int64, "late": pl.Int64, "duplicate": pl.Int64}
LATE = "claim_date_after_review_date"
_LATE = (pl.col("claim_date") > pl.col("review_date")).fill_null(False)


def merge_frame(frames: list[pl.DataFrame]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Duplicates (same review_id) merged on frames in reading order: per review_id, the first non-empty value in
    source priority order (page > feed > API, then reading order); sources and appearance URLs concatenated without
    repeats; the quarter from the merged dates. Returns every row read, in reading order, the first copy of each
    review holding the merged values and ``_keep`` marking the merged reviews whose claim date is not after the
    review date; and per quarter the rows that went in, the late ones and the duplicates (``COUNT_SCHEMA``).

    No column is copied whole (a filter would copy every column: twice the feed in memory), and the list is emptied,
    so the frames are freed as soon as they are merged."""
    df = pl.concat(frames, rechunk=False) if frames else pl.DataFrame(schema={**REVIEW_SCHEMA, "_seq": pl.Int64})
    frames.clear()
    prio = (pl.col("sources").list.first().str.extract(r"^([a-z]+):")
            .replace_strict(SOURCE_PRIORITY, default=99, return_dtype=pl.Int64))
    scalar = [c for c in REVIEW_SCHEMA if c not in ("review_id", "sources", "appearance_urls", "language_detected")]
    priority = df.select(prio).to_series()
    if priority.n_unique() > 1:  # one kind of source: reading order is already priority order
        df = df.with_columns(_prio=priority).sort(["_prio", "_seq"]).drop("_prio")
    ordered = chunks_aligned(df.drop("_seq").with_row_index("_pos").with_columns(
        _dup=pl.col("review_id").is_duplicated(),
        quarter=_quarter_expr(pl.coalesce("claim_date", "review_date"))))  # the merged dates decide, below
    del df, priority

    def first_set(c: str) -> pl.Expr:
        col = pl.col(c)
        present = col.is_not_null() & (col != "") if REVIEW_SCHEMA[c] == pl.Utf8 else col.is_not_null()
        return col.filter(present).first().alias(c)

    # most reviews come once: only the repeated ones are grouped (a group per review over the whole column held
    # more memory than the rest of the merge)
    repeated = ordered.filter(pl.col("_dup")).group_by("review_id").agg(
        pl.col("_pos").first(),
        *[first_set(c) for c in scalar if c != "quarter"],
        pl.col("sources").flatten().drop_nulls().unique(maintain_order=True),
        pl.col("appearance_urls").flatten().drop_nulls().unique(maintain_order=True),
        pl.col("language_detected").first(),
        _n=pl.len().cast(pl.UInt32),
    ).with_columns(quarter=_quarter_expr(pl.coalesce("claim_date", "review_date")))
    repeated = repeated.with_columns(pl.col(c).fill_null("") for c in scalar if REVIEW_SCHEMA[c] == pl.Utf8).with_columns(
        pl.col("sources", "appearance_urls").list.drop_nulls()).sort("_pos")  # an empty list flattens to one null
    ordered = chunks_aligned(
        ordered.with_columns(_first=~pl.col("_dup") | pl.col("_pos").is_in(repeated["_pos"].implode())))
    # a repeated review gets its merged values written over its first copy, column by column and only where merging
    # changed something (string data is shared, not copied), and its number of copies (1 for the others)
    merged = pl.col("_first") & pl.col("_dup")
    before = ordered.filter(merged)
    changed = [c for c in repeated.columns
               if c not in ("_pos", "review_id", "_n") and not before[c].equals(repeated[c], null_equal=True)]
    del before
    aligned = ordered.select("_pos").join(repeated.select("_pos", "_n", *changed), on="_pos", how="left",
                                          maintain_order="left")
    ordered = chunks_aligned(ordered.with_columns(*(pl.when(merged).then(aligned[c]).otherwise(pl.col(c)).alias(c)
                                                    for c in changed), _n=aligned["_n"].fill_null(1)))
    del aligned
    counts = ordered.lazy().filter(pl.col("_first")).group_by("quarter").agg(
        rows_in=pl.col("_n").sum().cast(pl.Int64), late=pl.col("_n").filter(_LATE).sum().cast(pl.Int64),
        duplicate=(pl.col("_n") - 1).filter(~_LATE).sum().cast(pl.Int64)).sort("quarter").collect()
    kept = ordered.with_columns(_keep=pl.col("_first") & ~_LATE)
    return chunks_aligned(kept).drop("_pos", "_n", "_first", "_dup"), counts


def fill_languages(rows: pl.DataFrame, known: dict[str, str] | None = None) -> pl.DataFrame:
    """A merged review that no source gave a language gets the detected language of its claim (``known``, else
    detected now), flagged as such. Only the rows without a language are looked up: a lookup over the whole column
    would build another one."""
    empty = rows.select(pl.arg_where(pl.col("language") == "")).to_series()
    texts = rows["claim_text"].gather(empty)
    known = known or {}
    missing = [t for t in texts.filter(rows["_keep"].gather(empty)).unique().to_list() if t not in known]
    found = {**known, **detect_languages(missing)} if missing else known
    return rows.with_columns(language_detected=pl.col("language") == "",
                             language=rows["language"].clone().scatter(empty, texts.replace_strict(found, default="")))


@dataclass
class Merged:
    """Every source merged once: ``rows``, every row read with ``_keep`` marking the merged reviews (``reviews``
    reads them out quarter by quarter without a copy of the whole), every rejected record (its own quarter, "" when
    undated) and the per-quarter counts of the merge."""

    rows: pl.DataFrame
    rejects: pl.DataFrame
    counts: pl.DataFrame
    reads: list[dict] = field(default_factory=list)  # how each source was read (feed_ranges.read_report)

    @property
    def reviews(self) -> pl.LazyFrame:
        """The merged reviews of all quarters (``quarter`` column)."""
        return self.rows.lazy().filter(pl.col("_keep")).drop("_keep")


def merge_sources(sources: list[tuple[str, str, Any]], batch: int = BATCH) -> Merged:
    """Read, clean and merge every source, all quarters at once."""
    frames, rejects, languages, reads = collect_sources(sources, batch)
    rows, counts = merge_frame(frames)
    rows = chunks_aligned(fill_languages(rows, languages)).select(*REVIEW_SCHEMA, "_keep")
    return Merged(rows, rejects, counts, reads)


def chunks_aligned(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with every column in chunks of the same rows, without a copy: cut, by zero-copy slices, at every row
    where a chunk of some column starts. The ranges' frames come in chunks and a computed column in one; on columns
    chunked apart a select or a filter first copies every column into one chunk (60 MB for 400,000 reviews)."""
    ends = (n for column in frame.iter_columns() for n in itertools.accumulate(column.chunk_lengths()))
    cuts = sorted({0, frame.height, *ends})
    if len(cuts) <= 2:
        return frame
    return pl.concat([frame.slice(a, b - a) for a, b in itertools.pairwise(cuts)], rechunk=False)


def quarter_slice(reviews: pl.LazyFrame, rejects: pl.LazyFrame, counts: pl.LazyFrame,
                  quarter: str | None) -> tuple[pl.DataFrame, list[QuarantineRecord], StageYield]:
    """One quarter's reviews (all if None), its quarantine and yield, read from the merged whole (in memory or a
    snapshot on disk, whose filters are pushed down to the files). A rejected record without a date counts in
    every quarter, since it belongs to none; a late one is dropped and counted, the others are quarantined."""
    label = quarter or "all"
    if quarter is not None:
        reviews = reviews.filter(pl.col("quarter") == quarter)
        rejects = rejects.filter(pl.col("quarter").is_in([quarter, ""]))
        counts = counts.filter(pl.col("quarter") == quarter)
    frame = reviews.collect().select(*REVIEW_SCHEMA)
    mine = rejects.collect().sort("_seq")
    merged = counts.select(pl.col("rows_in", "late", "duplicate").sum()).collect().row(0)
    stats = StageYield()
    late_rejects = mine.filter(pl.col("reason") == LATE)
    stats.rows_in = mine.height + int(merged[0] or 0)
    if late_rejects.height + int(merged[1] or 0):
        stats.drop(LATE, late_rejects.height + int(merged[1] or 0))
    stats.drop("duplicate", int(merged[2] or 0))
    bad = [QuarantineRecord(stage=STAGE, quarter=label, reason=reason, source=source,
                            record=record.decode("utf-8", "surrogatepass"))
           for reason, source, record in mine.filter(pl.col("reason") != LATE).select("reason", "source", "record").iter_rows()]
    return frame, bad, stats


def ingest(sources: list[tuple[str, str, Any]], quarter: str | None,
           batch: int = BATCH) -> tuple[list[Review], list[QuarantineRecord], StageYield]:
    """All sources for one quarter (all if None): (kind, origin, payload) -> valid merged reviews, quarantine, yield.

    Rows are merged across all sources before the quarter is chosen, so that a review's partition follows its
    merged dates. Records with no usable date are quarantined in every partition (they belong to none)."""
    merged = merge_sources(sources, batch)
    frame, bad, stats = quarter_slice(merged.reviews, merged.rejects.lazy(), merged.counts.lazy(), quarter)
    good, invalid = validate_rows(frame.iter_rows(named=True), Review, STAGE, quarter or "all")
    return good, bad + invalid, stats
