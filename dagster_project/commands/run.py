"""``veritas run``: materialize the pipeline for one quarter in process (``dagster_project.quarter_run``), up to a
stage if asked; SIGINT/SIGTERM stop it within seconds."""

import argparse


def register(subparsers) -> list[argparse.ArgumentParser]:
    p = subparsers.add_parser("run", help="materialize the pipeline for one quarter")
    p.add_argument("--quarter", required=True, help="e.g. 2025Q4 (or the Dagster key 2025-10)")
    p.add_argument("--until", help="stop after this asset")
    p.set_defaults(handler=run)
    return [p]


def run(args: argparse.Namespace) -> int:
    from dagster_project.quarter_run import run_quarter, run_stoppable

    return run_stoppable("run", lambda: 0 if run_quarter(args.config, args.quarter, args.until) else 1)
