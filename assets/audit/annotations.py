"""Label Studio's export read back as answers: one row per answer (a property of a claim, or of one of its media),
with the category, the certainty and the score they make on the ensemble's scale. Plain functions, no Dagster."""

import json
from fractions import Fraction
from pathlib import Path

import polars as pl

from assets.audit.labelling import NOTE, read_answer_name
from prompts import label_scheme

SCHEMA = {"quarter": pl.Utf8, "release_version": pl.Utf8, "claim_id": pl.Int64, "annotator": pl.Utf8,
          "annotation_id": pl.Utf8, "property": pl.Utf8, "medium_index": pl.Int64, "category": pl.Utf8,
          "certainty": pl.Utf8, "score": pl.Float64, "note": pl.Utf8, "updated_at": pl.Utf8}
ANNOTATION_KEY = ("release_version", "claim_id", "annotation_id")


class ExportError(ValueError):
    """A file that is not a Label Studio JSON export of this quarter's audit tasks: the message says what is wrong."""


def score_of(category: str | None, certainty: str | None) -> float | None:
    """The ensemble's scale: +certainty for positive, -certainty for negative, 0 for unknown; None for an answer
    without a category, or a positive or negative one without a certainty."""
    if category == "unknown":
        return 0.0
    if category not in ("positive", "negative") or not certainty:
        return None
    value = float(Fraction(str(label_scheme()["certainty"][certainty])))
    return value if category == "positive" else -value


def _annotator(completed_by) -> str:
    """Label Studio's ``completed_by``: a user id, or (some versions and exports) the user as an object."""
    if isinstance(completed_by, dict):
        return str(completed_by.get("email") or completed_by.get("id") or "unknown")
    return f"user:{completed_by}" if completed_by is not None else "unknown"


def _choice(result: dict) -> str | None:
    """The chosen alias (positive, rather certain...); a choice stored by its shown text ("Positive: ...",
    "Certainty: certain", as an instance that ignores aliases keeps it) reads as the same alias."""
    choices = (result.get("value") or {}).get("choices") or []
    if not choices:
        return None
    text = str(choices[0]).strip()
    text = text.removeprefix("Certainty:").strip() if text.startswith("Certainty:") else text.split(":")[0]
    return text.strip().lower() or None


def answer_rows(task: dict) -> tuple[list[dict], int]:
    """The answers of one exported task's annotations (cancelled ones left out, and counted)."""
    data = task.get("data") or {}
    rows, cancelled = [], 0
    for annotation in task.get("annotations") or []:
        if annotation.get("was_cancelled"):
            cancelled += 1
            continue
        base = {"quarter": str(data.get("quarter", "")), "release_version": str(data.get("release_version", "")),
                "claim_id": int(data["claim_id"]), "annotator": _annotator(annotation.get("completed_by")),
                "annotation_id": str(annotation.get("id") or annotation.get("unique_id") or ""),
                "updated_at": str(annotation.get("updated_at") or annotation.get("created_at") or "")}
        answers: dict[tuple[str, int], dict] = {}
        note = ""
        for result in annotation.get("result") or []:
            name = result.get("from_name", "")
            if name == NOTE:
                note = " ".join((result.get("value") or {}).get("text") or [])
                continue
            parsed = read_answer_name(name)
            if parsed is None:
                continue
            prop, medium, is_certainty = parsed
            slot = answers.setdefault((prop, medium), {"category": None, "certainty": None})
            slot["certainty" if is_certainty else "category"] = _choice(result)
        for (prop, medium), a in sorted(answers.items()):
            certainty = None if a["category"] == "unknown" else a["certainty"]
            rows.append({**base, "property": prop, "medium_index": medium, "category": a["category"] or "",
                         "certainty": certainty or "", "score": score_of(a["category"], certainty), "note": ""})
        if note:
            rows.append({**base, "property": NOTE, "medium_index": -1, "category": "", "certainty": "",
                         "score": None, "note": note})
    return rows, cancelled


def read_export(payload: list | dict, quarter: str) -> tuple[pl.DataFrame, dict]:
    """A Label Studio JSON export (the list of tasks with their annotations) as an answers frame, and what was read
    (tasks, annotations, cancelled). Raises ExportError for another file, or tasks of another quarter."""
    if isinstance(payload, dict) and isinstance(payload.get("tasks"), list):
        payload = payload["tasks"]
    if not isinstance(payload, list) or not all(isinstance(t, dict) for t in payload):
        raise ExportError("not a Label Studio JSON export: expected a list of tasks (export the project as JSON, "
                          "not JSON_MIN, CSV or another format)")
    rows, cancelled, annotations = [], 0, 0
    for i, task in enumerate(payload):
        data = task.get("data") or {}
        if "claim_id" not in data or "release_version" not in data:
            raise ExportError(f"task {i} ({task.get('id', 'no id')}) is not a veritas audit task: its data has no "
                              "claim_id and release_version (tasks come from `veritas audit export` or push)")
        if str(data.get("quarter")) != quarter:
            raise ExportError(f"task {i} is of {data.get('quarter')}, not {quarter}: import each quarter's export "
                              "with its own --quarter")
        found, dropped = answer_rows(task)
        rows += found
        cancelled += dropped
        annotations += len(task.get("annotations") or []) - dropped
    summary = {"tasks": len(payload), "annotations": annotations, "cancelled": cancelled}
    return pl.DataFrame(rows, schema=SCHEMA, orient="row"), summary


def read_export_file(path: Path, quarter: str) -> tuple[pl.DataFrame, dict]:
    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ExportError(f"{path}: not JSON ({err.msg} at line {err.lineno})") from None
    return read_export(payload, quarter)


def merge(earlier: pl.DataFrame | None, new: pl.DataFrame) -> pl.DataFrame:
    """The answers after an import: every annotation in ``new`` replaces its earlier answers (an annotation edited
    in Label Studio comes back whole), the earlier ones it does not name are kept."""
    if earlier is None or earlier.is_empty():
        return new
    key = pl.struct(list(ANNOTATION_KEY))
    kept = earlier.filter(~key.is_in(new.select(key).to_series().implode()))
    return pl.concat([kept.select(list(SCHEMA)), new.select(list(SCHEMA))])


def answers_of(frame: pl.DataFrame, release_version: str) -> dict[int, dict[str, dict[tuple[str, int], float]]]:
    """claim id -> annotator -> (property, medium index) -> score, for one release version's answers that have a
    score (a question left unanswered, or answered without a certainty, is missing)."""
    out: dict[int, dict[str, dict[tuple[str, int], float]]] = {}
    rows = frame.filter((pl.col("release_version") == release_version) & pl.col("score").is_not_null())
    for r in rows.iter_rows(named=True):
        out.setdefault(r["claim_id"], {}).setdefault(r["annotator"], {})[(r["property"], r["medium_index"])] = r["score"]
    return out


def to_export(tasks: list[dict], answers: dict[int, dict[str, dict[tuple[str, int], tuple[str, str]]]],
              notes: dict[tuple[int, str], str] | None = None) -> list[dict]:
    """Tasks with annotations as Label Studio exports them (JSON): ``answers`` is claim id -> annotator -> (property,
    medium index) -> (category, certainty). What a simulated annotator or a test writes, and `read_export` reads."""
    from assets.audit.labelling import CLAIM_OBJECT, answer_name

    out, next_id = [], 1
    for n, task in enumerate(tasks, 1):
        claim_id = task["data"]["claim_id"]
        annotations = []
        for annotator, given in sorted((answers.get(claim_id) or {}).items()):
            result = []
            for (prop, medium), (category, certainty) in sorted(given.items()):
                index = None if medium < 0 else medium
                to_name = CLAIM_OBJECT if medium < 0 else f"medium_{medium}"
                result.append({"from_name": answer_name(prop, index), "to_name": to_name, "type": "choices",
                               "value": {"choices": [category]}})
                if category != "unknown":
                    result.append({"from_name": answer_name(prop, index, certainty=True), "to_name": to_name,
                                   "type": "choices", "value": {"choices": [certainty]}})
            if note := (notes or {}).get((claim_id, annotator)):
                result.append({"from_name": NOTE, "to_name": CLAIM_OBJECT, "type": "textarea",
                               "value": {"text": [note]}})
            annotations.append({"id": next_id, "completed_by": {"email": annotator}, "result": result,
                                "was_cancelled": False})
            next_id += 1
        out.append({"id": n, "data": task["data"], "annotations": annotations, "predictions": []})
    return out
