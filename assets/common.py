"""What every stage asset shares: reading the upstream table, writing its own, and reporting its yield."""

import os
import sysconfig
import time
import traceback
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable

import dagster as dg
import polars as pl
from pydantic import BaseModel

from assets.ids import stable_id  # noqa: F401 - re-exported: the stages import it from here
from dagster_project.partitions import quarterly_partitions, to_key, to_label
from dagster_project.resources.store import StoreResource
from schemas.frames import to_frame, validate_frame, validate_rows
from schemas.records import QuarantineRecord

PARTITIONS = quarterly_partitions


# Stages in a pool talk to the outside (model providers, web hosts): a failure there is mostly transient, so the
# step is retried with exponential backoff and jitter before the run gives up.
TRANSIENT_RETRY = dg.RetryPolicy(max_retries=2, delay=5, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS)


def stage_asset(group: str, description: str, deps: tuple[str, ...] = (), pool: str | None = None, kinds=("python", "parquet"),
                name: str | None = None):
    """The decorator every stage shares: quarter-partitioned, grouped by pipeline phase, optionally in a pool.

    ``pool`` ("llm", "web") bounds how many such steps run at once across all runs (limits: ``pools:`` in the
    config, applied to the instance by ``veritas backfill``, or the UI's Deployment > Concurrency page)."""
    return dg.asset(
        partitions_def=PARTITIONS, group_name=group, kinds=set(kinds), deps=list(deps), pool=pool, description=description,
        retry_policy=TRANSIENT_RETRY if pool else None, name=name,
    )


def quarter_of_context(context: dg.AssetExecutionContext) -> str:
    return to_label(context.partition_key)


QUARTER_THREADS = 2  # a batched run's quarters at once: most of a quarter is Parquet and polars work, off the GIL


def each_quarter(context: dg.AssetExecutionContext, fn) -> dg.MaterializeResult:
    """``fn(quarter) -> metadata`` for every quarter of the run: one quarter, or a backfill's range where the stage
    takes several per run (``stages.quarters_per_run``), ``QUARTER_THREADS`` at a time (on 2 cores, 42 quarters of
    reviews took 1.2 s instead of 1.7 s). Each quarter's materialization gets its own metadata, in quarter order, as
    if it had had a run of its own; the first quarter that raises fails the step once the others under way end. The
    quarters' yields go to the run's log in one message (an event costs Dagster a database commit: 0.25 s for 84)."""
    keys = context.partition_keys
    pool = ThreadPoolExecutor(min(QUARTER_THREADS, len(keys)), thread_name_prefix="quarter")
    lines = []
    try:
        for key, metadata in zip(keys, pool.map(fn, [to_label(k) for k in keys])):
            context.add_asset_metadata(metadata, partition_key=key)
            lines.append(yield_line(context.asset_key.path[-1], metadata))
    finally:
        pool.shutdown(cancel_futures=True)
    context.log.info("\n".join(lines))
    return dg.MaterializeResult()


def _input_boundary(bad: list[QuarantineRecord], asset: str, quarter: str, quarantine: list | None) -> None:
    if bad and quarantine is None:
        raise ValueError(f"{len(bad)} rows of {asset} {quarter} fail validation, first: {bad[0].reason}")
    if quarantine is not None:
        quarantine.extend(bad)


def load_upstream(
    store: StoreResource, asset: str, quarter: str, model: type[BaseModel], quarantine: list | None = None
) -> list:
    """Read and re-validate the upstream table: the input boundary of a stage.

    Rows that fail validation go to ``quarantine`` (with the reading stage's name set later by finish_stage).
    """
    rows = store.read_table(asset, quarter).iter_rows(named=True)
    good, bad = validate_rows(rows, model, f"input:{asset}", quarter)
    _input_boundary(bad, asset, quarter, quarantine)
    return good


def load_upstream_frame(
    store: StoreResource, asset: str, quarter: str, model: type[BaseModel], quarantine: list | None = None
) -> pl.DataFrame:
    """``load_upstream`` for a stage that works on frames: the valid rows as a frame of the model's columns, checked
    column by column (no record object per row)."""
    good, bad = validate_frame(store.read_table(asset, quarter), model, f"input:{asset}", quarter)
    _input_boundary(bad, asset, quarter, quarantine)
    return good


class StageYield:
    """Counts what entered a stage, what left it, and why the rest was dropped."""

    def __init__(self, rows_in: int = 0):
        self.rows_in = rows_in
        self.drops: Counter[str] = Counter()
        self.extra: dict[str, float | int | str] = {}

    def drop(self, reason: str, n: int = 1) -> None:
        self.drops[reason] += n

    def metadata(self, rows_out: int) -> dict:
        meta: dict = {
            "dagster/row_count": rows_out,
            "rows_in": int(self.rows_in),
            "rows_out": rows_out,
            "dropped": sum(self.drops.values()),
        }
        for reason, n in sorted(self.drops.items()):
            meta[f"drop/{reason}"] = n
        meta.update(self.extra)
        meta["drops_json"] = dg.MetadataValue.json(dict(sorted(self.drops.items())))
        return meta


def finish_stage(context: dg.AssetExecutionContext, store: StoreResource, asset: str, *args, **kwargs
                 ) -> dg.MaterializeResult:
    """``finish_quarter`` for a stage whose run is one quarter: its metadata on the run's materialization, its yield
    in the run's log."""
    meta = finish_quarter(context, store, asset, *args, **kwargs)
    context.log.info(yield_line(asset, meta))
    return dg.MaterializeResult(metadata=meta)


def yield_line(asset: str, meta: dict) -> str:
    """A quarter's yield as the run's log shows it, from ``finish_quarter``'s metadata."""
    return f"{asset} {meta['quarter']}: {meta['rows_in']} in, {meta['rows_out']} out, drops {meta['drops_json'].value}"


def finish_quarter(
    context: dg.AssetExecutionContext,
    store: StoreResource,
    asset: str,
    quarter: str,
    records: Iterable[BaseModel] | pl.DataFrame,
    model: type[BaseModel],
    stage_yield: StageYield,
    quarantined: list[QuarantineRecord] = (),
) -> dict:
    """Write the stage's table for one quarter (records, or a frame of the model's columns) and its quarantine as new
    versions; returns the quarter's yield metadata (the caller logs it: ``yield_line``)."""
    df = records if isinstance(records, pl.DataFrame) else to_frame(list(records), model)
    run_id = getattr(context, "run_id", "") or ""
    version = store.write_table(asset, quarter, df, run_id)
    # Rows rejected at the input boundary carry "input:<upstream>"; they belong to this stage's quarantine.
    quarantined = [
        q if q.stage == asset else q.model_copy(update={"stage": asset, "reason": f"{q.stage}:{q.reason}"})
        for q in quarantined
    ]
    store.write_quarantine(asset, quarter, quarantined, run_id)
    store.after_stage()  # S3: the media and WARC records this stage wrote locally go to the bucket
    for q in quarantined:  # stages leave quarantined rows to be counted here, once
        stage_yield.drop(f"quarantined:{q.reason}")
    meta = stage_yield.metadata(len(df))
    meta.update({"quarter": quarter, "version": version, "quarantined": len(quarantined)})
    return meta


# frames outside these are the code that failed (the project's, or a test's); the report names the innermost of them
LIBRARY_DIRS = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")})
ROOT = str(Path(__file__).resolve().parents[1])


class RecordError(str):
    """The drop reason of a record that raised (``error:<Type>``), carrying what a maintainer needs to find the fault:
    the message, where it was raised and the traceback's text. A ``str``, so it pickles across worker processes
    and counts like any other reason."""

    message: str = ""
    where: str = ""
    trace: str = ""

    @classmethod
    def of(cls, err: BaseException) -> "RecordError":
        out = cls(f"error:{type(err).__name__}")
        frames = traceback.extract_tb(err.__traceback__)
        ours = [f for f in frames if not f.filename.startswith(LIBRARY_DIRS)] or frames
        out.message = str(err)[:300]
        if ours:
            name = os.path.relpath(ours[-1].filename, ROOT) if ours[-1].filename.startswith(ROOT) else ours[-1].filename
            out.where = f"{name}:{ours[-1].lineno} in {ours[-1].name}"
        out.trace = "".join(traceback.format_exception(type(err), err, err.__traceback__))[-4000:]
        return out


def describe_record(item) -> str:
    """A record named by its ids (claim, review), or a short repr: the example an error report shows."""
    for part in item if isinstance(item, tuple) else (item,):
        ids = [f"{k}={getattr(part, k)}" for k in ("claim_id", "review_id", "review_url") if getattr(part, k, None)]
        if ids:
            return ", ".join(ids[:2])
    return repr(item)[:200]


class ErrorBudgetExceeded(Exception):
    """More records of a stage raised than its error budget allows: the stage fails instead of dropping them."""

    stops_stage = True


class ErrorBudget:
    """How many records of a stage may fail with an error before the stage itself fails: more than ``share`` of
    its records or ``minimum`` records, whichever is more (stages.error_budget_share / error_budget_min). Each
    error is logged with its cause and where it was raised; past the budget the stage stops, naming the most
    frequent error type, one record it hit, where it was raised, and that error's traceback."""

    def __init__(self, stage: str, total: int, share: float = 0.02, minimum: int = 5, log=None):
        self.stage, self.total, self.log = stage, total, log
        self.allowed = max(int(minimum), int(share * total))
        self.errors: list[tuple[RecordError, str]] = []

    @classmethod
    def for_stage(cls, pipeline, stage: str, total: int, log=None) -> "ErrorBudget":
        return cls(stage, total, pipeline.error_budget_share, pipeline.error_budget_min, log)

    def note(self, item, error: BaseException | str) -> RecordError:
        """Count one failed record; raises ErrorBudgetExceeded when the errors pass the budget."""
        err = error if isinstance(error, RecordError) else (
            RecordError.of(error) if isinstance(error, BaseException) else RecordError(error))
        record = describe_record(item)
        self.errors.append((err, record))
        if self.log:
            self.log.warning(f"{self.stage}: {record} failed: {err}: {err.message or '(no message)'} "
                             f"[{err.where or 'raised in a worker process'}]")
        if len(self.errors) > self.allowed:
            raise ErrorBudgetExceeded(self.report())
        return err

    def report(self) -> str:
        kinds = Counter(str(e) for e, _ in self.errors)
        kind, n = kinds.most_common(1)[0]
        err, record = next((e, r) for e, r in self.errors if str(e) == kind)
        others = ", ".join(f"{k} x{v}" for k, v in kinds.most_common()[1:])
        return (f"{self.stage}: {len(self.errors)} of {self.total} records failed with an error, over the error budget "
                f"of {self.allowed} (stages.error_budget_share / error_budget_min). Most frequent: {kind} x{n}"
                + (f" (also {others})" if others else "") + f". Example record: {record}. {kind}: "
                f"{err.message or '(no message)'}; raised at {err.where or 'an unknown place (a worker process)'}."
                + (f" Its traceback:\n{err.trace}" if err.trace else " No traceback came back with it."))


PROGRESS_EVERY_S = 2.0  # map_records' progress lines, at most one per this many seconds


def map_records(stage: str, items: list, fn, stats: StageYield, log=None, budget: ErrorBudget | None = None) -> list:
    """Apply ``fn(item) -> (record | list of records | None, drop reason)`` to every item, with progress.

    An item that raises, or whose reason is an ``error:<Type>``, is logged and counted as that drop, within the
    stage's error budget (``budget``; by default 2% of the items or 5, whichever is more); past it the stage fails.
    """
    budget = budget or ErrorBudget(stage, len(items), log=log)
    out: list = []
    logged = time.monotonic()
    for i, item in enumerate(items, 1):
        try:
            record, reason = fn(item)
        except Exception as err:  # noqa: BLE001 - one bad record must not lose the others
            if getattr(err, "stops_stage", False):  # e.g. the LLM budget: the whole stage stops, loudly
                raise
            record, reason = None, budget.note(item, err)
        else:
            if record is None and str(reason).startswith("error:"):
                reason = budget.note(item, reason)
        if record is None:
            stats.drop(str(reason))
        else:
            out.extend(record if isinstance(record, list) else [record])
        # a line per 10 items, at most one per PROGRESS_EVERY_S: a stage whose items were prefetched goes through
        # them in well under a second, and each line is an event the instance stores (3,000 claims: 3 s)
        if log and (i == len(items) or (i % 10 == 0 and time.monotonic() - logged >= PROGRESS_EVERY_S)):
            log.info(f"{stage}: {i}/{len(items)} done, {len(out)} kept")
            logged = time.monotonic()
    return out


def llm_metadata(llm, stage: str, run_id: str) -> dict:
    """Calls, cache hits, tokens, cost and errors of one stage's model calls in this run, the share of each member's
    slots its paid calls held (``llm/slot_busy/<member>``; see LLMResource.slot_busy) and its hedged requests
    (``llm/hedged/<member>``, when hedge_after_s is set)."""
    summary = llm.ledger_summary(stage=stage, run_id=run_id)
    busy = {f"llm/slot_busy/{name}": share for name, share in llm.slot_busy(stage).items()}
    hedged = {f"llm/hedged/{name}": n for name, n in llm.hedged(stage).items()}
    return {f"llm/{k}": v for k, v in summary.items() if isinstance(v, (int, float))} | busy | hedged


def count(stats: StageYield, key: str, n: int = 1) -> None:
    """A numeric metadata counter beside the drops (labels, platforms, fallbacks)."""
    stats.extra[key] = int(stats.extra.get(key, 0)) + n


def quantiles(values) -> dict[str, float]:
    """p10, median and p90 (the nearest rank below) and the max of ``values``; {} when there are none."""
    ranked = sorted(values)
    if not ranked:
        return {}
    at = lambda p: ranked[min(len(ranked) - 1, int(p * len(ranked)))]  # noqa: E731
    return {"p10": at(0.1), "median": at(0.5), "p90": at(0.9), "max": ranked[-1]}
