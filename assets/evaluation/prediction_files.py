"""Reading a system's predictions and the releases they answer: the release folders under a path, and the
predictions file (JSON or JSONL), record by record, refusing what is malformed with its line and field."""

import json
import re
from pathlib import Path
from typing import NamedTuple

from assets.evaluation.predictions import (
    KeyedObject,
    json_shown,
    MiB,
    parse_json,
    read_json,
    read_text,
    reject_constant,
)
from dagster_project.core.atomic_files import pointed_folder
from dagster_project.partitions import to_label
from schemas.records import Prediction, ReleaseClaim


def find_releases(folder: Path) -> dict[str, Path]:
    """Release folders under ``folder``: a release itself, a quarter folder with LATEST, or a folder of quarters.

    The quarter comes from meta.json (``year``, ``quarter``), else from a folder name such as ``2025Q4``.
    """
    folder = Path(folder)

    def quarter_of_release(release: Path) -> str:
        meta_path = release / "meta.json"
        if meta_path.is_file():  # a meta.json that says no valid quarter is the release's fault: never guessed past
            meta = read_json(meta_path, MiB, "a release's meta.json")
            year, quarter = (meta.get("year"), meta.get("quarter")) if isinstance(meta, dict) else (None, None)
            label = f"{year}Q{str(quarter).removeprefix('Q').removeprefix('q')}"
            if isinstance(year, bool) or isinstance(quarter, bool) or not label.isascii() or not QUARTER.match(label):
                raise ValueError(f"{meta_path}: fields year and quarter give {json.dumps(year)[:20]} and "
                                 f"{json.dumps(quarter)[:20]}, not a quarter (year 2025, quarter 1 to 4): the release "
                                 "is damaged; restore it or rebuild it")
            return label
        for part in (release.name, release.parent.name):
            try:
                return to_label(part)
            except ValueError:
                continue
        raise ValueError(f"{release}: cannot tell the quarter (no meta.json and no quarter in the folder name)")

    def resolve(candidate: Path, pointed: bool = False) -> Path | None:
        if (candidate / "claims.json").is_file():
            return candidate
        if (candidate / "LATEST").is_file() and not pointed:  # one pointer, to a version inside the folder
            name = read_text(candidate / "LATEST", 4096, "a LATEST pointer").strip()
            return resolve(pointed_folder(candidate, name), True)
        return None

    single = resolve(folder)
    if single is not None:
        return {quarter_of_release(single): single}
    found = {}
    for child in sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []:
        release = resolve(child)
        if release is not None:
            found[quarter_of_release(release)] = release
    if not found:
        raise FileNotFoundError(f"no release (claims.json) in {folder}")
    return found


QUARTER = re.compile(r"^[0-9]{4}Q[1-4]$")


def release_identity(folder: Path) -> dict:
    """Which release a report scored: its version (the manifest's; a copy made by ``veritas export`` is named after
    its quarter, not its version), its content id, its folder, and the summary of its human audit when the audit's
    addendum lies beside it (``<folder>.audit.json``, as the store and ``veritas export`` place it) and is of this
    version. A folder without a manifest is named by its folder and marked so."""
    from assets.audit.card import ADDENDUM_SUFFIX
    from assets.release.recurring import release_content_id

    folder = Path(folder)
    manifest_path = folder / "manifest.json"
    manifest = read_json(manifest_path, 16 * MiB, "a release's manifest.json") if manifest_path.is_file() else None
    if not isinstance(manifest, dict):
        return {"version": folder.name, "content_id": "", "folder": str(folder), "manifest": False}
    version = str(manifest.get("version") or folder.name)
    identity = {"version": version, "content_id": release_content_id(folder), "folder": str(folder)}
    addendum_path = folder.parent / f"{folder.name}{ADDENDUM_SUFFIX}"
    try:
        addendum = read_json(addendum_path, 16 * MiB, "a human audit's addendum") if addendum_path.is_file() else None
    except ValueError:  # a damaged addendum never stops an evaluation: the report only leaves the audit out
        addendum = None
    if isinstance(addendum, dict) and (addendum.get("release") or {}).get("version") == version:
        identity["human_audit"] = addendum.get("summary", "")
    return identity


MAX_PREDICTION_BYTES = 64 * MiB  # a 1,000-claim quarter with justifications is a few MB; parsing costs ~40x the bytes


RECORD_FIELDS = "{claim_id, integrity, veracity, context_coverage, media: [{id, authenticity, contextualization}]}"


MAX_ERRORS_SHOWN = 3


class Located(NamedTuple):
    """A prediction and where it was read: ``line 4`` (JSON Lines) or ``record 4`` (a JSON list), 1-based."""

    where: str
    prediction: Prediction


def _integer(value, field: str) -> int:
    """An id: a JSON integer, or a string of ASCII digits; never a bool, a fraction or another script's digits."""
    if isinstance(value, bool):
        raise ValueError(f"field {field}: {json.dumps(value)} is not an id; give an integer")
    if isinstance(value, int) and abs(value) < 2**63:
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 18:
        return int(value)
    shown = json.dumps(value, ensure_ascii=False)
    raise ValueError(f"field {field}: {shown[:40]} is not an id; give an integer such as 17 (ASCII digits)")


def _score(value, field: str):
    """A score given as a number in [-1, 1] or as ``{"score": x}`` (the release format); null for no score."""
    if isinstance(value, dict):
        if "score" not in value:
            shown = json_shown(value)
            raise ValueError(f"field {field}: {shown} has no score; give a number in [-1, 1], {{\"score\": x}} or null")
        value = value.get("score")
        field = f"{field}.score"
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not -1 <= value <= 1:
        shown = json_shown(value)
        raise ValueError(f"field {field}: {shown} is not a score; give a number in [-1, 1] or null")
    return float(value)


def _quarter(value, field: str = "quarter") -> str:
    if not isinstance(value, str) or not value.isascii():
        shown = json_shown(value)
        raise ValueError(f"field {field}: {shown} is not a quarter; give e.g. 2025Q4")
    try:
        return to_label(value)
    except ValueError:
        raise ValueError(f"field {field}: {value[:40]!r} is not a quarter; give e.g. 2025Q4") from None


def _duplicated(value, field: str = "") -> str:
    """The first field given twice in one object of ``value`` (read with ``KeyedObject``), as a path such as
    ``media[0].id``; "" when none is."""
    if isinstance(value, KeyedObject) and value.duplicates:
        return f"{field}.{value.duplicates[0]}" if field else str(value.duplicates[0])
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        inner = f"{field}[{key}]" if isinstance(value, list) else f"{field}.{key}" if field else str(key)
        if found := _duplicated(child, inner):
            return found
    return ""


def prediction_from_json(raw: dict, quarter: str, system: str) -> Prediction:
    """An outside system's prediction: ``claim_id`` (or ``id``) and scores, as numbers or ``{"score": x}``, read
    strictly: a ValueError names the field and the value that is wrong."""
    if not isinstance(raw, dict):
        shown = json.dumps(raw)[:40] if raw is not None else "null"
        raise ValueError(f"expected an object {RECORD_FIELDS}, got {shown}")
    if twice := _duplicated(raw):
        raise ValueError(f"field {twice}: given twice in one record (JSON keeps only the last); keep one")
    if "claim_id" in raw and "id" in raw:
        raise ValueError(f"field id: {json_shown(raw['id'], 20)} given beside claim_id "
                         f"{json_shown(raw['claim_id'], 20)}; give one of them")
    key = "claim_id" if "claim_id" in raw else "id" if "id" in raw else None
    if key is None:
        raise ValueError("field claim_id: missing; every prediction names the release claim it scores (claim_id or id)")
    media = raw.get("media")
    if media is not None and not isinstance(media, list):
        raise ValueError(f"field media: {json_shown(media)} is not a list; give "
                         "[{id, authenticity, contextualization}] or leave it out")
    predicted_media, first_at = [], {}
    for i, m in enumerate(media or []):
        if not isinstance(m, dict) or "id" not in m:
            raise ValueError(f"field media[{i}]: expected an object {{id, authenticity, contextualization}}")
        mid = _integer(m["id"], f"media[{i}].id")
        if mid in first_at:  # two scores for one medium: which one counts would be a guess
            raise ValueError(f"field media[{i}].id: {mid} is given twice (media[{first_at[mid]}] too); keep one "
                             "score per medium")
        first_at[mid] = i
        predicted_media.append({"id": mid,
                                "authenticity": _score(m.get("authenticity"), f"media[{i}].authenticity"),
                                "contextualization": _score(m.get("contextualization"),
                                                            f"media[{i}].contextualization")})
    if raw.get("quarter") is None and not quarter:
        raise ValueError("field quarter: missing, and the release gives none (several quarters); "
                         "give each record a quarter, or pass --quarter")
    name = raw.get("system")
    if name is not None and not isinstance(name, str):
        raise ValueError(f"field system: {json.dumps(name)[:40]} is not a name; give a string")
    justification = raw.get("justification")
    return Prediction.model_validate({
        "claim_id": _integer(raw[key], key),
        "quarter": _quarter(raw["quarter"]) if raw.get("quarter") is not None else _quarter(quarter, "--quarter"),
        "system": name or system,
        "integrity": _score(raw.get("integrity"), "integrity"), "veracity": _score(raw.get("veracity"), "veracity"),
        "context_coverage": _score(raw.get("context_coverage"), "context_coverage"), "media": predicted_media,
        "justification": justification if isinstance(justification, str) else "",
    })


def _records(text: str, path: Path) -> tuple[list, str, dict]:
    """The records of a predictions file, how they are counted ("line" or "record") and the wrapper's fields.

    A whole-file JSON document is a list, a wrapper ``{"system", "quarter", "predictions"|"claims": [...]}`` or one
    prediction object (a JSON Lines file of one line); anything else is JSON Lines, one object a line."""
    what = "a predictions file"
    if not text.strip():
        raise ValueError(f"{path}: is empty; give a JSON list, JSON Lines or {{\"predictions\": [...]}} of "
                         f"{RECORD_FIELDS}")
    try:
        payload = json.loads(text, parse_constant=reject_constant, object_pairs_hook=KeyedObject)
        lines = None
    except json.JSONDecodeError:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        first = lines[0][1].lstrip() if lines else ""
        if not first.startswith("{") or len(lines) < 2:  # a broken JSON document, not JSON Lines: say where
            parse_json(text, path, what)
        return [parse_json(line, path, what, n, KeyedObject) for n, line in lines], "line", {}
    except (RecursionError, ValueError):
        parse_json(text, path, what)  # raises the message that names the file
    if isinstance(payload, dict) and ("predictions" in payload or "claims" in payload):
        if "predictions" in payload and "claims" in payload:
            raise ValueError(f"{path}: field claims: given beside predictions; give one list of predictions")
        for field in ("predictions", "claims", "system", "quarter"):
            if field in getattr(payload, "duplicates", ()):
                raise ValueError(f"{path}: field {field}: given twice (JSON keeps only the last); keep one")
        records = payload["predictions"] if "predictions" in payload else payload["claims"]
        if not isinstance(records, list):
            raise ValueError(f"{path}: field {'predictions' if 'predictions' in payload else 'claims'}: "
                             f"expected a list of {RECORD_FIELDS}")
        for field in ("system", "quarter"):
            if payload.get(field) is not None and not isinstance(payload[field], str):
                raise ValueError(f"{path}: field {field}: {json.dumps(payload[field])[:40]} is not a string")
        return records, "record", {k: payload.get(k) or "" for k in ("system", "quarter")}
    if isinstance(payload, dict) and payload:
        return [payload], "line" if "\n" not in text.strip() else "record", {}
    if isinstance(payload, list):
        return payload, "record", {}
    raise ValueError(f"{path}: holds no predictions ({text.strip()[:20] or 'an empty file'}); give a JSON list, "
                     f"JSON Lines or {{\"predictions\": [...]}} of {RECORD_FIELDS}")


def parse_predictions(path: Path, quarter: str = "", system: str = "",
                      max_bytes: int = MAX_PREDICTION_BYTES) -> tuple[list[Located], list[str]]:
    """Every record of a predictions file, read strictly: the predictions with where each was read, and one error
    per record that is not a prediction or repeats a claim (where, field, what to do); every record is one or the
    other. A file that cannot be read as records at all (empty, not JSON, too big, too deep) is a ValueError."""
    path = Path(path)
    records, unit, wrapper = _records(read_text(path, max_bytes, "a predictions file"), path)
    if not records:
        raise ValueError(f"{path}: holds no predictions (an empty list); give at least one {RECORD_FIELDS}")
    system = wrapper.get("system") or system or path.stem
    quarter = wrapper.get("quarter") or quarter
    out, errors, first_at = [], [], {}
    for i, raw in enumerate(records, 1):
        where = f"{unit} {i}"
        try:
            p = prediction_from_json(raw, quarter, system)
        except ValueError as err:  # pydantic's ValidationError is one too
            errors.append(f"{where}: {str(err).splitlines()[0]}")
            continue
        except RecursionError:
            errors.append(f"{where}: nested too deeply to be a prediction")
            continue
        key = (p.quarter, p.system, p.claim_id)
        if key in first_at:
            errors.append(f"{where}: field claim_id: {p.claim_id} is predicted twice ({first_at[key]} too); "
                          "keep one prediction per claim")
            continue
        first_at[key] = where
        out.append(Located(where, p))
    return out, errors


def read_predictions(path: Path, quarter: str = "", system: str = "",
                     max_bytes: int = MAX_PREDICTION_BYTES) -> list[Located]:
    """``parse_predictions``, where any bad record is a ValueError that names the file, the line or record and the
    field (the first few of them, and how many more)."""
    out, errors = parse_predictions(path, quarter, system, max_bytes)
    if errors:
        more = f" (and {len(errors) - MAX_ERRORS_SHOWN} more)" if len(errors) > MAX_ERRORS_SHOWN else ""
        raise ValueError(f"{path}: " + "; ".join(errors[:MAX_ERRORS_SHOWN]) + more)
    return out


def check_claim_ids(path: Path, located: list[Located], gold: dict[str, list[ReleaseClaim]]) -> None:
    """Every prediction scores a claim of its quarter's release, and each of its media one of that claim's media:
    an unknown id is an error naming where it was read and the field."""
    media = {q: {c.id: [m.id for m in c.media] for c in claims} for q, claims in gold.items()}
    unknown = []
    for where, p in located:
        if p.quarter not in media:
            continue
        if p.claim_id not in media[p.quarter]:
            unknown.append(f"{where}: field claim_id: {p.claim_id} is not a claim of the {p.quarter} release")
            continue
        own = media[p.quarter][p.claim_id]
        for i, m in enumerate(p.media):
            if m.id not in own:
                owner = next((c for c, ids in media[p.quarter].items() if m.id in ids), None)
                whose = f"claim {owner}'s" if owner is not None else f"no medium of the {p.quarter} release"
                unknown.append(f"{where}: field media[{i}].id: {m.id} is not a medium of claim {p.claim_id} "
                               f"(it is {whose}; claim {p.claim_id}'s: {', '.join(map(str, own)) or 'none'})")
                break
    if unknown:
        more = f" (and {len(unknown) - MAX_ERRORS_SHOWN} more)" if len(unknown) > MAX_ERRORS_SHOWN else ""
        raise ValueError(f"{path}: " + "; ".join(unknown[:MAX_ERRORS_SHOWN]) + more +
                         "; check that the file and --release are of the same release")


def load_predictions(path: Path, quarter: str = "", system: str = "",
                     max_bytes: int = MAX_PREDICTION_BYTES) -> list[Prediction]:
    """Predictions from JSON (a list, ``{"system", "quarter", "predictions"|"claims": [...]}``) or JSON Lines.

    ``quarter``/``system`` fill in what the records do not say; a claims.json-shaped file (release format)
    is accepted as is, so any system that writes the VeriTaS format can be scored. Read strictly
    (``read_predictions``)."""
    return [p for _, p in read_predictions(path, quarter, system, max_bytes)]
