"""The audit of a quarter's release: its tasks (the sample, drawn from the secret key) for Label Studio; the answers
read from Label Studio's export (``audit_annotations``); the ``release_audit`` asset, computed once every sampled claim
has ``audit_min_annotators`` annotations, published as an addendum beside the release
(``releases/<quarter>/<version>.audit.json``, its hash and its card ``.audit.md``): the release is never changed. Its
check (``audit_agreement``, not blocking) fails below ``audit_min_agreement`` and names the claims to look at. Its
errata go to the quarter's record; ``release_errata`` writes the changelog of the next version built without them."""

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import polars as pl

from assets.audit.agreement import audit, complete_annotators, public, summary_line
from assets.audit.annotations import answers_of, merge, read_export_file
from assets.audit.card import ADDENDUM_SUFFIX, audit_card
from assets.audit.errata import (
    accumulate,
    changelog,
    changelog_rel,
    errata_records,
    errata_rel,
    read_errata,
    without_errata,
)
from assets.audit.pool import audit_claims, release_claims, release_key
from assets.audit.sample import AuditClaim, draw_sample, strata_counts
from assets.audit.tasks import build_tasks, media_link
from assets.release.recurring import release_content_id
from assets.rules.release_order import order_key
from assets.stage.wiring import PARTITIONS, quarter_of_context
from dagster_project.resources.store import StoreResource, new_version
from dagster_project.stage_settings import AuditSettings
from schemas.frames import from_frame
from schemas.records import ScoredClaim

ANNOTATIONS = "audit_annotations"  # the store's table of imported answers (veritas audit import)
AUDIT_TABLE = "release_audit"  # the maintainer's per-claim record (with what the addendum leaves out)
AGREEMENT_CHECK = "audit_agreement"
# the run tags `veritas audit import` launches audit_annotations with: the export file, and whether it replaces
# the earlier imports (else every annotation it holds replaces its earlier answers, the others are kept)
EXPORT_TAG, REPLACE_TAG = "veritas/audit_export", "veritas/audit_replace"


class AuditError(ValueError):
    """The audit cannot be drawn or computed now: the message says why and what to do."""


def addendum_rel(quarter: str, version: str) -> str:
    """Where a release version's audit is published: beside the version's folder, never inside it."""
    return f"releases/{quarter}/{version}{ADDENDUM_SUFFIX}"


def release_of(store: StoreResource, quarter: str) -> tuple[Path, dict]:
    folder = store.latest_release(quarter)
    if folder is None:
        raise AuditError(f"no release for {quarter}: run `veritas run --quarter {quarter}` first")
    return folder, json.loads((folder / "manifest.json").read_text(encoding="utf-8"))


def sampled_claims(store: StoreResource, settings: AuditSettings, quarter: str) -> tuple[Path, dict, list[AuditClaim]]:
    """The quarter's current release (folder, manifest) and its sampled claims, in task order. The pool is the
    version of ``rectified_claims`` the release was built from (its manifest's ``inputs``)."""
    folder, manifest = release_of(store, quarter)
    key = order_key(store, create=False)
    if key is None:
        raise AuditError(f"no release order key ($VERITAS_RELEASE_KEY or {store.location}/secrets/"
                         "release_order.key): the sample is drawn from the key the release was built with; restore it")
    version = (manifest.get("inputs") or {}).get("rectified_claims")
    pool = from_frame(store.read_table("rectified_claims", quarter, version=version), ScoredClaim)
    claims, missing = audit_claims(release_claims(folder), pool)
    if missing:
        raise AuditError(f"{len(missing)} claims of the release of {quarter} (e.g. id {missing[0]}) are not in the "
                         f"rectified_claims version it names ({version}): the store lost that version")
    ids = draw_sample(claims, key, quarter, settings.audit_sample_size)
    by_id = {c.id: c for c in claims}
    return folder, manifest, [by_id[i] for i in ids]


def article_texts(store: StoreResource, quarter: str, review_ids: set[str]) -> dict[str, dict]:
    """review id -> {title, text} of the fact-check articles (the ensemble's evidence)."""
    if not store.has_table("articles", quarter):
        return {}
    frame = store.read_table("articles", quarter).select("review_id", "title", "text")
    return {r["review_id"]: r for r in frame.filter(pl.col("review_id").is_in(list(review_ids))).iter_rows(named=True)}


def media_linker(store: StoreResource, settings: AuditSettings, mode: str | None = None, base_url: str | None = None):
    """``link(rel, file_path)`` for the tasks' media, by ``audit_media`` (auto: local files, or presigned on S3)."""
    mode = mode or settings.audit_media
    if mode == "auto":
        mode = "presigned" if store.is_s3 else "local_files"
    base_url = settings.audit_media_url if base_url is None else base_url

    def presign(rel: str) -> str:
        key = f"{store.prefix.strip('/')}/{rel}" if store.prefix.strip("/") else rel
        return store.client().generate_presigned_url("get_object", Params={"Bucket": store.bucket, "Key": key},
                                                     ExpiresIn=settings.audit_url_expiry_s)

    def link(rel: str, _file_path: str) -> str:
        return media_link(mode, rel, base_url=base_url, local_path=store.base / rel,
                          presign=presign if store.is_s3 else None)
    return link


def audit_tasks(store: StoreResource, settings: AuditSettings, quarter: str, mode: str | None = None,
                base_url: str | None = None) -> tuple[list[dict], dict]:
    """The quarter's Label Studio tasks (the sample, in order) and what they are of (release version, counts)."""
    folder, manifest, claims = sampled_claims(store, settings, quarter)
    articles = article_texts(store, quarter, {c.review_id for c in claims})
    rel = folder.relative_to(store.base).as_posix()
    tasks = build_tasks(claims, quarter, folder.name, rel, articles, media_linker(store, settings, mode, base_url))
    return tasks, {"release_version": folder.name, "tasks": len(tasks),
                   "release_claims": manifest["counts"]["claim_counts"]["total"],
                   "without_article": sum(c.review_id not in articles for c in claims)}


def read_answers(store: StoreResource, quarter: str) -> pl.DataFrame | None:
    return store.read_table(ANNOTATIONS, quarter) if store.has_table(ANNOTATIONS, quarter) else None


def compute_audit(store: StoreResource, settings: AuditSettings, quarter: str) -> tuple[dict, list[AuditClaim], dict]:
    """The audit of the current release from the imported answers: (report, sampled claims, manifest). An
    AuditError when there are no answers for this release version, or some sampled claim has too few."""
    folder, manifest, claims = sampled_claims(store, settings, quarter)
    frame = read_answers(store, quarter)
    if frame is None:
        raise AuditError(f"no annotations for {quarter}: `veritas audit export --quarter {quarter}` makes the tasks, "
                         f"`veritas audit import FILE --quarter {quarter}` reads Label Studio's export")
    answers = answers_of(frame, folder.name)
    if not answers:
        others = sorted(set(frame["release_version"].to_list()))
        raise AuditError(f"the annotations of {quarter} are of release {', '.join(others)}, the release is now "
                         f"{folder.name}: export its tasks again (its claims have other ids)")
    report = audit(claims, answers, settings.audit_min_annotators, settings.audit_min_agreement)
    if report["short"]:
        raise AuditError(f"{len(report['short'])} of {len(claims)} sampled claims have fewer than "
                         f"{settings.audit_min_annotators} complete annotations (e.g. claim {report['short'][0]}): "
                         "the audit waits for them")
    report["sample"] = {"size": len(claims), "drawn_from": manifest["counts"]["claim_counts"]["total"],
                        "strata": strata_counts(claims)}
    return report, claims, manifest


def import_answers(store: StoreResource, settings: AuditSettings, quarter: str, path: Path,
                   replace: bool = False) -> tuple[pl.DataFrame, dict]:
    """A Label Studio export read into the quarter's answers: checked against the current release and its sample,
    merged with the earlier imports (unless ``replace``). Returns the new table and what was read: tasks, annotations,
    the sampled claims with ``audit_min_annotators`` complete annotations, those still short, ids not in the sample."""
    folder, _, claims = sampled_claims(store, settings, quarter)
    frame, read = read_export_file(path, quarter)
    versions = sorted(set(frame["release_version"].to_list()))
    if versions and versions != [folder.name]:
        raise AuditError(f"{path}: its tasks are of release {', '.join(versions)}, the release of {quarter} is now "
                         f"{folder.name}: its claims have other ids; export its tasks again and annotate those")
    sampled = {c.id for c in claims}
    outside = sorted(set(frame["claim_id"].to_list()) - sampled)
    frame = frame.filter(pl.col("claim_id").is_in(list(sampled)))
    table = frame if replace else merge(read_answers(store, quarter), frame)
    answers = answers_of(table, folder.name)
    done = [c.id for c in claims if len(complete_annotators(answers.get(c.id) or {})) >= settings.audit_min_annotators]
    return table, {**read, "release_version": folder.name, "sampled": len(claims), "complete": len(done),
                   "short": len(claims) - len(done), "not_in_sample": outside}


def addendum(report: dict, quarter: str, folder: Path, audit_version: str) -> dict:
    """The published addendum: the public part of the report, the release it audits (version, content id, the
    manifest's hash) and when."""
    sample = dict(report["sample"])
    sample["strata"] = {k: v for k, v in sample["strata"].items() if k != "variant"}
    return {
        "quarter": quarter, "audit_version": audit_version,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "release": {"version": folder.name, "content_id": release_content_id(folder),
                    "manifest_sha256": hashlib.sha256((folder / "manifest.json").read_bytes()).hexdigest()},
        "summary": summary_line(report),
        "convention": "3-bin: Compromised below -1/3, Intact above 1/3, boundaries in Unknown; the release's rounded "
                      "scores binned with the rounding's tolerance; the annotators' mean exactly",
        **public({k: v for k, v in report.items() if k != "sample"}), "sample": sample,
    }


def publish_addendum(store: StoreResource, quarter: str, version: str, payload: dict) -> tuple[str, str]:
    """The addendum and its hash (``<file>.sha256``, as sha256sum writes it) beside the release; (path, sha256)."""
    data = (json.dumps(payload, indent=2, ensure_ascii=False, sort_keys=False) + "\n").encode()
    rel = addendum_rel(quarter, version)
    digest = hashlib.sha256(data).hexdigest()
    store.put_bytes(rel, data, "application/json")
    store.put_bytes(rel + ".sha256", f"{digest}  {Path(rel).name}\n".encode(), "text/plain")
    return rel, digest


def claim_rows(report: dict, claims: list[AuditClaim], version: str) -> pl.DataFrame:
    """The maintainer's per-claim record: strata (the variant too), the release's label and the annotators'."""
    disputed = {d["claim_id"]: d for d in report["disputed"]}
    rows = [{"release_version": version, "claim_id": c.id, "variant": c.variant, "media_kind": c.media_kind,
             "language": c.language, "release_label": c.label,
             "annotators_label": disputed[c.id]["annotators_label"] if c.id in disputed else c.label,
             "disputed": c.id in disputed, "erratum": c.id in report["errata"]} for c in claims]
    return pl.DataFrame(rows, schema={"release_version": pl.Utf8, "claim_id": pl.Int64, "variant": pl.Utf8,
                                      "media_kind": pl.Utf8, "language": pl.Utf8, "release_label": pl.Utf8,
                                      "annotators_label": pl.Utf8, "disputed": pl.Boolean, "erratum": pl.Boolean},
                        orient="row")


def check_result(report: dict) -> dg.AssetCheckResult:
    """Below ``audit_min_agreement``: failed (a warning, never blocking), with the claims to look at."""
    overall = report["overall"]
    note = (f"3-bin agreement {overall['agreement3']:.0%} (95% {overall['agreement3_ci']}) on {overall['n']} claims, "
            f"the gate is {report['min_agreement']:.0%}")
    if not report["passed"]:
        note += f"; look at claims {', '.join(map(str, [d['claim_id'] for d in report['disputed']][:20]))}"
    return dg.AssetCheckResult(
        check_name=AGREEMENT_CHECK, passed=report["passed"], severity=dg.AssetCheckSeverity.WARN,
        metadata={"agreement3": overall["agreement3"], "min_agreement": report["min_agreement"], "mse": overall["mse"],
                  "claims_to_look_at": dg.MetadataValue.json([d["claim_id"] for d in report["disputed"]]),
                  "errata": dg.MetadataValue.json(report["errata"]), "note": note})


@dg.asset(
    partitions_def=PARTITIONS, group_name="audit", deps=["release"], kinds={"python", "parquet"},
    description="The annotators' answers on the quarter's audit tasks, read from a Label Studio export by `veritas "
                "audit import FILE --quarter Q` (the run tag veritas/audit_export names the file).",
)
def audit_annotations(context: dg.AssetExecutionContext, audit: AuditSettings,
                      store: StoreResource) -> dg.MaterializeResult:
    quarter = quarter_of_context(context)
    path = context.run.tags.get(EXPORT_TAG)
    if not path:
        raise dg.Failure(f"audit_annotations reads a Label Studio export: run `veritas audit import FILE --quarter "
                         f"{quarter}` (it launches this asset with the tag {EXPORT_TAG})")
    try:
        table, read = import_answers(store, audit, quarter, Path(path), context.run.tags.get(REPLACE_TAG) == "true")
    except (AuditError, ValueError, FileNotFoundError) as err:
        raise dg.Failure(str(err)) from None
    version = store.write_table(ANNOTATIONS, quarter, table, context.run_id)
    store.put_bytes(f"audit/{quarter}/imports/{version}.json", Path(path).read_bytes(), "application/json")
    if read["not_in_sample"]:
        context.log.warning(f"audit_annotations {quarter}: {len(read['not_in_sample'])} tasks are not in the sample "
                            f"(e.g. claim {read['not_in_sample'][0]}): left out")
    context.log.info(f"audit_annotations {quarter}: {read['complete']} of {read['sampled']} sampled claims have "
                     f"{audit.audit_min_annotators} complete annotations")
    return dg.MaterializeResult(metadata={
        "quarter": quarter, "release_version": read["release_version"], "dagster/row_count": table.height,
        "tasks_read": read["tasks"], "annotations_read": read["annotations"], "cancelled": read["cancelled"],
        "sampled": read["sampled"], "complete": read["complete"], "short": read["short"],
        "not_in_sample": len(read["not_in_sample"]), "export_file": str(path),
    })


@dg.asset(
    partitions_def=PARTITIONS, group_name="audit", deps=["release", "audit_annotations"], kinds={"python", "json"},
    description="People's agreement with the quarter's release labels (a Label Studio audit of a secret stratified "
                "sample), published beside the release as <version>.audit.json with its hash.",
    check_specs=[dg.AssetCheckSpec(AGREEMENT_CHECK, asset="release_audit", blocking=False,
                                   description="The annotators' mean integrity and the release agree on at least "
                                               "audit_min_agreement of the audited claims' 3-bin labels (WARN).")],
)
def release_audit(context: dg.AssetExecutionContext, audit: AuditSettings, store: StoreResource) -> dg.MaterializeResult:
    quarter = quarter_of_context(context)
    try:
        report, claims, _ = compute_audit(store, audit, quarter)
    except AuditError as err:
        raise dg.Failure(str(err)) from None
    folder = store.latest_release(quarter)
    version = new_version(context.run_id)
    published = addendum(report, quarter, folder, version)
    rel, digest = publish_addendum(store, quarter, folder.name, published)
    store.put_bytes(rel.removesuffix(".json") + ".md", audit_card(published).encode(), "text/markdown")
    errata = accumulate(read_errata(store.get_bytes, quarter), errata_records(report, claims, folder.name, version))
    store.put_bytes(errata_rel(quarter), json.dumps(errata, indent=1, ensure_ascii=False).encode(), "application/json")
    store.write_table(AUDIT_TABLE, quarter, claim_rows(report, claims, folder.name),
                      context.run_id)
    overall = report["overall"]
    context.log.info(f"release_audit {quarter}: {summary_line(report)}; addendum {rel}")
    return dg.MaterializeResult(
        metadata={
            "quarter": quarter, "release_version": folder.name, "addendum": dg.MetadataValue.path(str(store.base / rel)),
            "addendum_sha256": digest, "summary": summary_line(report),
            "claims": report["claims"], "annotators": report["annotators"], "annotations": report["annotations"],
            "agreement3": overall["agreement3"], "mse": overall["mse"],
            "alpha_annotators": overall["alpha_annotators"] if overall["alpha_annotators"] is not None else "n/a",
            "alpha_with_ensemble": overall["alpha_with_ensemble"] if overall["alpha_with_ensemble"] is not None else "n/a",
            "disputed": len(report["disputed"]), "errata": dg.MetadataValue.json(report["errata"]),
            "errata_in_record": len(errata["claims"]),
            "report": dg.MetadataValue.json(report),  # the whole report, the rectified/natural breakdown too
        },
        check_results=[check_result(report)],
        data_version=dg.DataVersion(digest[:16]),
    )
def errata_changelog(store: StoreResource, quarter: str) -> tuple[dict, Path]:
    """The changelog from the release version the latest errata were found in to the current one, checked: the
    current version is another, and holds none of the errata's claims (nor their other variants)."""
    errata = read_errata(store.get_bytes, quarter)
    if not errata["claims"]:
        raise AuditError(f"no errata for {quarter}: its audits found no claim that every annotator labels otherwise")
    folder, manifest = release_of(store, quarter)
    found_in = max(r["release_version"] for r in errata["claims"].values())
    if folder.name == found_in:
        raise AuditError(f"the release of {quarter} is still {found_in}, where the errata were found: build the next "
                         f"version (`veritas audit errata --quarter {quarter}` runs the release first)")
    pool = from_frame(store.read_table("rectified_claims", quarter,
                                       version=(manifest.get("inputs") or {}).get("rectified_claims")), ScoredClaim)
    _, excluded = without_errata(pool, errata)
    held, _ = audit_claims(release_claims(folder), pool)
    still = sorted(c.id for c in held if c.claim_id in set(excluded))
    if still:
        raise AuditError(f"the release {folder.name} still holds {len(still)} erratum claims (e.g. id {still[0]}): "
                         "the release asset leaves the errata out of its pool with assets.audit.errata.without_errata")
    return changelog(store.release_folder(quarter, found_in), folder, errata, release_key), folder


@dg.asset(
    partitions_def=PARTITIONS, group_name="audit", deps=["release"], kinds={"python", "json"},
    description="The changelog of a release version built without the errata of an earlier version's audit "
                "(<version>.changelog.json beside it); the earlier version stays as it was.",
)
def release_errata(context: dg.AssetExecutionContext, store: StoreResource) -> dg.MaterializeResult:
    quarter = quarter_of_context(context)
    try:
        log, folder = errata_changelog(store, quarter)
    except AuditError as err:
        raise dg.Failure(str(err)) from None
    rel = changelog_rel(quarter, folder.name)
    data = (json.dumps(log, indent=2, ensure_ascii=False) + "\n").encode()
    digest = hashlib.sha256(data).hexdigest()
    store.put_bytes(rel, data, "application/json")
    store.put_bytes(rel + ".sha256", f"{digest}  {Path(rel).name}\n".encode(), "text/plain")
    context.log.info(f"release_errata {quarter}: {folder.name} leaves out {len(log['errata_applied'])} errata of "
                     f"{log['previous_version']}; {len(log['removed'])} claims removed, {len(log['added'])} added")
    return dg.MaterializeResult(metadata={
        "quarter": quarter, "version": folder.name, "previous_version": log["previous_version"],
        "changelog": dg.MetadataValue.path(str(store.base / rel)), "changelog_sha256": digest,
        "errata_applied": len(log["errata_applied"]), "removed": len(log["removed"]), "added": len(log["added"]),
        "kept": log["kept"],
    })


AUDIT_ASSETS = [audit_annotations, release_audit, release_errata]  # not in the quarter's jobs: they wait for people
