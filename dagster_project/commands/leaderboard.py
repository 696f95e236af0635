"""``veritas leaderboard``: rank the registered systems on a window of quarters (text, JSON, a self-contained page)."""

import argparse
import json
import sys
from pathlib import Path


def register(subparsers) -> list[argparse.ArgumentParser]:
    p = subparsers.add_parser(
        "leaderboard",
        help="rank the systems of systems/ by integrity MSE over a window of quarters (optionally after each cut-off)",
        description="Reads the latest `leaderboard` materialization (per-claim rows and the registry) and recomputes "
                    "the board for the window: per system MSE, MAE, 3-bin and 7-bin accuracy, claims, the flagged "
                    "share of the contamination check, and bootstrap intervals. --materialize refreshes the asset "
                    "first from every quarter's predictions.",
    )
    p.add_argument("--from", dest="first", default="", help="first quarter of the window (default: the first released)")
    p.add_argument("--to", dest="last", default="", help="last quarter of the window (default: the last released)")
    p.add_argument("--after-cutoff", action="store_true",
                   help="rank on the quarters that start after each system's knowledge cut-off only (clean)")
    p.add_argument("--html", metavar="FILE", help="also write the self-contained page here")
    p.add_argument("--json", action="store_true", help="print the board as JSON instead of the table")
    p.add_argument("--materialize", action="store_true",
                   help="materialize the leaderboard asset first (in process, recorded in the Dagster instance)")
    p.set_defaults(handler=run)
    return [p]


def materialize(config: dict) -> bool:
    """The leaderboard asset, in process, on the instance `veritas run` uses."""
    import dagster as dg

    from dagster_project.core.instance import project_instance
    from dagster_project.definitions import BOARD_ASSETS, build_resources

    resources = build_resources(config)
    result = dg.materialize(BOARD_ASSETS, resources={k: resources[k] for k in ("store", "board")},
                            instance=project_instance(config), raise_on_error=False)
    return result.success


def run(args: argparse.Namespace) -> int:
    from assets.evaluation.leaderboard import compute_board, load_inputs, text_ranking
    from assets.evaluation.leaderboard_page import render_page
    from dagster_project.config import load_config
    from dagster_project.partitions import to_label
    from dagster_project.resources.store import StoreResource
    from dagster_project.stage_settings import stage_settings

    config = load_config(getattr(args, "config", None))
    try:
        first, last = (to_label(q) if q else "" for q in (args.first, args.last))
    except ValueError as err:
        print(f"veritas leaderboard: {err}", file=sys.stderr)
        return 2
    if args.materialize and not materialize(config):
        print("veritas leaderboard: the leaderboard asset failed (see the log above)", file=sys.stderr)
        return 1
    try:
        data = load_inputs(StoreResource(**config["store"]))
    except FileNotFoundError as err:
        print(f"veritas leaderboard: {err}", file=sys.stderr)
        return 1
    if first and last and first > last:
        print(f"veritas leaderboard: --from {first} is after --to {last}", file=sys.stderr)
        return 2
    board = compute_board(data, first, last, args.after_cutoff,
                          resamples=stage_settings(config["stages"])["board"].bootstrap_resamples)
    if not board["window"]["quarters"]:
        print(f"veritas leaderboard: no released quarter in {first or '...'}..{last or '...'} "
              f"(released: {', '.join(board['all_quarters'])})", file=sys.stderr)
        return 2
    print(json.dumps(board, indent=1, ensure_ascii=False) if args.json else text_ranking(board), end="\n" if args.json else "")
    if args.html:
        path = Path(args.html)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_page(board), encoding="utf-8")
        print(f"[veritas] page: {path}", file=sys.stderr)
    return 0
