"""``veritas audit``: people check a quarter's labels in Label Studio.

``veritas audit export --quarter Q --out DIR`` writes Label Studio's import file (``tasks.json``: the quarter's
secret stratified sample, judged blind), the labelling config (``labelling_config.xml``) and the annotator guide
(``instructions.html``) into DIR, which may not lie in the store. ``veritas audit import FILE --quarter Q`` reads a
Label Studio JSON export through the pipeline (the ``audit_annotations`` asset) and, once every sampled claim has
``stages.audit_min_annotators`` annotations, materializes ``release_audit``: the addendum beside the release and its
agreement check. Any Label Studio instance will do, a hosted one too (``--media inline`` puts the media in the file).
With a server (``stages.label_studio_url``), ``veritas audit push`` creates or updates the quarter's project and adds
the tasks it lacks, and ``veritas audit pull`` reads its export back the same way as ``import``.
"""

import argparse
import json
import sys
from pathlib import Path

README = """Label Studio import for the audit of {quarter} (release {version}): {tasks} tasks.

1. Create a project; Settings > Labeling Interface > Code: paste labelling_config.xml.
2. Settings > Instructions: paste instructions.html, and tick "show before labeling".
3. Import tasks.json (never a prediction: the annotators judge blind).
{media}
4. Have every task annotated by at least {min_annotators} people, export the project as JSON, then run
   veritas audit import <export.json> --quarter {quarter}
"""
MEDIA_HELP = {
    "local_files": ("   The media are served by Label Studio's local-files serving: start it with "
                    "LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED=true and LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT={root}, "
                    "and add a Local storage to the project with the path {folder} (no need to sync it)."),
    "url": "   The media are loaded from {base}: serve the store's folder {root} there.",
    "presigned": "   The media are S3 presigned URLs, valid for {expiry} s: import the tasks before they expire.",
    "inline": "   The media are inside tasks.json (data: URIs): nothing else to serve.",
}


def register(subparsers) -> list[argparse.ArgumentParser]:
    p = subparsers.add_parser("audit", help="people check a quarter's labels: Label Studio tasks out (export), "
                                            "annotations in (import), the audit beside the release")
    sub = p.add_subparsers(dest="audit_command", required=True)
    ex = sub.add_parser("export", help="write Label Studio's import file, labelling config and guide for a quarter")
    ex.add_argument("--quarter", required=True, help="the quarter, e.g. 2025Q3")
    ex.add_argument("--out", required=True, help="a new or empty folder outside the data folder")
    ex.add_argument("--media", choices=("auto", "local_files", "url", "presigned", "inline"),
                    help="how the annotator's browser gets the media (default: stages.audit_media)")
    ex.add_argument("--media-url", help="--media url: where the store's folder is served (default: "
                                        "stages.audit_media_url)")
    ex.add_argument("--force", action="store_true", help="write into a folder that is not empty (what the export "
                                                         "replaces is kept beside it as NAME.replaced-<time>)")
    ex.set_defaults(handler=run_export)
    im = sub.add_parser("import", help="read a Label Studio JSON export of a quarter's audit tasks; compute the audit "
                                       "once every sampled claim has enough annotations")
    im.add_argument("file", help="the project's export, in Label Studio's JSON format")
    im.add_argument("--quarter", required=True, help="the quarter the tasks are of")
    im.add_argument("--replace", action="store_true", help="the file replaces every earlier import of the quarter "
                                                           "(default: its annotations replace theirs, others stay)")
    im.add_argument("--no-audit", action="store_true", help="only read the annotations; compute the audit later")
    im.set_defaults(handler=run_import)
    push = sub.add_parser("push", help="create or update the quarter's Label Studio project (stages.label_studio_url) "
                                       "and add the tasks it lacks")
    push.add_argument("--quarter", required=True, help="the quarter, e.g. 2025Q3")
    push.set_defaults(handler=run_push)
    pull = sub.add_parser("pull", help="read the quarter's Label Studio project back (as `veritas audit import` "
                                       "reads its export)")
    pull.add_argument("--quarter", required=True, help="the quarter, e.g. 2025Q3")
    pull.add_argument("--no-audit", action="store_true", help="only read the annotations; compute the audit later")
    pull.set_defaults(handler=run_pull)
    errata = sub.add_parser("errata", help="build the quarter's next release version without the errata its audit "
                                           "found (replaced from the pool), with a changelog; the old version stays")
    errata.add_argument("--quarter", required=True, help="the quarter, e.g. 2025Q3")
    errata.set_defaults(handler=run_errata)
    return [ex, im, push, pull, errata]


def _settings(config: dict):
    from dagster_project.resources.store import StoreResource
    from dagster_project.stage_settings import stage_settings

    return StoreResource(**config["store"]), stage_settings(config["stages"])["audit"]


def export_files(config_path: str | None, quarter: str, out: Path, media: str | None = None,
                 media_url: str | None = None, force: bool = False) -> dict:
    """The quarter's tasks, labelling config, guide and a README into ``out`` (staged, then moved into place)."""
    from assets.audit.asset import audit_tasks
    from assets.audit.labelling import instructions_html, labelling_config
    from dagster_project.commands.export import check_out, write_staged
    from dagster_project.config import load_config
    from dagster_project.core.quarters import to_label
    from dagster_project.core.store_paths import store_root

    quarter = to_label(quarter)
    check_out(out, store_root(config_path), force)  # only the pipeline writes into the store
    store, settings = _settings(load_config(config_path))
    tasks, info = audit_tasks(store, settings, quarter, media, media_url)
    mode = media or settings.audit_media
    mode = ("presigned" if store.is_s3 else "local_files") if mode == "auto" else mode
    folder = store.latest_release(quarter)
    readme = README.format(quarter=quarter, version=info["release_version"], tasks=len(tasks),
                           min_annotators=settings.audit_min_annotators,
                           media=MEDIA_HELP[mode].format(root=store.base, folder=folder, expiry=settings.audit_url_expiry_s,
                                                         base=media_url or settings.audit_media_url))

    def write(stage: Path) -> None:
        (stage / "tasks.json").write_text(json.dumps(tasks, indent=1, ensure_ascii=False), encoding="utf-8")
        (stage / "labelling_config.xml").write_text(labelling_config(), encoding="utf-8")
        (stage / "instructions.html").write_text(instructions_html(), encoding="utf-8")
        (stage / "README.txt").write_text(readme, encoding="utf-8")

    write_staged(out, write, force)
    return {**info, "quarter": quarter, "out": str(out), "media": mode}


def run_export(args: argparse.Namespace) -> int:
    from assets.audit.asset import AuditError

    try:
        info = export_files(getattr(args, "config", None), args.quarter, Path(args.out).expanduser(), args.media,
                            args.media_url, args.force)
    except AuditError as err:
        raise ValueError(str(err)) from None
    print(f"[veritas] audit {info['quarter']}: {info['tasks']} tasks of release {info['release_version']} "
          f"({info['release_claims']} claims), media {info['media']} -> {info['out']}")
    if info["without_article"]:
        print(f"[veritas] audit {info['quarter']}: {info['without_article']} tasks show no article (the store has "
              "none for their review): the annotators open it from its address", file=sys.stderr)
    return 0


def materialize(config_path: str | None, quarter: str, *assets: str, tags: dict | None = None):
    """Audit assets (and the release, for the errata) for one quarter on the project's instance, with their checks:
    the pipeline's only way into the store."""
    import dagster as dg

    from assets.audit.asset import AUDIT_ASSETS
    from dagster_project.checks import CHECKS
    from dagster_project.config import load_config
    from dagster_project.core.instance import project_instance
    from dagster_project.definitions import ALL_ASSETS, build_resources
    from dagster_project.partitions import to_key

    config = load_config(config_path)
    return dg.materialize([*ALL_ASSETS, *AUDIT_ASSETS, *CHECKS], selection=list(assets), partition_key=to_key(quarter),
                          resources=build_resources(config), instance=project_instance(config),
                          tags={"veritas/quarter": quarter, **(tags or {})}, raise_on_error=False)


def _metadata(result, asset: str) -> dict:
    events = [e for e in result.get_asset_materialization_events() if e.asset_key.path[-1] == asset]
    if not events:
        return {}
    return {k: v.value for k, v in events[-1].step_materialization_data.materialization.metadata.items()}


def _failure(result) -> str:
    from dagster_project.quarter_run import failure_reason

    return failure_reason(result)


def import_export(config_path: str | None, quarter: str, path: Path, replace: bool = False,
                  compute: bool = True) -> dict:
    """Read ``path`` through ``audit_annotations``; then, when every sampled claim has its annotations and
    ``compute``, ``release_audit``. What each gave (``annotations``, ``audit``: metadata; ``failed``: the reason)."""
    from assets.audit.asset import EXPORT_TAG, REPLACE_TAG
    from dagster_project.core.quarters import to_label

    quarter = to_label(quarter)
    path = Path(path).expanduser().resolve()
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file (export the Label Studio project as JSON)")
    result = materialize(config_path, quarter, "audit_annotations",
                         tags={EXPORT_TAG: str(path), REPLACE_TAG: "true" if replace else "false"})
    if not result.success:
        return {"quarter": quarter, "failed": _failure(result)}
    read = _metadata(result, "audit_annotations")
    out = {"quarter": quarter, "annotations": read}
    if compute and read.get("short") == 0:
        done = materialize(config_path, quarter, "release_audit")
        if not done.success:
            return {**out, "failed": _failure(done)}
        checks = done.get_asset_check_evaluations()
        out["audit"] = _metadata(done, "release_audit")
        out["check_passed"] = all(c.passed for c in checks) if checks else None
    return out


def run_import(args: argparse.Namespace) -> int:
    got = import_export(getattr(args, "config", None), args.quarter, Path(args.file), args.replace, not args.no_audit)
    return _report_import(got, args.no_audit)


def _report_import(got: dict, no_audit: bool) -> int:
    quarter = got["quarter"]
    if "annotations" in got:
        a = got["annotations"]
        print(f"[veritas] audit {quarter}: read {a.get('annotations_read')} annotations of {a.get('tasks_read')} tasks; "
              f"{a.get('complete')} of {a.get('sampled')} sampled claims have enough annotations")
    if got.get("failed"):
        print(f"veritas: audit {quarter}: {got['failed']}", file=sys.stderr)
        return 1
    if "audit" in got:
        meta = got["audit"]
        print(f"[veritas] audit {quarter}: {meta['summary']}")
        print(f"[veritas] audit {quarter}: addendum {meta['addendum']} (sha256 {meta['addendum_sha256']})")
        if got.get("check_passed") is False:
            print(f"[veritas] audit {quarter}: WARN agreement below stages.audit_min_agreement; claims to look at: "
                  f"{', '.join(map(str, meta.get('errata') or [])) or 'see the disputed claims in the addendum'}")
    elif not no_audit:
        print(f"[veritas] audit {quarter}: the audit waits until every sampled claim has its annotations")
    return 0

def push(config_path: str | None, quarter: str) -> dict:
    """The quarter's project on the configured server: created or updated, its media served from the store (a Local
    storage on the release's folder, with local-files media), the tasks it lacks added."""
    from assets.audit.asset import audit_tasks
    from assets.audit.label_studio import connect, ensure_local_storage, ensure_project, push_tasks
    from assets.audit.labelling import instructions_html, labelling_config
    from dagster_project.config import load_config
    from dagster_project.core.quarters import to_label

    quarter = to_label(quarter)
    store, settings = _settings(load_config(config_path))
    client = connect(settings.label_studio_url, settings.label_studio_token_env)
    tasks, info = audit_tasks(store, settings, quarter)
    project, created = ensure_project(client, quarter, labelling_config(), instructions_html())
    mode = ("presigned" if store.is_s3 else "local_files") if settings.audit_media == "auto" else settings.audit_media
    if mode == "local_files":
        ensure_local_storage(client, project, str(store.latest_release(quarter)))
    return {**info, **push_tasks(client, project, tasks), "quarter": quarter, "project": project, "created": created}


def pull(config_path: str | None, quarter: str, compute: bool = True) -> dict:
    """The project's export of the current release's tasks, read through the pipeline as ``veritas audit import``."""
    import tempfile

    from assets.audit.label_studio import TITLE, connect, pull_export
    from dagster_project.config import load_config
    from dagster_project.core.quarters import to_label

    quarter = to_label(quarter)
    store, settings = _settings(load_config(config_path))
    client = connect(settings.label_studio_url, settings.label_studio_token_env)
    found = [p for p in client.projects.list() if p.title == TITLE.format(quarter=quarter)]
    if not found:
        raise ValueError(f"no project {TITLE.format(quarter=quarter)!r} on {settings.label_studio_url}: "
                         f"`veritas audit push --quarter {quarter}` first")
    folder = store.latest_release(quarter)
    tasks, left_out = pull_export(client, found[0].id, folder.name)
    with tempfile.TemporaryDirectory(prefix="veritas-audit-") as scratch:  # outside the store: the pipeline reads it
        path = Path(scratch) / f"label-studio-{quarter}.json"
        path.write_text(json.dumps(tasks, ensure_ascii=False), encoding="utf-8")
        got = import_export(config_path, quarter, path, compute=compute)
    return {**got, "project": found[0].id, "other_versions": left_out}


def run_push(args: argparse.Namespace) -> int:
    got = push(getattr(args, "config", None), args.quarter)
    print(f"[veritas] audit {got['quarter']}: project {got['project']} ({'created' if got['created'] else 'updated'}): "
          f"{got['added']} tasks added, {got['present']} there already"
          + (f", {got['other_versions']} of an earlier release version" if got["other_versions"] else ""))
    return 0


def run_pull(args: argparse.Namespace) -> int:
    got = pull(getattr(args, "config", None), args.quarter, not args.no_audit)
    return _report_import(got, args.no_audit)


def errata(config_path: str | None, quarter: str) -> dict:
    """The release rebuilt (its pool without the errata and their other variants, so the selection replaces them),
    then ``release_errata``'s changelog; the version the errata were found in stays in the store."""
    from dagster_project.core.quarters import to_label

    quarter = to_label(quarter)
    result = materialize(config_path, quarter, "release", "release_errata")
    if not result.success:
        return {"quarter": quarter, "failed": _failure(result)}
    return {"quarter": quarter, **_metadata(result, "release_errata")}


def run_errata(args: argparse.Namespace) -> int:
    got = errata(getattr(args, "config", None), args.quarter)
    if got.get("failed"):
        print(f"veritas: audit errata {got['quarter']}: {got['failed']}", file=sys.stderr)
        return 1
    print(f"[veritas] audit errata {got['quarter']}: release {got['version']} leaves out the {got['errata_applied']} "
          f"errata of {got['previous_version']} ({got['removed']} claims removed, {got['added']} added from the pool); "
          f"changelog {got['changelog']}")
    return 0
