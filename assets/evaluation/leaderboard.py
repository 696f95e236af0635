"""The leaderboard: every registered system on every released quarter, side by side, ranked on a window of quarters.

Every system is scored on every claim of the window: a claim it left without a prediction counts as 0 (the "don't
know" score), so skipping the hard claims never pays; its coverage says how many it answered, and a partial
submission is marked. A prediction file that cannot be read is reported with its reason and that system is left
unranked; the others are ranked.

Plain functions first (the systems registry, each system's predictions per quarter, the per-claim integrity rows,
metrics per quarter and per window with bootstrap confidence intervals, the contamination share, the flat table),
then the asset. The metrics are ``evaluation.metrics`` (one implementation); a window pools the claims of its quarters.

A quarter is *clean* for a system when it starts after the system's knowledge cut-off (the model cannot have seen
any of its claims); every other quarter, including the one the cut-off falls in, is *before*. An unknown cut-off
makes every quarter "unknown": such a system has no clean window and is left out of an after-cut-off ranking.

Each system says which file it was given (``input``): ``inputs_only`` (``veritas export --inputs-only``: claims, media,
dates, languages) or ``full_release`` (the VeriTaS-format release, whose ``review_url`` names the fact-check that
states the verdict; the default, as a system that does not say so may have read it). Per quarter the board names the
release version it scored and, when that version's human audit is published (its addendum, beside it), how far people
agree with its labels.
"""

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Literal

import dagster as dg
import numpy as np
import polars as pl
import yaml
from pydantic import BaseModel, ValidationError, field_validator, model_validator

from assets.audit.asset import addendum_rel
from assets.audit.card import leaderboard_line
from assets.evaluation.evaluation import (
    cutoff_position,
    hit3,
    hit7,
    metrics,
    modality,
    quarter_number,
)
from assets.evaluation.prediction_files import check_claim_ids, read_predictions
from assets.evaluation.predictions import load_release
from assets.release.recurring import recurring_ids
from dagster_project.core.atomic_files import atomic_write
from dagster_project.partitions import to_label
from dagster_project.resources.store import StoreResource
from dagster_project.stage_settings import LeaderboardSettings
from schemas.frames import from_frame
from schemas.records import Prediction

UNKNOWN = "unknown"
WINDOWS = ("all", "clean", "before")
METRICS = ("mse", "mae", "acc3", "acc7")
AXES = ("modality", "language")
CONFIDENCE = 0.95
BOOTSTRAP_SEED = 15  # a fixed seed: the same rows give the same intervals on every run
TABLE = "leaderboard"
PAIRS_TABLE = "leaderboard_pairs"
SCOPE = "all"  # the store's quarter slot for the unpartitioned tables
REPORT_DIR = "reports/leaderboard"


# ------------------------------------------------------------------------------------------ registry


class System(BaseModel):
    """One system to compare: our verifier (an ensemble member, closed-book or retrieval) or an outside system's files."""

    name: str
    kind: Literal["verifier", "predictions"]
    knowledge_cutoff: str  # a quarter (2024Q4), a date (2024-06-30) or "unknown": always said, never assumed
    description: str = ""
    member: str = ""  # verifier: the ensemble member that is the backbone
    mode: Literal["closed_book", "retrieval"] = "closed_book"
    strategy: Literal["parallel", "dynamic", "hybrid"] = "parallel"  # retrieval: question generation
    predictions: dict[str, str] = {}  # outside system: quarter -> prediction file (the `veritas evaluate` format)
    contamination_model: str = ""  # the member whose contamination check stands for this system (verifier: member)
    # the file the system was given: the inputs only, or the whole release (its review_url reveals the verdict)
    input: Literal["inputs_only", "full_release"] = "full_release"
    source: str = ""  # the registry file it came from

    @field_validator("knowledge_cutoff", mode="before")
    @classmethod
    def _cutoff(cls, value) -> str:
        value = str(value or "").strip()
        if value.lower() == UNKNOWN:
            return UNKNOWN
        if not value:
            raise ValueError('knowledge_cutoff is required: a quarter (2024Q4), a date (2024-06-30) or "unknown"')
        try:
            return to_label(value)
        except ValueError:
            cutoff_position(value)  # a date, or a ValueError naming the bad value
            return value[:10]

    @field_validator("predictions", mode="before")
    @classmethod
    def _quarters(cls, value) -> dict:
        if value is not None and not isinstance(value, dict):
            return value  # not a mapping: the field's type says what is wrong with it
        return {to_label(str(q)): str(p) for q, p in (value or {}).items()}

    @model_validator(mode="after")
    def _kind_fields(self) -> "System":
        if self.kind == "verifier" and not self.member:
            raise ValueError("a verifier system names its ensemble member (member: ...)")
        if self.kind == "predictions" and not self.predictions:
            raise ValueError("an outside system lists its prediction files (predictions: {2025Q4: file.json})")
        return self

    @property
    def prediction_system(self) -> str:
        """The ``system`` its rows carry in the predictions table (the names predict() and Verifier.system give)."""
        if self.kind != "verifier":
            return self.name
        return f"closed_book:{self.member}" if self.mode == "closed_book" else f"retrieval-{self.strategy}:{self.member}"

    @property
    def contamination_member(self) -> str:
        return self.contamination_model or (self.member if self.kind == "verifier" else "")


def read_system_file(path: Path):
    """A system file's YAML, or a ValueError that names the file and what is wrong: not UTF-8, not YAML."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: byte {err.start} is not UTF-8; save the system file as UTF-8") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ValueError(f"{path}: {where}not valid YAML ({problem}); fix the file or move it out of the "
                         "systems folder") from None


def read_system(path: Path) -> System:
    """One system file as a System (prediction paths resolved against its folder), or a ValueError of one line that
    names the file and what is wrong: not UTF-8, not YAML, not a mapping, or a field its schema refuses."""
    raw = read_system_file(path) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: a system file is a mapping (name, kind, knowledge_cutoff, ...)")
    if isinstance(raw.get("predictions"), dict):
        raw["predictions"] = {q: str((path.parent / str(p)).resolve()) for q, p in raw["predictions"].items()}
    try:
        return System.model_validate({"name": path.stem, **raw, "source": str(path)})
    except ValidationError as err:
        e = err.errors()[0]
        field = ".".join(str(part) for part in e["loc"])
        given = f" is {repr(e['input'])[:60]}" if e["type"] != "missing" else ""
        raise ValueError(f"{path}: {f'field {field}{given}: ' if field else ''}{e['msg']}; fix the file or move it "
                         "out of the systems folder") from None


def load_systems(folder: str | Path, unreadable: list[str] | None = None) -> list[System]:
    """Every ``*.yaml`` in ``folder``, one system each; prediction paths resolve against the file's folder.

    ``unreadable``: a list that collects one line per file that cannot be a system (not a UTF-8 YAML mapping, or a
    field its schema refuses), naming it; such a file is left out so that the others are still ranked. Without it
    such a file is a ValueError naming it."""
    folder = Path(folder)
    files = sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]) if folder.is_dir() else []
    if not files:
        raise FileNotFoundError(f"no systems registered: no *.yaml in {folder} (docs/how-to/score-a-system.md says how to add one)")
    systems = []
    for path in files:
        try:
            systems.append(read_system(path))
        except ValueError as err:
            if unreadable is None:
                raise
            unreadable.append(str(err))
    if not systems:
        raise ValueError(f"{folder}: no system file could be read: {'; '.join(unreadable or [])}")
    names = [s.name for s in systems]
    if len(set(names)) != len(names):
        raise ValueError(f"{folder}: system names must be unique, got {sorted(names)}")
    return systems


# --------------------------------------------------------------------------------- quarters, cut-off


def quarter_relation(quarter: str, cutoff: str) -> str:
    """"clean" when the whole quarter lies after the cut-off, "before" otherwise, "unknown" without a cut-off."""
    if not cutoff or cutoff == UNKNOWN:
        return UNKNOWN
    return "clean" if quarter_number(quarter) - 0.5 >= cutoff_position(cutoff) - 1e-9 else "before"


def sort_quarters(quarters) -> list[str]:
    return sorted(quarters, key=quarter_number)


# ------------------------------------------------------------------------------------------ loading


def verifier_predictions(store: StoreResource, system: System, quarter: str) -> list[Prediction]:
    """The newest predictions-table version of the quarter that holds this configuration's rows (each run of the
    predictions asset writes one configuration; older versions keep the others)."""
    for version in reversed(store.versions("predictions", quarter)):
        frame = store.read_table("predictions", quarter, version=version)
        mine = frame.filter(pl.col("system") == system.prediction_system)
        if mine.height:
            return from_frame(mine, Prediction)
    return []


def outside_predictions(system: System, quarter: str, gold: list | None = None) -> list[Prediction] | None:
    """An outside system's file for the quarter (None when it lists none), read strictly and checked against the
    quarter's ``gold`` claims; a listed file that is missing stops the run, a bad one is a ValueError naming it."""
    path = system.predictions.get(quarter)
    if path is None:
        return None
    if not Path(path).exists():
        raise FileNotFoundError(f"system {system.name} ({system.source}): prediction file for {quarter} not found: {path}")
    located = read_predictions(Path(path), quarter, system.name)
    other = sorted({p.quarter for _, p in located} - {quarter})
    if other:
        raise ValueError(f"{path}: listed for {quarter} (system {system.name}) but holds records of {', '.join(other)}")
    located = [(where, p.model_copy(update={"system": system.name})) for where, p in located]
    duplicated = [where for i, (where, p) in enumerate(located) if p.claim_id in {q.claim_id for _, q in located[:i]}]
    if duplicated:  # one claim under two system names: one system here
        raise ValueError(f"{path}: {duplicated[0]}: field claim_id: predicted twice; keep one prediction per claim")
    if gold is not None:
        check_claim_ids(Path(path), located, {quarter: gold})
    return [p for _, p in located]


def contamination_counts(store: StoreResource, quarter: str, member: str) -> dict | None:
    """Flagged and scored claims of ``member`` in the quarter's contamination check, when that check ran."""
    if not member:
        return None
    try:
        report = json.loads(store.get_bytes(f"reports/{quarter}/contamination.json"))
    except FileNotFoundError:
        return None
    model = report.get("models", {}).get(member)
    if model is None:
        return None
    return {"flagged": len(model.get("flagged", [])), "scored": int(model.get("scored", 0))}


AUDIT_OVERALL = ("n", "mse", "agreement3", "agreement3_ci", "alpha_annotators", "alpha_with_ensemble")


def audit_of_release(store: StoreResource, quarter: str, version: str) -> dict | None:
    """What the board shows of the human audit of a release version (its addendum, published beside it by
    release_audit): the version, the overall figures and the gate; None when that version has not been audited."""
    rel = addendum_rel(quarter, version)
    try:
        addendum = json.loads(store.get_bytes(rel))
        return {"release": {"version": addendum["release"]["version"]}, "audit_version": addendum.get("audit_version"),
                "overall": {k: addendum["overall"][k] for k in AUDIT_OVERALL}, "passed": bool(addendum["passed"]),
                "min_agreement": addendum["min_agreement"], "annotators": addendum["annotators"]}
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{store.location}/{rel}: not a human audit's addendum ({type(err).__name__}: "
                         f"{str(err)[:80]}); publish it again (materialize release_audit for {quarter}) or move it "
                         "away") from None


def collect(store: StoreResource, systems: list[System], quarters: list[str]) -> dict:
    """Everything the board is computed from: per-claim integrity rows, gold counts, predictions, contamination,
    the claims each release marks recurring (release claim ids per quarter), the release version scored per quarter
    and the human audit of that version where it has one."""
    rows, predicted, contamination, claims, recurring, rejected = [], {}, {}, {}, {}, []
    versions, audits = {}, {}
    for quarter in sort_quarters(quarters):
        folder = store.latest_release(quarter)
        gold = load_release(folder, allow_empty=True)  # a short release may hold none; a damaged one stops the run
        claims[quarter] = len(gold)
        recurring[quarter] = sorted(recurring_ids(folder))
        versions[quarter] = folder.name
        if (found := audit_of_release(store, quarter, folder.name)) is not None:
            audits[quarter] = found
        for s in systems:
            try:
                preds = verifier_predictions(store, s, quarter) if s.kind == "verifier" else \
                    outside_predictions(s, quarter, gold)
            except ValueError as err:  # one bad submission: reported with its reason, the others are ranked
                rejected.append({"system": s.name, "quarter": quarter, "file": s.predictions.get(quarter, ""),
                                 "reason": str(err).splitlines()[0]})
                preds = []
            if preds is not None:
                predicted.setdefault(s.name, {})[quarter] = len(preds)
            rows += integrity_rows(s.name, quarter, gold, preds or [])
            counts = contamination_counts(store, quarter, s.contamination_member)
            if counts is not None:
                contamination.setdefault(s.name, {})[quarter] = counts
    return {"systems": [s.model_dump() for s in systems], "claims": claims, "predicted": predicted,
            "contamination": contamination, "rows": rows, "recurring": recurring, "rejected": rejected,
            "release_versions": versions, "audit": audits}


def integrity_rows(system: str, quarter: str, gold: list, predictions: list[Prediction]) -> list[dict]:
    """One row per gold claim of the quarter: its gold integrity and the predicted one, None where the system gave
    none (no prediction, or one without an integrity score). The board scores None as 0, the "don't know" score."""
    by_id = {p.claim_id: p.integrity for p in predictions}
    return [{"system": system, "quarter": quarter, "claim_id": c.id, "modality": modality(c),
             "language": c.language or "unknown", "gold": c.integrity.score, "pred": by_id.get(c.id)} for c in gold]


# ------------------------------------------------------------------------------------------ metrics


def bootstrap_ci(rows: list[dict], confidence: float = CONFIDENCE, resamples: int = 2000,
                 seed: int = BOOTSTRAP_SEED) -> dict:
    """Percentile bootstrap intervals (scipy) of each metric, resampling claims; None below two claims.

    Every metric is the mean of a per-claim quantity, so each interval resamples that quantity with the same seed.
    """
    if len(rows) < 2:
        return dict.fromkeys(METRICS)
    from scipy.stats import bootstrap

    gold = np.array([r["gold"] for r in rows], dtype=float)
    pred = np.array([r["pred"] for r in rows], dtype=float)
    per_claim = {
        "mse": (gold - pred) ** 2, "mae": np.abs(gold - pred),
        "acc3": np.array([hit3(r) for r in rows], dtype=float),
        "acc7": np.array([hit7(r) for r in rows], dtype=float),
    }
    out = {}
    for name, values in per_claim.items():
        result = bootstrap((values,), np.mean, confidence_level=confidence, n_resamples=resamples, method="percentile",
                           rng=np.random.default_rng(seed), batch=250)
        out[name] = [float(result.confidence_interval.low), float(result.confidence_interval.high)]
    return out


def contamination_share(counts: list[dict]) -> float | None:
    """Flagged over scored claims, pooled over the quarters where the check ran (None when it ran nowhere)."""
    scored = sum(c["scored"] for c in counts)
    return sum(c["flagged"] for c in counts) / scored if scored else None


def scored(rows: list[dict]) -> list[dict]:
    """Rows as the board scores them: a missing prediction (None) is 0, the "don't know" score, and is counted as
    not answered; so skipping a claim never helps, and coverage shows how many were answered."""
    return [{**r, "pred": 0.0 if r["pred"] is None else r["pred"], "answered": r["pred"] is not None} for r in rows]


def block(rows: list[dict]) -> dict:
    """``metrics`` over every claim (missing as 0), with how many were answered and the coverage; where none was
    answered there is no submission to score, and the metrics stay empty (n 0), never filled in with zeros."""
    answered = sum(r["answered"] for r in rows)
    return {**metrics(rows if answered else []), "answered": answered,
            "coverage": answered / len(rows) if rows else None}


def answered_ci(rows: list[dict], resamples: int) -> dict:
    """``bootstrap_ci`` of scored rows; none where no claim was answered, like the metrics of ``block``: an interval
    of zeros beside an MSE of "-" would be an interval of nothing the system submitted."""
    return bootstrap_ci(rows if any(r["answered"] for r in rows) else [], resamples=resamples)


def _sums(rows: list[dict]) -> dict:
    """The additive parts of the metrics, so the page can pool any window of quarters without the claims."""
    return {"n": len(rows), "se": math.fsum((r["gold"] - r["pred"]) ** 2 for r in rows),
            "ae": math.fsum(abs(r["gold"] - r["pred"]) for r in rows),
            "hit3": sum(map(hit3, rows)), "hit7": sum(map(hit7, rows)), "answered": sum(r["answered"] for r in rows)}


def _grouped(rows: list[dict], with_ci: bool, resamples: int) -> dict:
    """Metrics per modality and per language (with intervals for windows)."""
    out = {}
    for axis in AXES:
        groups = defaultdict(list)
        for r in rows:
            groups[r[axis]].append(r)
        out[axis] = {g: {**block(v), **({"ci": answered_ci(v, resamples)} if with_ci else {})}
                     for g, v in sorted(groups.items())}
    return out


def compute_board(data: dict, first: str = "", last: str = "", after_cutoff: bool = False,
                  resamples: int = 2000) -> dict:
    """Per system: each quarter of the window, and the pooled "all", "clean" and "before" windows with intervals;
    ranked by integrity MSE on "clean" (``after_cutoff``) or "all".

    "clean" leaves out the claims a release marks recurring (``data["recurring"]``: an earlier release held them, so
    the model may have seen them) and counts them in ``recurring_left_out``; each quarter also carries ``sums_fresh``,
    its sums without them, for re-pooling a clean window."""
    quarters = sort_quarters(data["claims"])
    recurring = {q: set(ids) for q, ids in (data.get("recurring") or {}).items()}

    def fresh(rows: list[dict]) -> list[dict]:
        return [r for r in rows if r["claim_id"] not in recurring.get(r["quarter"], ())]

    lo = quarter_number(first) if first else -math.inf
    hi = quarter_number(last) if last else math.inf
    window = [q for q in quarters if lo <= quarter_number(q) <= hi]
    by_system = defaultdict(lambda: defaultdict(list))
    for r in scored(data["rows"]):
        by_system[r["system"]][r["quarter"]].append(r)
    rejected = defaultdict(list)
    for r in data.get("rejected") or []:
        rejected[r["system"]].append(r)
    entries = []
    for raw in data["systems"]:
        s = System.model_validate(raw)
        contamination = data["contamination"].get(s.name, {})
        per_quarter = {}
        for q in quarters:  # every quarter, so a page written for one window can offer the others
            rows = by_system[s.name].get(q, [])
            flagged = contamination.get(q)
            per_quarter[q] = {
                "relation": quarter_relation(q, s.knowledge_cutoff), "claims": data["claims"][q],
                "predicted": data["predicted"].get(s.name, {}).get(q, 0), **block(rows), "sums": _sums(rows),
                "recurring": len(recurring.get(q, ())), "sums_fresh": _sums(fresh(rows)),
                "flagged_share": contamination_share([flagged]) if flagged else None, "contamination": flagged,
                **_grouped(rows, False, resamples),
            }
        windows = {}
        for name in WINDOWS:
            qs = [q for q in window if name == "all" or per_quarter[q]["relation"] == name]
            pooled = [r for q in qs for r in by_system[s.name].get(q, [])]
            rows = fresh(pooled) if name == "clean" else pooled
            marked = sum(len(recurring.get(q, ())) for q in qs) if name == "clean" else 0
            windows[name] = {
                "quarters": qs, "claims": sum(data["claims"][q] for q in qs) - marked, **block(rows),
                "recurring_left_out": len(pooled) - len(rows), "ci": answered_ci(rows, resamples),
                "flagged_share": contamination_share([contamination[q] for q in qs if q in contamination]),
                **_grouped(rows, True, resamples),
            }
        entries.append({"name": s.name, "kind": s.kind, "mode": s.mode if s.kind == "verifier" else "",
                        "member": s.member, "knowledge_cutoff": s.knowledge_cutoff, "description": s.description,
                        "input": s.input,
                        "prediction_system": s.prediction_system, "quarters": per_quarter, "windows": windows,
                        "rejected": rejected.get(s.name, [])})
    rank_window = "clean" if after_cutoff else "all"
    for entry in entries:  # a rejected file in the window leaves the system unranked, not ranked on zeros
        w = entry["windows"][rank_window]
        entry["rejected_in_window"] = sorted({r["quarter"] for r in entry["rejected"]} & set(w["quarters"]))
        entry["partial"] = 0 < w["answered"] < w["n"] and not entry["rejected_in_window"]
    # ranked: answered at least one claim of the window (no prediction at all is no submission) and no file rejected
    unranked = lambda x: not x["windows"][rank_window]["answered"] or bool(x["rejected_in_window"])  # noqa: E731
    order = sorted(entries, key=lambda x: (unranked(x), x["windows"][rank_window]["mse"] or 0.0, x["name"]))
    rank = 0
    for entry in order:
        ranked = not unranked(entry)
        rank += ranked
        entry["rank"] = rank if ranked else None
    audits = {q: a for q, a in (data.get("audit") or {}).items() if q in data["claims"]}
    return {"window": {"from": window[0] if window else first, "to": window[-1] if window else last,
                       "quarters": window, "after_cutoff": after_cutoff, "rank_window": rank_window,
                       "confidence": CONFIDENCE, "resamples": resamples},
            "all_quarters": quarters, "systems": order, "rejected": list(data.get("rejected") or []),
            "release_versions": dict(data.get("release_versions") or {}),
            # per quarter: "people agree with the labels: 3-bin x, MSE y, n claims", and the figures behind it
            "audit": {q: leaderboard_line(a) for q, a in sorted(audits.items())},
            "audit_figures": {q: {**a["overall"], "release_version": a["release"]["version"], "passed": a["passed"],
                                  "min_agreement": a["min_agreement"], "annotators": a["annotators"]}
                              for q, a in sorted(audits.items())}}


# ---------------------------------------------------------------------------------------- outputs


def _row(entry: dict, scope: str, window: str, quarter: str, axis: str, group: str, m: dict, extra: dict) -> dict:
    ci = m.get("ci") or dict.fromkeys(METRICS)
    return {"system": entry["name"], "kind": entry["kind"], "knowledge_cutoff": entry["knowledge_cutoff"],
            "rank": entry["rank"], "scope": scope, "window": window, "quarter": quarter, "axis": axis, "group": group,
            "n": m["n"], "answered": m.get("answered"), "coverage": m.get("coverage"),
            "partial": bool(m.get("coverage")) and m["coverage"] < 1, **{k: m[k] for k in METRICS},
            **{f"{k}_{side}": (ci[k][i] if ci.get(k) else None) for k in METRICS for i, side in enumerate(("lo", "hi"))},
            "claims": extra.get("claims"), "flagged_share": extra.get("flagged_share"),
            "recurring_left_out": extra.get("recurring_left_out")}


TABLE_SCHEMA = {
    "system": pl.Utf8, "kind": pl.Utf8, "knowledge_cutoff": pl.Utf8, "rank": pl.Int64, "scope": pl.Utf8,
    "window": pl.Utf8, "quarter": pl.Utf8, "axis": pl.Utf8, "group": pl.Utf8, "n": pl.Int64,
    "answered": pl.Int64, "coverage": pl.Float64, "partial": pl.Boolean, **{k: pl.Float64 for k in METRICS},
    **{f"{k}_{side}": pl.Float64 for k in METRICS for side in ("lo", "hi")},
    "claims": pl.Int64, "flagged_share": pl.Float64, "recurring_left_out": pl.Int64,
}


def board_table(board: dict) -> pl.DataFrame:
    """The board as one flat table: a row per system x (quarter or window) x (integrity, each modality, each language)."""
    rows = []
    for entry in board["systems"]:
        scopes = [("quarter", q["relation"], quarter, q) for quarter, q in entry["quarters"].items()]
        scopes += [("window", name, "", w) for name, w in entry["windows"].items()]
        for scope, window, quarter, block in scopes:
            rows.append(_row(entry, scope, window, quarter, "integrity", "all", block, block))
            for axis in AXES:
                rows += [_row(entry, scope, window, quarter, axis, g, m, {}) for g, m in block[axis].items()]
    return pl.DataFrame(rows, schema=TABLE_SCHEMA)


PAIRS_SCHEMA = {"system": pl.Utf8, "quarter": pl.Utf8, "claim_id": pl.Int64, "modality": pl.Utf8, "language": pl.Utf8,
                "gold": pl.Float64, "pred": pl.Float64}


def inputs_payload(data: dict) -> dict:
    """What the JSON keeps beside the board so that ``veritas leaderboard`` can recompute any window."""
    return {k: v for k, v in data.items() if k != "rows"}


def load_inputs(store: StoreResource) -> dict:
    """The latest leaderboard's inputs: the per-claim rows (Parquet) and the registry, counts and contamination (JSON).
    The human audits are read again from the store, of the release versions the board scored: an audit published
    after the board was materialized shows without materializing it again (the scores it ranks are unchanged)."""
    if not store.has_table(PAIRS_TABLE, SCOPE):
        raise FileNotFoundError(f"no leaderboard in {store.location}: materialize it first "
                                "(`veritas leaderboard --materialize`)")
    payload = json.loads(store.get_bytes(f"{REPORT_DIR}/leaderboard.json"))
    inputs = payload["inputs"]
    audits = {q: found for q, version in (inputs.get("release_versions") or {}).items()
              if (found := audit_of_release(store, q, version)) is not None}
    return {**inputs, "audit": audits, "rows": store.read_table(PAIRS_TABLE, SCOPE).to_dicts()}


def text_ranking(board: dict) -> str:
    """The ranking as a fixed-width table: rank, system, cut-off, quarters used, claims, metrics and the MSE interval."""
    def fmt(v, digits=4):
        return "-" if v is None else f"{v:.{digits}f}"

    w = board["window"]
    rank_window = w["rank_window"]
    lines = [f"leaderboard {w['from'] or '-'}..{w['to'] or '-'}, ranked by integrity MSE on "
             f"{'the quarters after each cut-off' if rank_window == 'clean' else 'every quarter'} "
             f"({int(w['confidence'] * 100)}% bootstrap intervals)",
             f"{'rank':>4} {'system':24} {'cut-off':10} {'quarters':>8} {'n':>5} {'coverage':>9} {'MSE':>7} "
             f"{'MSE interval':>17} {'MAE':>7} {'acc3':>7} {'acc7':>7} {'flagged':>7} {'recurring':>9}"]
    for s in board["systems"]:
        m = s["windows"][rank_window]
        ci = m["ci"]["mse"]
        coverage = fmt(m.get("coverage"), 3) + ("*" if s.get("partial") else "")
        lines.append(f"{s['rank'] or '-':>4} {s['name'][:24]:24} {s['knowledge_cutoff']:10} {len(m['quarters']):>8} "
                     f"{m['n']:>5} {coverage:>9} {fmt(m['mse']):>7} "
                     f"{(f'[{ci[0]:.4f}, {ci[1]:.4f}]' if ci else '-'):>17} "
                     f"{fmt(m['mae']):>7} {fmt(m['acc3']):>7} {fmt(m['acc7']):>7} {fmt(m['flagged_share'], 3):>7} "
                     f"{m['recurring_left_out']:>9}")
    if any(s.get("partial") for s in board["systems"]):
        lines.append("* partial submission: each claim without a prediction is scored as 0 (don't know)")
    lines += [f"rejected: {r['system']} {r['quarter']}: {r['reason']}" for r in board.get("rejected") or []]
    lines += [f"human audit {q} (release {board['audit_figures'][q]['release_version']}): {line}"
              for q, line in (board.get("audit") or {}).items()]
    return "\n".join(lines) + "\n"


def write_outputs(store: StoreResource, data: dict, board: dict, run_id: str = "") -> dict:
    """The board table and the per-claim rows as Parquet versions, the JSON report and the page."""
    from assets.evaluation.leaderboard_page import render_page

    table = board_table(board)
    version = store.write_table(TABLE, SCOPE, table, run_id)
    store.write_table(PAIRS_TABLE, SCOPE, pl.DataFrame(data["rows"], schema=PAIRS_SCHEMA), run_id)
    json_path = store.write_json(f"{REPORT_DIR}/leaderboard.json", {"board": board, "inputs": inputs_payload(data),
                                                                     "version": version})
    page = render_page(board).encode()
    if store.is_s3:  # the page goes where the JSON report went
        store.put_bytes(f"{REPORT_DIR}/leaderboard.html", page, "text/html")
    html_path = json_path.parent / "leaderboard.html"
    atomic_write(html_path, page)
    return {"table": table, "version": version, "json": json_path, "html": html_path,
            **write_longitudinal(store, board, json_path.parent)}


def write_longitudinal(store: StoreResource, board: dict, folder: Path) -> dict:
    """The longitudinal cut-off view (assets/evaluation/longitudinal.py) beside the board: JSON, CSV, text, PNG."""
    from assets.evaluation.longitudinal import (
        audit_rows,
        longitudinal_csv,
        longitudinal_rows,
        longitudinal_summary,
        longitudinal_text,
        plot_longitudinal,
    )

    paths = {"longitudinal_json": store.write_json(f"{REPORT_DIR}/longitudinal.json", {
        "summary": longitudinal_summary(board), "by_quarter": longitudinal_rows(board), "audit": audit_rows(board)})}
    files = {"longitudinal_csv": ("longitudinal.csv", longitudinal_csv(longitudinal_rows(board)).encode()),
             "longitudinal_txt": ("longitudinal.txt", longitudinal_text(board).encode())}
    for key, (name, data) in files.items():
        atomic_write(folder / name, data)
        paths[key] = folder / name
    paths["longitudinal_plot"] = plot_longitudinal(board, folder / "longitudinal.png")
    if store.is_s3:  # the view goes where the JSON report went
        for key, ctype in (("longitudinal_csv", "text/csv"), ("longitudinal_txt", "text/plain"),
                           ("longitudinal_plot", "image/png")):
            store.put_bytes(f"{REPORT_DIR}/{paths[key].name}", paths[key].read_bytes(), ctype)
    return paths


@dg.asset(
    group_name="evaluation",
    kinds={"parquet", "json", "html", "python"},
    deps=["evaluation"],
    description="Every registered system (systems/) on every released quarter: MSE, MAE, 3/7-bin accuracy and claims "
                "per quarter, per modality and per language; pooled over the quarters after each system's knowledge "
                "cut-off (clean) and before, with bootstrap intervals; the share of claims the contamination check "
                "flagged; per quarter, the release version scored and its human audit, when people have audited it. "
                "Parquet, JSON and a self-contained HTML page.",
)
def leaderboard(
    context: dg.AssetExecutionContext, store: StoreResource, board: LeaderboardSettings
) -> dg.MaterializeResult:
    try:  # a bad registry or a missing prediction file: the step's own error names the file, not a wrapper's
        unreadable: list[str] = []  # a bad file is named, and the other systems still ranked
        systems = load_systems(board.systems_dir, unreadable)
        for line in unreadable:
            context.log.warning(f"leaderboard: system file left out: {line}")
        quarters = store.release_quarters()
        if not quarters:
            raise dg.Failure(f"no release in {store.location}: materialize release, predictions and evaluation first")
        data = collect(store, systems, quarters)
    except (FileNotFoundError, ValueError) as err:
        raise dg.Failure(str(err)) from err
    ranked = compute_board(data, resamples=board.bootstrap_resamples)
    out = write_outputs(store, data, ranked, context.run_id)
    missing = [f"{s['name']}:{q}" for s in ranked["systems"] for q, v in s["quarters"].items() if not v["predicted"]]
    if missing:
        context.log.warning(f"leaderboard: no predictions for {', '.join(missing)}")
    for r in data["rejected"]:
        context.log.warning(f"leaderboard: {r['system']} {r['quarter']} rejected (left unranked): {r['reason']}")
    best = ranked["systems"][0]
    return dg.MaterializeResult(metadata={
        "dagster/row_count": out["table"].height, "version": out["version"], "systems": len(systems),
        "quarters": ", ".join(ranked["all_quarters"]), "claims_scored": len(data["rows"]),
        "missing": ", ".join(missing) or "none",
        "rejected": dg.MetadataValue.md("\n".join(f"- {r['system']} {r['quarter']}: {r['reason']}"
                                                   for r in data["rejected"]) or "none"),
        "partial": ", ".join(s["name"] for s in ranked["systems"] if s["partial"]) or "none",
        "human_audit": dg.MetadataValue.md("\n".join(f"- {q}: {line}" for q, line in ranked["audit"].items())
                                           or "no quarter's release audited yet"),
        "unreadable_system_files": dg.MetadataValue.md("\n".join(f"- {line}" for line in unreadable) or "none"),
        "leader": f"{best['name']} (MSE {best['windows']['all']['mse']})" if best["rank"] else "none",
        "report": dg.MetadataValue.path(str(out["json"])), "page": dg.MetadataValue.path(str(out["html"])),
        "longitudinal_plot": dg.MetadataValue.path(str(out["longitudinal_plot"])),
        "longitudinal": dg.MetadataValue.md(f"```\n{out['longitudinal_txt'].read_text()}```"),
        "ranking": dg.MetadataValue.md(f"```\n{text_ranking(ranked)}```"),
    })
