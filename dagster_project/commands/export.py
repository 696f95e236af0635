"""``veritas export``: copy quarters' releases to a folder, as they are or as a Hugging Face dataset folder."""

import argparse
import shutil
from pathlib import Path


def register(subparsers) -> list[argparse.ArgumentParser]:
    p = subparsers.add_parser(
        "export", help="copy quarters' releases to a folder (--format hf: a folder `datasets` loads, a split per quarter)")
    p.add_argument("--quarter", required=True, nargs="+", help="one or more quarters, e.g. 2025Q3 2025Q4")
    p.add_argument("--out", required=True)
    p.add_argument("--format", default="veritas", choices=("veritas", "hf"),
                   help="veritas: <out>/<quarter>/ as released; hf: the same plus a dataset card README.md whose "
                        "configs give one split per quarter")
    p.set_defaults(handler=run)
    return [p]


def latest_releases(config_path: str | None, quarters: list[str]) -> dict[str, Path]:
    """Each quarter's current release folder. A local store is read directly (its ``LATEST`` pointer), without
    importing Dagster; an S3 store through the store resource, which downloads the release first."""
    from dagster_project.quarters import to_label
    from dagster_project.settings import load_config

    store_config = load_config(config_path)["store"]
    if store_config.get("kind") == "s3":
        from dagster_project.resources.store import StoreResource

        find = StoreResource(**store_config).latest_release
    else:
        releases = Path(store_config["root"]).expanduser().resolve() / "releases"

        def find(label: str) -> Path | None:
            pointer = releases / label / "LATEST"
            return releases / label / pointer.read_text().strip() if pointer.exists() else None
    found = {}
    for quarter in quarters:
        label = to_label(quarter)
        folder = find(label)
        if folder is None:
            raise SystemExit(f"no release for {label}: run `veritas run --quarter {label}` first")
        found[label] = folder
    return found


def copy_release(folder: Path, target: Path) -> Path:
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(folder, target)
    return target


def export_release(config_path: str | None, quarter: str, out: str) -> Path:
    """One quarter's current release copied to ``<out>/<quarter>``."""
    (label, folder), = latest_releases(config_path, [quarter]).items()
    return copy_release(folder, Path(out) / label)


def run(args: argparse.Namespace) -> int:
    releases = latest_releases(getattr(args, "config", None), args.quarter)
    out = Path(args.out)
    if args.format == "hf":
        from assets.release.card import export_hf

        print(export_hf(releases, out))
        return 0
    for label, folder in releases.items():
        print(copy_release(folder, out / label))
    return 0
