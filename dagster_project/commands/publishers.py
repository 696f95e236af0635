"""``veritas publishers refresh``: rebuild the fact-checker registry from the IFCN and EFCSN signatory pages."""

import argparse


def register(subparsers) -> list[argparse.ArgumentParser]:
    group = subparsers.add_parser("publishers", help="the fact-checker registry (registry/publishers.csv)")
    actions = group.add_subparsers(dest="publishers_command", required=True)
    refresh = actions.add_parser(
        "refresh", help="re-read the signatory pages through the web resource (live: archived to WARC; replay: from WARC)")
    refresh.add_argument("--registry", help="registry CSV to update (default: the config's publisher_registry)")
    refresh.add_argument("--sources", help="signatory pages and their XPaths (default: registry/signatory_sources.yaml)")
    refresh.add_argument("--out", help="write the result here instead of over the registry")
    refresh.set_defaults(handler=run_refresh)
    return [group, refresh]


def run_refresh(args) -> int:
    from assets.ingestion.publisher_registry import (
        RefreshError,
        load_sources_spec,
        refresh_registry,
    )
    from dagster_project.config import load_config
    from dagster_project.resources.web import WebResource
    from dagster_project.stage_settings import stage_settings

    config = load_config(getattr(args, "config", None))
    registry = args.registry or stage_settings(config["stages"])["ingestion"].publisher_registry
    web = WebResource(**config["web"])
    try:
        report = refresh_registry(web, registry, load_sources_spec(args.sources), args.out)
    except RefreshError as err:
        print(f"[veritas] publishers refresh: {err}; registry left as it was")
        return 1
    finally:
        web.close()
    for url, n in report.per_page.items():
        print(f"[veritas] {url}: {n} signatories")
    print(f"[veritas] registry {args.out or registry}: {len(report.added)} added, {len(report.updated)} updated, "
          f"{report.unchanged} unchanged")
    if report.added:
        print("  added: " + ", ".join(report.added))
    for network, ids in report.unlisted.items():
        if ids:
            print(f"  not on the {network} page (kept as they were): " + ", ".join(ids))
    return 0
