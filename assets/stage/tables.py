"""The tables between stages: reading the upstream table (bad rows to quarantine), writing a stage's own version, and
reporting its yield (rows in, rows out, drops by reason) as Dagster metadata."""

from collections import Counter
from typing import Iterable

import dagster as dg
import polars as pl
from pydantic import BaseModel

from dagster_project.resources.store import StoreResource
from schemas.frames import to_frame, validate_frame, validate_rows
from schemas.records import QuarantineRecord


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
    # Rows rejected at the input boundary carry "input:<upstream>"; they belong to this stage's quarantine.
    quarantined = [
        q if q.stage == asset else q.model_copy(update={"stage": asset, "reason": f"{q.stage}:{q.reason}"})
        for q in quarantined
    ]
    # every file of the stage first, the LATEST pointers last: a stage that fails part-way leaves the last version
    version = store.write_table(asset, quarter, df, run_id, point=False)
    held = store.write_quarantine(asset, quarter, quarantined, run_id, point=False)
    store.after_stage()  # S3: the media and WARC records this stage wrote locally go to the bucket
    store.point_latest(asset, quarter, held, "quarantine")
    store.point_latest(asset, quarter, version)
    for q in quarantined:  # stages leave quarantined rows to be counted here, once
        stage_yield.drop(f"quarantined:{q.reason}")
    meta = stage_yield.metadata(len(df))
    meta.update({"quarter": quarter, "version": version, "quarantined": len(quarantined)})
    return meta


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
