"""``veritas run``: materialize the pipeline for one quarter in process (``dagster_project.quarter_run``), up to a
stage if asked; SIGINT/SIGTERM stop it within seconds."""

import argparse
import sys


def register(subparsers) -> list[argparse.ArgumentParser]:
    p = subparsers.add_parser("run", help="materialize the pipeline for one quarter")
    p.add_argument("--quarter", required=True, help="e.g. 2025Q4 (or the Dagster key 2025-10)")
    p.add_argument("--until", help="stop after this asset")
    p.set_defaults(handler=run)
    return [p]


def run(args: argparse.Namespace) -> int:
    from dagster_project.core.store_paths import FULL, storage_failure
    from dagster_project.quarter_run import run_quarter, run_stoppable

    try:
        return run_stoppable("run", lambda: 0 if run_quarter(args.config, args.quarter, args.until) else 1)
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
