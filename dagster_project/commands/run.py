"""``veritas run``: materialize the pipeline for one quarter in process (``dagster_project.quarter_run``), up to a
stage if asked; SIGINT/SIGTERM stop it within seconds. A run that builds the release refuses, before anything runs,
while an earlier quarter's release is missing or stale (``--allow-missing-earlier`` builds it without them), and
says so when the release it built leaves later releases stale."""

import argparse
import sys


def register(subparsers) -> list[argparse.ArgumentParser]:
    p = subparsers.add_parser("run", help="materialize the pipeline for one quarter")
    p.add_argument("--quarter", required=True, help="e.g. 2025Q4 (or the Dagster key 2025-10)")
    p.add_argument("--until", help="stop after this asset")
    p.add_argument("--allow-missing-earlier", action="store_true",
                   help="build the release although an earlier quarter's release is missing or stale (it then "
                        "marks no claim recurring from that quarter, and its manifest and card say so)")
    p.set_defaults(handler=run)
    return [p]


def run(args: argparse.Namespace) -> int:
    from dagster_project.core.config_file import log_level
    from dagster_project.core.store_paths import FULL, storage_failure
    from dagster_project.quarter_run import (
        earlier_refusal,
        releases_in,
        run_quarter,
        run_stoppable,
        stale_later,
    )

    log_level("INFO")  # a bogus $VERITAS_LOG_LEVEL is one line before anything else is looked at
    try:
        builds = releases_in(args.until)
        if builds and not args.allow_missing_earlier and (refusal := earlier_refusal(args.config, args.quarter)):
            print(f"veritas run: {refusal}", file=sys.stderr)
            return 2
        code = run_stoppable("run", lambda: 0 if run_quarter(args.config, args.quarter, args.until,
                                                             args.allow_missing_earlier) else 1)
        if code == 0 and builds and (notice := stale_later(args.config, args.quarter)):
            print(f"veritas run: {notice}", file=sys.stderr)
        return code
    except Exception as err:  # a full or read-only disk under the data dir: one line, not a storage traceback
        kind = storage_failure(err)
        if not kind:
            raise
        from dagster_project.core.config_file import load_config

        data_dir = load_config(args.config)["data_dir"]
        first = str(getattr(err, "orig", None) or err).splitlines()[0][:200]
        if kind == FULL:
            print(f"veritas run: the disk under the data dir {data_dir} is full ({first}); free space there (or set "
                  "data_dir in the config to a folder on a larger disk) and run the quarter again", file=sys.stderr)
        else:
            print(f"veritas run: the data dir {data_dir} is on a read-only file system ({first}); `veritas run` "
                  "writes the store, the Dagster instance and the LLM cache there: set data_dir in the config to a "
                  "folder on a writable disk (file permissions cannot change a read-only mount)", file=sys.stderr)
        return 2
