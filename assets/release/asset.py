"""The release: a balanced split per quarter in the VeriTaS format, with a manifest, checked before it is published."""

import warnings
from datetime import UTC, datetime

import dagster as dg

from assets.release.card import integrity_summary, vision_note
from assets.release.chain import (
    ALLOW_TAG,
    chain_gaps,
    gap_message,
    later_message,
    later_stale,
    nearest_before,
    quarters_with_data,
    recorded_releases,
)
from assets.release.numbering import media_phashes, ordered_release
from assets.release.provenance import (
    code_version,
    cost_summary,
    model_diversity,
    rewrite_summary,
)
from assets.release.recurring import (
    earlier_releases,
    match_recurring,
    release_content_id,
    release_fingerprints,
)
from assets.release.validation import validate_release
from assets.release.writing import write_release
from assets.rules.failed_answers import stage_failed_answers
from assets.rules.release_order import (
    order_key,
)
from assets.rules.reliability import alpha_metadata, ensemble_alpha
from assets.selection.channels import media_texts
from assets.selection.release_selection import select_undetectable
from assets.selection.shortcut_audit import pool_rows, release_rows, shortcut_audit
from assets.audit.errata import read_errata, without_errata
from assets.stage.tables import StageYield, load_upstream
from assets.stage.wiring import quarter_of_context, stage_asset
from dagster_project.core.instance_records import latest_json
from dagster_project.resources.llm import LLMResource
from dagster_project.resources.store import StoreResource, new_version
from dagster_project.stage_settings import (
    ClaimRules,
    IngestionSettings,
    ReleaseSettings,
)
from prompts import HERE as PROMPTS_DIR
from prompts import template_hash
from schemas.records import (
    ScoredClaim,
)

STAGE = "release"


# A release reads the releases before it (recurring claims): the quarter before's, through this self-dependency (or,
# past quarters without reviews, the nearest earlier one), and the ones that release read. So a backfill builds
# releases oldest first, a rebuilt release makes the next stale, and none is built on a missing or stale one
# (``earlier_checked``, assets/release/chain.py).
with warnings.catch_warnings():  # the first partition's quarter before does not exist: beta in 1.13, and needed
    warnings.simplefilter("ignore", dg.BetaWarning)
    PREVIOUS_QUARTER = dg.TimeWindowPartitionMapping(start_offset=-1, end_offset=-1,
                                                     allow_nonexistent_upstream_partitions=True)


def previous_release(releases: dict[str, dict], quarter: str) -> tuple[str, str, str] | None:
    """(quarter, version, content id) of the release of the nearest earlier quarter that has one, as Dagster
    recorded its latest materialization (``chain.recorded_releases``); None when none before it has one. Quarters
    between without a release hold no reviews (``earlier_checked`` refused the others, unless told not to)."""
    before = nearest_before(releases, quarter)
    return (before, releases[before]["version"], releases[before]["content_id"]) if before else None


def earlier_checked(context: dg.AssetExecutionContext, store: StoreResource, quarter: str) -> tuple[dict, list[str]]:
    """The recorded releases, and the earlier quarters this release is built without (missing or stale ones; only
    with the run tag ``ALLOW_TAG``): a dg.Failure naming them otherwise, before anything is read or written, so that
    no launch (``veritas run``, a backfill, the schedule, the UI) points LATEST at a release built without them."""
    releases = recorded_releases(context.instance)
    missing, stale = chain_gaps(releases, quarters_with_data(context.instance, store), quarter)
    if not (missing or stale):
        return releases, []
    if context.run.tags.get(ALLOW_TAG) != "true":
        raise dg.Failure(gap_message(quarter, missing, stale, f"launch the run with the tag {ALLOW_TAG}=true"))
    context.log.warning(f"release {quarter}: built without the releases of {', '.join(missing + stale)} ({ALLOW_TAG})")
    return releases, sorted(missing + stale)


@stage_asset(
    "release",
    "The quarter's balanced split in the VeriTaS format (meta.json, claims.json, images/, videos/).",
    deps=("rectified_claims", dg.AssetDep("release", partition_mapping=PREVIOUS_QUARTER)),
    kinds=("json", "python"),
)
def release(
    context: dg.AssetExecutionContext, release_rules: ReleaseSettings, claim_rules: ClaimRules,
    ingestion: IngestionSettings, store: StoreResource, llm: LLMResource
) -> dg.MaterializeResult:
    quarter = quarter_of_context(context)
    releases, without = earlier_checked(context, store, quarter)
    scored_pool = load_upstream(store, "rectified_claims", quarter, ScoredClaim)
    errata = read_errata(store.get_bytes, quarter)  # claims people labelled otherwise in an earlier version's audit
    claims, left_out = without_errata(scored_pool, errata)
    previous = previous_release(releases, quarter)
    chain = earlier_releases(previous[:2] if previous else None, store.release_folder)
    earlier = {q: release_fingerprints(folder) for q, folder in chain.items()}
    recurring = match_recurring(claims, earlier, release_rules.text_duplicate_similarity,
                                claim_rules.near_duplicate_distance)
    pool = claims
    if release_rules.recurring == "drop":  # an original that recurs takes its rectified variant with it, and back
        gone = {k for c in claims if c.claim_id in recurring for k in (c.claim_id, c.variant_of)}
        pool = [c for c in claims if c.claim_id not in gone]
    key = order_key(store)
    pool = sorted(pool, key=lambda c: c.claim_id)  # the table's row order varies with the runs' concurrency
    reader = media_texts(llm.cache_path, store.media_store())  # stage 5's OCR of the media, for the channels
    chosen, report, adversarial = select_undetectable(pool, release_rules, claim_rules, key, media_text=reader)
    report["allow_short_release"] = release_rules.allow_short_release
    chosen, release_claims, files, order = ordered_release(chosen, key)
    flags = [c.injection_flags for c in chosen]
    marks = {rc.id: recurring[c.claim_id] for c, rc in zip(chosen, release_claims) if c.claim_id in recurring}
    scored = sorted((c for c in claims if c.variant == "original"), key=lambda c: c.claim_id)  # the whole scored pool
    try:  # every claim of the pool, rewrites too: the audit tells them apart itself
        audit = shortcut_audit(release_rows(release_claims, [c.variant for c in chosen], chosen, reader),
                               pool_rows(sorted(claims, key=lambda c: c.claim_id), reader),
                               seed=int(order["seed_commitment"][:8], 16))
    finally:
        reader.close()
    audit["allow_text_shortcut"] = release_rules.allow_text_shortcut
    version = new_version(context.run_id)
    staging = store.release_staging(quarter, version)
    provenance = {
        "version": version,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "code_version": code_version(),
        "demo": ingestion.demo_release(),  # demo: true counts only for the bundled snapshot
        "prompt_versions": {p.stem: template_hash(p.stem) for p in sorted(PROMPTS_DIR.glob("[!_]*.j2"))},
        "models": llm.model_set(),
        "model_diversity": model_diversity(llm.model_set()),
        "llm_cost": cost_summary(llm, quarter),
        "inputs": {"rectified_claims": store.latest_version("rectified_claims", quarter),
                   "releases": {q: folder.name for q, folder in chain.items()}},
        "selection": report,
        "order": order,
        # each medium's perceptual hash, by release medium id: later quarters match their claims against this one's
        "media_phash": media_phashes(chosen, release_claims),
        # before the disagreement filter (every claim stage 6 rated), after it (the originals it kept), and the
        # released natural claims: the rewrites' re-scoring is no independent rating of the quarter's claims
        "reliability": {**({"before_filter": before} if (before := latest_json(
                            context.instance, "scored_claims", quarter, "reliability_before_filter_json")) else {}),
                        "scored": ensemble_alpha(scored),
                        "released": ensemble_alpha([c for c in chosen if c.variant == "original"])},
        "failed_answers": stage_failed_answers(context.instance, quarter),
        "shortcut_audit": audit,
        "rectification": rewrite_summary(chosen, adversarial),
        "recurring": {"mode": release_rules.recurring, "count": len(marks),
                      "share": round(len(marks) / max(len(chosen), 1), 4),
                      "claims": {str(k): v for k, v in sorted(marks.items())}, "earlier_quarters": sorted(earlier),
                      "earlier_releases": {q: release_content_id(folder) for q, folder in chain.items()},
                      "dropped": len(claims) - len(pool), **({"built_without": without} if without else {})},
        "injection_policy": claim_rules.injection_policy,
        "errata": {"left_out": len(left_out),
                   "found_in": sorted({r["release_version"] for r in errata["claims"].values()})},
    }
    manifest = write_release(staging, quarter, release_claims, files, store.media_store(), provenance, flags, marks)
    problems = validate_release(staging, release_rules.release_size, release_rules.media_share,
                                release_rules.allow_short_release)
    if problems:
        raise dg.Failure(f"release {quarter} failed the format check ({len(problems)} problems), first: {problems[0]}",
                         metadata={"problems": dg.MetadataValue.json(problems[:50])})
    final = store.publish_release(quarter, staging)
    content_id = release_content_id(final)
    stats = StageYield(len(scored_pool))
    if left_out:
        stats.drop("erratum", len(left_out))
    if len(pool) < len(claims):
        stats.drop("recurring", len(claims) - len(pool))
    stats.drop("near_duplicate", report["near_duplicates"])
    stats.drop("not_selected", len(pool) - len(chosen) - report["near_duplicates"])
    meta = stats.metadata(len(chosen))
    counts = manifest["counts"]["claim_counts"]
    if counts["intact"] == 0 and counts["compromised"] == 0:
        context.log.warning(f"release {quarter}: no balanced pair available ({report['available']}); the split has no Intact/Compromised claims")
    if note := vision_note(manifest):  # media claims rated by members that cannot see them
        context.log.warning(f"release {quarter}: {note}")
    now = {**releases, quarter: {"version": version, "content_id": content_id,
                                 "previous_release": previous[2] if previous else ""}}
    if stale_after := later_stale(now, quarter):  # built before this one (newest first): say so, and how to fix it
        context.log.warning(f"release {quarter}: {later_message(quarter, stale_after)}")
    summary = integrity_summary(manifest)
    context.log.info(f"release {quarter}: " + "; ".join(summary))
    meta.update({
        "quarter": quarter, "version": version, "path": dg.MetadataValue.path(str(final)),
        "content_id": content_id, "previous_release": previous[2] if previous else "",
        "built_without": ", ".join(without) or "none",
        **{f"claims/{k}": v for k, v in counts.items()},
        **{f"media/{k}": v for k, v in manifest["counts"]["media_counts"].items()},
        "claims/with_media": report["media_claims"], "claims/injection_flagged": sum(bool(f) for f in flags),
        "claims/recurring": len(marks), "recurring/share": provenance["recurring"]["share"],
        **alpha_metadata(provenance["reliability"]["released"]),
        "integrity_summary": "\n".join(summary),
        "selection": dg.MetadataValue.json(report),
    })
    return dg.MaterializeResult(metadata=meta, data_version=dg.DataVersion(content_id))
