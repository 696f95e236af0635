"""``veritas export``: copy quarters' releases to a folder, as they are or as one Hugging Face dataset over them all
(``--format hf``: a split per quarter, the images as ``datasets`` ``Image`` features, a Croissant file over all).

An export never deletes and never writes into the store: ``--out`` may not lie inside the store's folder or contain it,
and a folder that holds anything already is refused unless ``--force``; even then what the export would replace is
moved aside (``NAME.replaced-<time>``), never removed. It is written into a temporary folder beside ``--out`` and
moved into place only when complete: a failure (a full disk) leaves nothing behind but a one-line reason.

What the store publishes beside a release version after it (``<version>.audit.json``, the human audit's addendum,
with its ``.sha256`` and its card ``.audit.md``; ``<version>.changelog.json`` of a version built without errata) is
copied next to the quarter's folder, named after the quarter (``2025Q3.audit.json``; a ``.sha256`` names the copy, so
that ``sha256sum -c`` checks it there): the release folder itself is never changed. ``--inputs-only`` writes what a
system under test may read and nothing a label can be read from: ``<quarter>/inputs.json`` (each claim's id, text,
date, language and media) and the media files.
"""

import argparse
import hashlib
import json
import os
import secrets
import shutil
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from dagster_project.core.atomic_files import TMP_PREFIX
from dagster_project.core.store_paths import store_root


def register(subparsers) -> list[argparse.ArgumentParser]:
    p = subparsers.add_parser(
        "export", help="copy quarters' releases to a folder (--format hf: a folder `datasets` loads, a split per quarter)")
    p.add_argument("--quarter", nargs="+", action="extend", default=[],
                   help="one or more quarters, e.g. 2025Q3 2025Q4 (or --quarter 2025Q3 --quarter 2025Q4)")
    p.add_argument("--from", dest="first", help="instead of --quarter: every quarter from this one (e.g. 2020Q1) ...")
    p.add_argument("--to", dest="last", help="... to this one (default: the --from quarter)")
    p.add_argument("--out", required=True, help="a new or empty folder outside the data folder")
    p.add_argument("--format", default="veritas", choices=("veritas", "hf"),
                   help="veritas: <out>/<quarter>/ as released; hf: one dataset over all the quarters, a split "
                        "per quarter with the images as pictures: the same folders, each with its table "
                        "metadata.parquet, a card README.md (a config per quarter and one for all) and a "
                        "croissant.json over all the quarters")
    p.add_argument("--inputs-only", action="store_true",
                   help="what a system under test is given: <out>/<quarter>/inputs.json (each claim's id, text, date, "
                        "language and media) and the media files; no score, justification, label or review_url")
    p.add_argument("--force", action="store_true",
                   help="write into a folder that is not empty; a quarter folder, README.md or croissant.json "
                        "already there is kept beside it as NAME.replaced-<time>, nothing is deleted")
    p.set_defaults(handler=run)
    return [p]


def _store_config(config_path: str | None) -> dict:
    from dagster_project.core.config_file import load_config

    return load_config(config_path)["store"]


def latest_releases(config_path: str | None, quarters: list[str]) -> dict[str, Path]:
    """Each quarter's current release folder. A local store is read directly (its ``LATEST`` pointer), without
    importing Dagster; an S3 store through the store resource, which downloads the release first. A pointer that
    leads out of its quarter's folder is an error, never followed."""
    from dagster_project.core.atomic_files import pointed_folder
    from dagster_project.core.quarters import to_label

    store_config = _store_config(config_path)
    if store_config.get("kind") == "s3":
        from dagster_project.resources.store import StoreResource

        find = StoreResource(**store_config).latest_release
    else:
        releases = Path(store_config["root"]).expanduser().resolve() / "releases"

        def find(label: str) -> Path | None:
            pointer = releases / label / "LATEST"
            if not pointer.exists():
                return None
            return pointed_folder(pointer.parent, pointer.read_text(encoding="utf-8", errors="replace").strip())
    found = {}
    for quarter in quarters:
        label = to_label(quarter)
        folder = find(label)
        if folder is None:
            raise SystemExit(f"no release for {label}: run `veritas run --quarter {label}` first")
        if not (folder / "claims.json").is_file():
            raise ValueError(f"{folder}: the release LATEST names for {label} has no claims.json; "
                             f"rerun `veritas run --quarter {label}` or point LATEST at a complete version")
        found[label] = folder
    return found


def published_beside(config_path: str | None, releases: dict[str, Path]) -> dict[str, dict[str, bytes]]:
    """quarter -> file name -> bytes of what the store published beside each quarter's release version (the files
    ``<version>.*`` in its quarter's folder: the audit's addendum, its hash and card, the changelog), each checked
    against its ``.sha256`` where it has one: a file that no longer matches is an error, never exported."""
    store_config = _store_config(config_path)
    found: dict[str, dict[str, bytes]] = {}
    if store_config.get("kind") == "s3":
        from dagster_project.resources.store import StoreResource

        store = StoreResource(**store_config)
        for label, folder in releases.items():
            names = [rel.rsplit("/", 1)[1] for rel in store.list_objects(f"releases/{label}")
                     if rel.count("/") == 2 and rel.rsplit("/", 1)[1].startswith(f"{folder.name}.")]
            found[label] = {name: store.get_bytes(f"releases/{label}/{name}") for name in sorted(names)}
    else:
        for label, folder in releases.items():
            found[label] = {p.name: p.read_bytes() for p in sorted(folder.parent.iterdir())
                            if p.name.startswith(f"{folder.name}.") and p.is_file() and not p.is_symlink()}
    for label, files in found.items():
        for name, data in files.items():
            if not name.endswith(".sha256"):
                continue
            target, words = name.removesuffix(".sha256"), data.decode("utf-8", errors="replace").split()
            if target not in files or not words or hashlib.sha256(files[target]).hexdigest() != words[0]:
                raise ValueError(f"releases/{label}/{target} does not match its hash ({name}): it was damaged or "
                                 "edited after it was published; restore it from a backup (or publish it again) "
                                 "before exporting")
    return found


#: What ``inputs.json`` keeps of a claim and of each of its media: nothing a label can be read from (no score, no
#: justification, no review_url: the fact-check behind it states the verdict; no recurring id: an earlier release
#: holds that claim's label).
INPUT_FIELDS = ("id", "text", "date", "language", "media")
INPUT_MEDIA_FIELDS = ("id", "type", "file_path")


def claim_inputs(claim: dict) -> dict:
    """One claims.json record as a system under test may read it."""
    return {**{k: claim[k] for k in INPUT_FIELDS if k != "media"},
            "media": [{k: m[k] for k in INPUT_MEDIA_FIELDS} for m in claim.get("media") or []]}


def beside_copies(releases: dict[str, Path], beside: dict[str, dict[str, bytes]]) -> dict[str, bytes]:
    """What ``published_beside`` found, as the export names it next to the quarter folders: ``<version>.X`` becomes
    ``<quarter>.X`` (two quarters' versions may share a name), and a ``.sha256`` names the renamed file."""
    out = {}
    for label, files in beside.items():
        version = releases[label].name
        for name, data in files.items():
            renamed = label + name[len(version):]
            if name.endswith(".sha256"):
                data = f"{data.decode('utf-8', errors='replace').split()[0]}  {renamed.removesuffix('.sha256')}\n".encode()
            out[renamed] = data
    return out


def write_inputs(folder: Path, label: str, target: Path) -> Path:
    """A release's inputs only into ``target`` (which must not exist yet): ``inputs.json`` (quarter, release version
    and each claim's inputs, by id) and the media files it names, copied from the release folder."""
    path = folder / "claims.json"
    try:
        claims = sorted((claim_inputs(c) for c in json.loads(path.read_text(encoding="utf-8"))["claims"]),
                        key=lambda c: c["id"])
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not JSON ({err.msg} at line {err.lineno}); restore the release or rebuild it") from None
    except (KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"{path}: not a release's claims ({type(err).__name__} {err}); restore the release or "
                         "rebuild it") from None
    if target.exists() or target.is_symlink():
        raise ValueError(f"{target} exists already: an export never overwrites; choose another --out or add --force")
    root = folder.resolve()
    for medium in (m for c in claims for m in c["media"]):
        named = medium["file_path"]
        source = (folder / named).resolve() if isinstance(named, str) else None
        if source is None or not source.is_relative_to(root) or not source.is_file():
            raise ValueError(f"{path}: medium {medium['id']} names {medium['file_path']!r}, not a file of the "
                             "release; restore the release or rebuild it")
        (target / medium["file_path"]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target / medium["file_path"])
    target.mkdir(parents=True, exist_ok=True)
    payload = {"quarter": label, "release_version": folder.name, "claims": claims}
    (target / "inputs.json").write_text(json.dumps(payload, indent=1, ensure_ascii=False), encoding="utf-8")
    return target


def check_out(out: Path, root: Path, force: bool) -> None:
    """Refuse an ``--out`` that overlaps the store's folder, is a file, or (without ``force``) holds anything."""
    from dagster_project.core.store_paths import refuse_in_store

    refuse_in_store("--out", out, root, "an export is a copy outside it")
    target = Path(out).expanduser().resolve()
    if target.exists() and not target.is_dir():
        raise ValueError(f"--out {out} is a file, not a folder: choose a new or empty folder")
    if target.is_dir() and not force:
        entries = sorted(p.name for p in target.iterdir())
        if entries:
            count = f"{len(entries)} {'entry' if len(entries) == 1 else 'entries'}"
            raise ValueError(f"--out {out} is not empty ({count}, e.g. {entries[0]!r}): choose a new "
                             "or empty folder, or add --force to write into it (nothing is deleted: what the export "
                             "replaces is kept beside it as NAME.replaced-<time>)")


def set_aside(path: Path) -> Path | None:
    """Rename an existing file or folder to ``NAME.replaced-<time>`` (never delete it); the new name, or None."""
    if not path.exists() and not path.is_symlink():
        return None
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    kept, n = path.with_name(f"{path.name}.replaced-{stamp}"), 1
    while kept.exists() or kept.is_symlink():
        n += 1
        kept = path.with_name(f"{path.name}.replaced-{stamp}-{n}")
    path.rename(kept)
    print(f"[veritas] kept the earlier {path} as {kept}", file=sys.stderr)
    return kept


def copy_release(folder: Path, target: Path) -> Path:
    """A byte-for-byte copy of a release folder to ``target``, which must not exist yet."""
    if target.exists() or target.is_symlink():
        raise ValueError(f"{target} exists already: an export never overwrites; choose another --out or add --force")
    shutil.copytree(folder, target)
    return target


def write_staged(out: Path, write: Callable[[Path], object], force: bool = False) -> list[Path]:
    """``write(folder)`` into a new temporary folder beside ``out`` (inside it when it exists), then moved into place:
    renamed to ``out`` when that does not exist yet, else entry by entry into it (with ``force``, what they replace
    is set aside first).
    On any failure the temporary folder is removed and ``out`` is as it was; the error goes on. The paths written."""
    out = Path(out).expanduser()
    out.parent.mkdir(parents=True, exist_ok=True)
    beside = out if out.is_dir() else out.parent  # an existing folder (a mount point, say): on its own disk
    stage = beside / f"{TMP_PREFIX}{out.name}-{secrets.token_hex(4)}"
    stage.mkdir()
    try:
        write(stage)
        entries = sorted(stage.iterdir())
        if not out.exists():
            os.replace(stage, out)
            return [out / p.name for p in entries]
        for entry in entries:
            if force:  # only now, when the new copy is complete: the earlier one is kept beside it
                set_aside(out / entry.name)
            os.replace(entry, out / entry.name)
        stage.rmdir()
        return [out / p.name for p in entries]
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


def write_failure(out: Path, err: OSError) -> str:
    """One line for an export that could not be written (a full disk, a read-only or forbidden folder)."""
    import errno

    advice = {errno.ENOSPC: "free space on that disk or choose an --out on another one",
              errno.EDQUOT: "free space within your quota or choose an --out on another disk",
              errno.EROFS: "that file system is read-only: choose an --out on a writable one",
              errno.EACCES: "you may not write there: choose an --out you own"}
    reason, code = err.strerror or str(err), err.errno
    if isinstance(err, shutil.Error) and err.args and isinstance(err.args[0], list) and err.args[0]:
        reason = str(err.args[0][0][-1])  # copytree gathers each file's error: "[Errno 28] No space left on device"
        code = next((c for c in advice if f"[Errno {c}]" in reason), None)
        reason = os.strerror(code) if code else reason.split("] ", 1)[-1]  # not the temporary file's name
    return (f"veritas export: cannot write --out {out}: {reason}; nothing was exported (the partial copy "
            f"was removed, {out} is as it was); {advice.get(code, 'fix that and run it again')}")


def export_writer(config_path: str | None, quarters: list[str], out: Path, fmt: str = "veritas",
                  force: bool = False, inputs_only: bool = False) -> Callable[[Path], None]:
    """Everything checked and read first (``--out``, the releases, what was published beside them); then
    ``write(folder)`` writes the quarters' current releases into a folder: as released, with what was published
    beside each version next to its folder; as one Hugging Face dataset (``fmt`` hf); or their inputs only."""
    if inputs_only and fmt != "veritas":
        raise ValueError("--inputs-only writes the claims' inputs and media only: leave out --format")
    check_out(out, store_root(config_path), force)
    releases = latest_releases(config_path, quarters)
    if inputs_only:
        def write_inputs_only(stage: Path) -> None:
            for label, folder in releases.items():
                write_inputs(folder, label, stage / label)
        return write_inputs_only
    beside = published_beside(config_path, releases)

    def write(stage: Path) -> None:
        if fmt == "hf":
            from assets.release.card import export_hf

            export_hf(releases, stage, beside)
        else:
            for label, folder in releases.items():
                copy_release(folder, stage / label)
        for name, data in beside_copies(releases, beside).items():
            (stage / name).write_bytes(data)
    return write


def export_release(config_path: str | None, quarter: str, out: str, force: bool = False) -> Path:
    """One quarter's current release copied to ``<out>/<quarter>`` (what was published beside it next to it)."""
    from dagster_project.core.quarters import to_label

    write_staged(Path(out), export_writer(config_path, [quarter], Path(out), force=force), force)
    return Path(out) / to_label(quarter)


def quarters_of(args: argparse.Namespace) -> list[str]:
    """The quarters asked for: ``--quarter A B ...`` or ``--from A [--to B]`` (every quarter between, both included)."""
    from dagster_project.core.quarters import quarter_range

    if bool(args.quarter) == bool(args.first) or (args.last and not args.first):
        raise ValueError("give either --quarter Q [Q ...] or --from A [--to B]")
    return args.quarter or quarter_range(args.first, args.last or args.first)


def run(args: argparse.Namespace) -> int:
    out = Path(args.out).expanduser()
    write = export_writer(getattr(args, "config", None), quarters_of(args), out, args.format, args.force,
                          getattr(args, "inputs_only", False))
    try:
        written = write_staged(out, write, args.force)
    except OSError as err:
        print(write_failure(out, err), file=sys.stderr)
        return 2
    print(out if args.format == "hf" else "\n".join(map(str, written)))
    return 0
