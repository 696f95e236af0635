"""Errata: the audited claims whose annotators all give another 3-bin label than the release, kept per quarter in the
store (``audit/<quarter>/errata.json``, every audit adding its own), left out of the quarter's next release version
with their other variant (a rewrite grounded in a wrong label is suspect too), and a changelog between two versions.
Plain functions, no Dagster: the release reads the record through ``without_errata``."""

import json
from pathlib import Path

from assets.audit.sample import AuditClaim
from schemas.records import ScoredClaim


def errata_rel(quarter: str) -> str:
    return f"audit/{quarter}/errata.json"


def changelog_rel(quarter: str, version: str) -> str:
    """Where the changelog of a version built without errata is published: beside its folder."""
    return f"releases/{quarter}/{version}.changelog.json"


def errata_records(report: dict, claims: list[AuditClaim], release_version: str, audit_version: str) -> list[dict]:
    """The audit's errata as the record keeps them: the pipeline's claim id (and its other variant), where they were
    found (release version and id) and what people said."""
    by_id = {c.id: c for c in claims}
    disputed = {d["claim_id"]: d for d in report["disputed"]}
    return [{"claim_id": by_id[cid].claim_id, "variant_of": by_id[cid].variant_of, "text": by_id[cid].claim.text,
             "release_version": release_version, "release_id": cid, "release_label": disputed[cid]["release_label"],
             "annotators_label": disputed[cid]["annotators_label"], "annotators": disputed[cid]["annotators"],
             "audit_version": audit_version} for cid in report["errata"]]


def accumulate(earlier: dict | None, records: list[dict]) -> dict:
    """The quarter's errata after an audit: the earlier ones stay (a later version no longer holds them, so no later
    audit can find them again), this audit's are added, one entry per pipeline claim id."""
    claims = dict((earlier or {}).get("claims") or {})
    for r in records:
        claims.setdefault(r["claim_id"], r)
    return {"claims": dict(sorted(claims.items()))}


def read_errata(get_bytes, quarter: str) -> dict:
    """The quarter's errata record (``{"claims": {}}`` when none), read with the store's ``get_bytes``."""
    try:
        return json.loads(get_bytes(errata_rel(quarter)))
    except FileNotFoundError:
        return {"claims": {}}


def without_errata(pool: list[ScoredClaim], errata: dict) -> tuple[list[ScoredClaim], list[str]]:
    """The pool without the errata's claims and their other variants; (kept, the ids left out)."""
    entries = (errata.get("claims") or {}).items()
    out = {cid for cid, _ in entries} | {r["variant_of"] for _, r in entries if r.get("variant_of")}
    out |= {c.claim_id for c in pool if c.variant_of in out}
    return [c for c in pool if c.claim_id not in out], sorted(out & {c.claim_id for c in pool})


def changelog(previous: Path, current: Path, errata: dict, kept_key) -> dict:
    """What changed from the ``previous`` version to the ``current`` one: the claims removed (with the erratum that
    removed each, when one did), the claims added from the pool, and the kept claims' new ids (a version is numbered
    afresh). ``kept_key(claim)`` names a claim across versions (its review URL and text without media numbers)."""
    def claims(folder):
        return {c["id"]: c for c in json.loads((Path(folder) / "claims.json").read_text(encoding="utf-8"))["claims"]}

    old, new = claims(previous), claims(current)
    old_keys = {kept_key(c): cid for cid, c in old.items()}
    new_keys = {kept_key(c): cid for cid, c in new.items()}
    by_text = {(r["release_version"], r["release_id"]): r for r in (errata.get("claims") or {}).values()}
    removed = []
    for key in sorted(set(old_keys) - set(new_keys), key=lambda k: old_keys[k]):
        cid = old_keys[key]
        why = by_text.get((Path(previous).name, cid))
        removed.append({"id": cid, "text": old[cid]["text"], "reason": (
            f"erratum: {why['annotators']} annotators label it {why['annotators_label']}, the release said "
            f"{why['release_label']}" if why else "replaced with its pair or by the selection")})
    added = [{"id": new_keys[k], "text": new[new_keys[k]]["text"]} for k in sorted(set(new_keys) - set(old_keys),
                                                                                 key=lambda k: new_keys[k])]
    return {"previous_version": Path(previous).name, "version": Path(current).name,
            "removed": removed, "added": added, "kept": len(set(old_keys) & set(new_keys)),
            "renumbered": {str(old_keys[k]): new_keys[k] for k in sorted(set(old_keys) & set(new_keys),
                                                                          key=lambda k: old_keys[k])},
            "errata_applied": sorted(r["release_id"] for r in (errata.get("claims") or {}).values()
                                     if r["release_version"] == Path(previous).name)}
