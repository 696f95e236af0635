"""What every stage asset shares: reading the upstream table, writing its own, and reporting its yield."""

import hashlib
from collections import Counter
from typing import Iterable

import dagster as dg
import polars as pl
from pydantic import BaseModel

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


def stable_id(*parts: str, length: int = 16) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:length]


def quarter_of_context(context: dg.AssetExecutionContext) -> str:
    return to_label(context.partition_key)


def each_quarter(context: dg.AssetExecutionContext, fn) -> dg.MaterializeResult:
    """``fn(quarter) -> metadata`` for every quarter of the run, one after the other: one quarter, or a backfill's
    range where the stage takes several per run (``stages.quarters_per_run``). Each quarter's materialization gets
    its own metadata, as if it had had a run of its own."""
    for key in context.partition_keys:
        context.add_asset_metadata(fn(to_label(key)), partition_key=key)
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


def finish_stage(*args, **kwargs) -> dg.MaterializeResult:
    """``finish_quarter`` for a stage whose run is one quarter: its metadata on the run's materialization."""
    return dg.MaterializeResult(metadata=finish_quarter(*args, **kwargs))


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
    versions; returns the quarter's yield metadata."""
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
    context.log.info(f"{asset} {quarter}: {stage_yield.rows_in} in, {len(df)} out, drops {dict(stage_yield.drops)}")
    return meta


def map_records(stage: str, items: list, fn, stats: StageYield, log=None) -> list:
    """Apply ``fn(item) -> (record | list of records | None, drop reason)`` to every item, with progress.

    One item that raises is logged and counted as an ``error:<Type>`` drop; it never stops the quarter.
    """
    out: list = []
    for i, item in enumerate(items, 1):
        try:
            record, reason = fn(item)
        except Exception as err:  # noqa: BLE001 - one bad record must not lose the others
            if getattr(err, "stops_stage", False):  # e.g. the LLM budget: the whole stage stops, loudly
                raise
            record, reason = None, f"error:{type(err).__name__}"
            if log:
                log.warning(f"{stage}: item {i} failed: {err!r}")
        if record is None:
            stats.drop(reason)
        else:
            out.extend(record if isinstance(record, list) else [record])
        if log and (i % 10 == 0 or i == len(items)):
            log.info(f"{stage}: {i}/{len(items)} done, {len(out)} kept")
    return out


def llm_metadata(llm, stage: str, run_id: str) -> dict:
    """Calls, cache hits, tokens, cost and errors of one stage's model calls in this run, and the share of each
    member's slots its paid calls held (``llm/slot_busy/<member>``; see LLMResource.slot_busy)."""
    summary = llm.ledger_summary(stage=stage, run_id=run_id)
    busy = {f"llm/slot_busy/{name}": share for name, share in llm.slot_busy(stage).items()}
    return {f"llm/{k}": v for k, v in summary.items() if isinstance(v, (int, float))} | busy


def count(stats: StageYield, key: str, n: int = 1) -> None:
    """A numeric metadata counter beside the drops (labels, platforms, fallbacks)."""
    stats.extra[key] = int(stats.extra.get(key, 0)) + n
