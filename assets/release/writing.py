"""Writing a release version: claims.json and meta.json in the VeriTaS format, the media, claims.parquet, the manifest
with every file's hash, and the zip."""

import hashlib
import json
import shutil
import zipfile
from pathlib import Path

import polars as pl

from assets.release.card import write_release_card, zip_name
from assets.rules.bins import bin3
from dagster_project.resources.media import MediaStore
from schemas.records import (
    ReleaseClaim,
)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_release(
    folder: Path, quarter: str, claims: list[ReleaseClaim], files: list[tuple[int, str, str]], media: MediaStore,
    provenance: dict, injection_flags: list[list[str]] | None = None, recurring: dict[int, dict] | None = None,
) -> dict:
    """meta.json, claims.json, images/<id>.jpg, videos/<id>.mp4 and manifest.json into ``folder``.
    ``injection_flags`` (one list per claim) and ``recurring`` (release claim id -> the earlier release claim it
    repeats) go into claims.parquet and the manifest, never into claims.json. The card shows the provenance's
    order, reliability, shortcut audit and recurring sections."""
    flags = list(injection_flags) if injection_flags is not None else [[] for _ in claims]
    (folder / "images").mkdir()
    (folder / "videos").mkdir()
    for mid, kind, path in files:
        target = folder / ("images" if kind == "image" else "videos") / f"{mid}.{'jpg' if kind == 'image' else 'mp4'}"
        shutil.copyfile(media.path(path), target)
    labels = [bin3(c.integrity.score) for c in claims]
    meta = {
        "year": int(quarter[:4]),
        "quarter": int(quarter[5]),
        "claim_counts": {
            "intact": labels.count("intact"), "nei": labels.count("unknown"),
            "compromised": labels.count("compromised"), "total": len(claims),
        },
        "media_counts": {"images": sum(k == "image" for _, k, _ in files), "videos": sum(k == "video" for _, k, _ in files)},
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=2))
    payload = {"claims": [c.model_dump() for c in claims]}
    (folder / "claims.json").write_text(json.dumps(payload, indent=1, ensure_ascii=False))
    release_frame(claims, flags, recurring).write_parquet(folder / "claims.parquet")
    write_zip(folder, zip_name(quarter))
    # media.parquet, croissant.json, README.md; no run id, so equal content gives equal bytes
    write_release_card(folder, quarter, integrity=provenance)
    manifest = {
        **provenance,
        "quarter": quarter,
        "counts": meta,
        "injection_flags": {str(c.id): f for c, f in zip(claims, flags) if f},  # release claim id -> phrases found
        "files": {str(p.relative_to(folder)): _sha256(p) for p in sorted(folder.rglob("*")) if p.is_file()},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False))
    return manifest


def release_frame(claims: list[ReleaseClaim], injection_flags: list[list[str]] | None = None,
                  recurring: dict[int, dict] | None = None) -> pl.DataFrame:
    """The release as one flat table: a row per claim, scores as columns, media as JSON text, the
    instruction-like phrases found in each claim's sources (``injection_flags``) and, for a claim that recurs from an
    earlier release, that release's quarter and claim id."""
    flags = list(injection_flags) if injection_flags is not None else [[] for _ in claims]
    def score(v):
        return None if v is None else v.score

    rows = [{
        "id": c.id, "text": c.text, "date": c.date, "language": c.language, "review_url": c.review_url,
        "veracity": score(c.veracity), "context_coverage": score(c.context_coverage),
        "integrity": c.integrity.score, "decisive_property": c.integrity.decisive_property,
        "label": bin3(c.integrity.score), "n_images": sum(m.type == "image" for m in c.media),
        "n_videos": sum(m.type == "video" for m in c.media),
        "media_json": json.dumps([m.model_dump() for m in c.media], ensure_ascii=False),
        "veracity_justification": c.veracity.justification if c.veracity else None,
        "context_coverage_justification": c.context_coverage.justification if c.context_coverage else None,
        "injection_flags": f,
        "recurring_quarter": (recurring or {}).get(c.id, {}).get("quarter"),
        "recurring_id": (recurring or {}).get(c.id, {}).get("id"),
    } for c, f in zip(claims, flags)]
    schema = {"id": pl.Int64, "text": pl.Utf8, "date": pl.Utf8, "language": pl.Utf8, "review_url": pl.Utf8,
              "veracity": pl.Float64, "context_coverage": pl.Float64, "integrity": pl.Float64,
              "decisive_property": pl.Utf8, "label": pl.Utf8, "n_images": pl.Int64, "n_videos": pl.Int64,
              "media_json": pl.Utf8, "veracity_justification": pl.Utf8, "context_coverage_justification": pl.Utf8,
              "injection_flags": pl.List(pl.Utf8), "recurring_quarter": pl.Utf8, "recurring_id": pl.Int64}
    return pl.DataFrame(rows, schema=schema, orient="row")


ZIP_MEMBERS = ("meta.json", "claims.json", "images", "videos")


def write_zip(folder: Path, name: str) -> Path:
    """The VeriTaS-format files (meta.json, claims.json, images/, videos/) as one zip, paths relative to it."""
    target = folder / name
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for member in ZIP_MEMBERS:
            path = folder / member
            files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
            for f in files:
                # media are already compressed; a fixed timestamp makes the zip reproducible
                info = zipfile.ZipInfo(str(f.relative_to(folder)), date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_STORED if f.suffix in (".jpg", ".mp4") else zipfile.ZIP_DEFLATED
                zf.writestr(info, f.read_bytes())
    return target
