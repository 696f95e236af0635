"""Checking a written release before it is published: the files and their hashes, the format, the size and media share
it promises, and the provenance its manifest must name."""

import json
import re
from pathlib import Path

from assets.release.card import read_manifest
from assets.rules.bins import bin3
from assets.rules.release_order import (
    order_problems,
    release_orders,
)
from assets.selection.release_selection import media_limit
from schemas.records import (
    ReleaseClaim,
)

JPEG_MAGIC = b"\xff\xd8\xff"


def validate_release(folder: Path, release_size: int | None = None, media_share: float | None = None,
                     allow_short: bool | None = None) -> list[str]:
    """The VeriTaS-format check: files present and real, scores in range, integrity rule, balance, meta counts; no
    label readable from the order of claims.json, the claim ids or the media ids; no problem in the manifest's
    shortcut audit; the media limit and the exact size (``release_size``; fewer only where the manifest's selection
    found no more possible and a short release is allowed); a known code version outside a demo. The parameters
    default to the ones the manifest's selection records; absent, they are not checked."""
    problems = []
    try:
        meta = json.loads((folder / "meta.json").read_text())
        claims = json.loads((folder / "claims.json").read_text())["claims"]
    except (OSError, ValueError, KeyError) as err:
        return [f"unreadable release: {err}"]
    counts = {"intact": 0, "nei": 0, "compromised": 0}
    for raw in claims:
        try:
            claim = ReleaseClaim.model_validate(raw)
        except ValueError as err:
            problems.append(f"claim {raw.get('id')}: {str(err).splitlines()[0]}")
            continue
        for m in claim.media:
            path = folder / m.file_path
            head = path.read_bytes()[:12] if path.exists() else b""
            if not head:
                problems.append(f"claim {claim.id}: missing {m.file_path}")
            elif m.type == "image" and not head.startswith(JPEG_MAGIC):
                problems.append(f"claim {claim.id}: {m.file_path} is not a JPEG")
            elif m.type == "video" and head[4:8] != b"ftyp":
                problems.append(f"claim {claim.id}: {m.file_path} is not an MP4")
        for ref_kind, ref_id in re.findall(r"<(image|video):(\d+)>", claim.text):
            if not any(m.type == ref_kind and m.id == int(ref_id) for m in claim.media):
                problems.append(f"claim {claim.id}: text references missing <{ref_kind}:{ref_id}>")
        parts = {
            "context_coverage": claim.context_coverage.score if claim.context_coverage else None,
            "veracity": claim.veracity.score if claim.veracity else None,
            "contextualization": min((m.contextualization.score for m in claim.media if m.contextualization), default=None),
        }
        present = [v for v in parts.values() if v is not None]
        if not present or abs(min(present) - claim.integrity.score) > 0.011:
            problems.append(f"claim {claim.id}: integrity {claim.integrity.score} is not the lowest of {parts}")
        elif parts.get(claim.integrity.decisive_property) is None or abs(parts[claim.integrity.decisive_property] - claim.integrity.score) > 0.011:
            problems.append(f"claim {claim.id}: decisive property {claim.integrity.decisive_property} does not hold the lowest score")
        label = bin3(claim.integrity.score)
        counts["nei" if label == "unknown" else label] += 1
    if counts["intact"] != counts["compromised"]:
        problems.append(f"unbalanced: {counts['intact']} intact vs {counts['compromised']} compromised")
    manifest = read_manifest(folder)
    problems += size_problems(manifest.get("selection") or {}, claims, release_size, media_share, allow_short)
    problems += provenance_problems(manifest)
    problems += order_problems(release_orders(claims, bin3))
    audit = manifest.get("shortcut_audit") or {}
    problems += [f"shortcut audit: {p}" for p in audit.get("problems", [])]
    if not audit.get("allow_text_shortcut"):
        problems += [f"shortcut audit: {p}" for p in audit.get("text_problems", [])]
    expected = {**counts, "total": len(claims)}
    if meta.get("claim_counts") != expected:
        problems.append(f"meta claim_counts {meta.get('claim_counts')} != {expected}")
    files = {"images": len(list((folder / "images").glob("*.jpg"))), "videos": len(list((folder / "videos").glob("*.mp4")))}
    if meta.get("media_counts") != files:
        problems.append(f"meta media_counts {meta.get('media_counts')} != files {files}")
    return problems


def size_problems(selection: dict, claims: list[dict], release_size: int | None, media_share: float | None,
                  allow_short: bool | None = None) -> list[str]:
    """More media claims than media_share allows; fewer (or more) claims than release_size where the selection (the
    manifest's report) found that many possible; and fewer than release_size at all, unless a short release is
    allowed (``allow_short``, by default the selection's ``allow_short_release``)."""
    release_size = selection.get("release_size") if release_size is None else release_size
    media_share = selection.get("media_share") if media_share is None else media_share
    allow_short = bool(selection.get("allow_short_release")) if allow_short is None else allow_short
    problems = []
    with_media = sum(bool(c.get("media")) for c in claims)
    if media_share is not None and with_media > media_limit(len(claims), media_share):
        problems.append(f"{with_media} of {len(claims)} claims have media: over the media share {media_share}")
    if release_size is not None:
        expected = min(release_size, selection.get("feasible_size", release_size))
        if len(claims) != expected:
            problems.append(f"{len(claims)} claims, not the {expected} the release size {release_size} and the pool allow")
        elif len(claims) < release_size and not allow_short:
            problems.append(f"{len(claims)} claims, short of the release size {release_size}: the quarter's pool allows "
                            "no more under the balance, Unknown-share and media rules (available "
                            f"{selection.get('available')}, selected {selection.get('selected')}). Publish it short "
                            "only on purpose (stages.allow_short_release: true; its card then says so), or lower "
                            "stages.release_size")
    return problems


def provenance_problems(manifest: dict) -> list[str]:
    """A release outside a demo must name the code that built it."""
    if manifest.get("code_version") == "unknown" and not manifest.get("demo"):
        return ["code_version is unknown: the release cannot be traced to the code that built it. Build it from a git "
                "checkout, or set VERITAS_CODE_VERSION to the commit the installed code comes from"]
    return []
