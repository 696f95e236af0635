"""Job 2, MSE-based evaluation: predicted vs gold integrity and property scores, by modality and language."""

import json
from collections import defaultdict
from pathlib import Path

import dagster as dg
import polars as pl

from assets.common import quarter_of_context, stage_asset
from assets.predictions import load_release
from assets.scored_claims import bin3, bin7
from dagster_project.resources.store import StoreResource
from schemas.frames import from_frame
from schemas.records import Prediction, ReleaseClaim

STAGE = "evaluation"
# 3-bin accuracy uses the spec's convention: Intact only above 1/3, boundaries in the inner bin (not >= 0.33).


def modality(claim: ReleaseClaim) -> str:
    kinds = {m.type for m in claim.media}
    return "video" if "video" in kinds else "image" if "image" in kinds else "text"


def pairs(gold: list[ReleaseClaim], predictions: list[Prediction]) -> list[dict]:
    """One row per (claim, property[, medium]) that both sides score; a property missing on either side is left out."""
    by_id = {p.claim_id: p for p in predictions}
    rows = []
    for claim in gold:
        pred = by_id.get(claim.id)
        if pred is None:
            continue
        common = {"claim_id": claim.id, "modality": modality(claim), "language": claim.language or "unknown"}
        targets = [
            ("integrity", claim.integrity.score, pred.integrity),
            ("veracity", claim.veracity.score if claim.veracity else None, pred.veracity),
            ("context_coverage", claim.context_coverage.score if claim.context_coverage else None, pred.context_coverage),
        ]
        predicted_media = {m.id: m for m in pred.media}
        for m in claim.media:
            p = predicted_media.get(m.id)
            for prop in ("authenticity", "contextualization"):
                gold_verdict = getattr(m, prop)
                targets.append((prop, gold_verdict.score if gold_verdict else None, getattr(p, prop) if p else None))
        rows += [{**common, "property": prop, "gold": g, "pred": p} for prop, g, p in targets if g is not None and p is not None]
    return rows


def metrics(rows: list[dict]) -> dict:
    if not rows:
        return {"n": 0, "mse": None, "mae": None, "acc3": None, "acc7": None}
    n = len(rows)
    return {
        "n": n,
        "mse": round(sum((r["gold"] - r["pred"]) ** 2 for r in rows) / n, 4),
        "mae": round(sum(abs(r["gold"] - r["pred"]) for r in rows) / n, 4),
        "acc3": round(sum(bin3(r["gold"]) == bin3(r["pred"]) for r in rows) / n, 4),
        "acc7": round(sum(bin7(r["gold"]) == bin7(r["pred"]) for r in rows) / n, 4),
    }


def evaluate(gold: list[ReleaseClaim], predictions: list[Prediction]) -> dict:
    """Per property overall, and integrity per modality and per language."""
    rows = pairs(gold, predictions)
    grouped: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        grouped["property"][r["property"]].append(r)
        if r["property"] == "integrity":
            grouped["modality"][r["modality"]].append(r)
            grouped["language"][r["language"]].append(r)
    covered = {r["claim_id"] for r in rows if r["property"] == "integrity"}
    return {
        "claims": len(gold),
        "predicted": len(covered),
        "coverage": round(len(covered) / len(gold), 4) if gold else 0.0,
        **{axis: {k: metrics(v) for k, v in sorted(groups.items())} for axis, groups in sorted(grouped.items())},
    }


def report_rows(report: dict, quarter: str, system: str) -> pl.DataFrame:
    rows = [
        {"quarter": quarter, "system": system, "axis": axis, "group": group, **m}
        for axis in ("property", "modality", "language")
        for group, m in report.get(axis, {}).items()
    ]
    schema = {"quarter": pl.Utf8, "system": pl.Utf8, "axis": pl.Utf8, "group": pl.Utf8, "n": pl.Int64,
              "mse": pl.Float64, "mae": pl.Float64, "acc3": pl.Float64, "acc7": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


@stage_asset(
    "evaluation",
    "MSE, MAE, 3-bin and 7-bin accuracy of the predictions against the release, per property/modality/language.",
    deps=("predictions", "release"),
    kinds=("json", "parquet", "python"),
)
def evaluation(context: dg.AssetExecutionContext, store: StoreResource) -> dg.MaterializeResult:
    quarter = quarter_of_context(context)
    folder = store.latest_release(quarter)
    if folder is None:
        raise dg.Failure(f"no release for {quarter}")
    gold = load_release(Path(folder))
    predictions = from_frame(store.read_table("predictions", quarter), Prediction)
    systems = sorted({p.system for p in predictions}) or ["none"]
    reports = {s: evaluate(gold, [p for p in predictions if p.system == s]) for s in systems}
    table = pl.concat([report_rows(r, quarter, s) for s, r in reports.items()])
    version = store.write_table(STAGE, quarter, table, context.run_id)
    path = store.write_json(f"reports/{quarter}/evaluation.json", {"quarter": quarter, "release": folder.name, "systems": reports})
    first = reports[systems[0]]
    integrity = first.get("property", {}).get("integrity", {})
    return dg.MaterializeResult(metadata={
        "dagster/row_count": table.height, "rows_in": len(predictions), "rows_out": first["predicted"],
        "dropped": len(predictions) - first["predicted"],
        "quarter": quarter, "version": version, "report": dg.MetadataValue.path(str(path)),
        "integrity_mse": integrity.get("mse") if integrity.get("mse") is not None else float("nan"),
        "integrity_acc3": integrity.get("acc3") if integrity.get("acc3") is not None else float("nan"),
        "coverage": first["coverage"],
        "summary": dg.MetadataValue.json(json.loads(json.dumps(reports, default=str))),
    })
