"""``veritas yields``: per stage, rows in, rows out and drops by reason for one quarter or a range, and the latest
human audit of each quarter's release (text, JSON, and the self-contained dashboard page); the report itself is
``dagster_project.yield_report``'s."""

import argparse
import json
import sys


def register(subparsers) -> list[argparse.ArgumentParser]:
    p = subparsers.add_parser("yields", help="per stage: rows in, rows out and drops by reason, and the release's "
                                             "human audit, for one quarter or a range")
    p.add_argument("--quarter", help="one quarter, e.g. 2025Q4 (or 2025-10)")
    p.add_argument("--from", dest="first", help="first quarter of a range")
    p.add_argument("--to", dest="last", help="last quarter of a range (default: the running quarter)")
    p.add_argument("--json", action="store_true", help="print the reports as JSON")
    p.add_argument("--html", metavar="FILE", help="also write the self-contained dashboard page to FILE")
    p.set_defaults(handler=run)
    return [p]


def run(args: argparse.Namespace) -> int:
    """``veritas yields``: --quarter Q, or --from A [--to B]; text, --json and/or --html FILE."""
    from dagster_project.core.dashboard import write_html
    from dagster_project.core.quarters import current_quarter
    from dagster_project.yield_report import collect_range, format_range

    if bool(args.quarter) == bool(args.first) or (args.last and not args.first):
        raise ValueError("give either --quarter Q or --from A [--to B]")
    first = args.quarter or args.first
    last = args.quarter or args.last or current_quarter()
    reports = collect_range(args.config, first, last)
    if args.json:
        single = args.quarter is not None
        payload = reports[0] if single else {"from": reports[0]["quarter"], "to": reports[-1]["quarter"], "quarters": reports}
        print(json.dumps(payload, indent=2, default=str))
    else:
        print(format_range(reports))
    if args.html:
        path = write_html(reports, args.html)
        print(f"[veritas] dashboard: {path}", file=sys.stderr if args.json else sys.stdout)
    return 0
