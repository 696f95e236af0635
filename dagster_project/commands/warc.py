"""``veritas warc pull|push``: move the web archive between this machine and an S3 store's ``warc/`` prefix.

Live runs on an S3 store mirror their WARC files to the bucket after each stage; a machine that replays them
(``web: {mode: replay}``) first pulls them, since replay reads local files.
"""

import argparse
import sys
from pathlib import Path


def register(subparsers) -> list[argparse.ArgumentParser]:
    p = subparsers.add_parser(
        "warc",
        help="pull the S3 store's WARC archive to this machine (for replay), or push local WARCs to it",
        description="Needs store: {kind: s3} in the config. 'pull' downloads every WARC under the bucket's warc/ "
                    "that is missing here or of another size; 'push' uploads new or grown local WARCs. The index "
                    "files kept beside WARCs stay local.",
    )
    p.add_argument("action", choices=("pull", "push"))
    p.add_argument("--dir", help="the local WARC folder (default: web.archive_dir of the config)")
    p.set_defaults(handler=run)
    return [p]


def run(args: argparse.Namespace) -> int:
    from dagster_project.config import load_config
    from dagster_project.resources.store import StoreResource
    from dagster_project.resources.web import WARC_SUFFIXES

    try:
        config = load_config(getattr(args, "config", None))
    except (FileNotFoundError, ValueError) as err:
        print(f"veritas: {err}", file=sys.stderr)
        return 2
    if config["store"].get("kind") != "s3":
        print("veritas warc: the config's store is local; there is no bucket to pull from or push to", file=sys.stderr)
        return 2
    folder = Path(args.dir or config["web"]["archive_dir"]).expanduser().resolve()
    store = StoreResource(**{**config["store"], "warc_dir": str(folder)})
    try:
        if args.action == "pull":
            count = store.pull_dir("warc", folder)
            total = sum(1 for p in folder.glob("*.warc*") if p.name.endswith(WARC_SUFFIXES)) if folder.exists() else 0
            print(f"pulled {count} WARC file(s) from {store.location}/warc into {folder} ({total} there now); "
                  f"replay them with web: {{mode: replay, warc_paths: [{folder}]}}")
        else:
            count = store.sync_warc()
            print(f"pushed {count} WARC file(s) from {folder} to {store.location}/warc")
    except Exception as err:  # noqa: BLE001 - boto3 raises many kinds (credentials, endpoint, bucket): say which
        print(f"veritas warc {args.action}: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    return 0
