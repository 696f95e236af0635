"""One stage of a quarter in its own process (so that the bench can time it, read its peak RSS, or kill it):
    python -m bench.rehearsal_stage CONFIG QUARTER STAGE [--swap-ties]
--swap-ties reverses the decisive order on ties (a deliberately broken rule, to show the agreement drops)."""

import json
import os
import sys

SLOT_BUSY = "slot_busy:"
HEDGED = "hedged:"

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main(argv: list[str]) -> int:
    import dagster as dg

    from dagster_project.checks import CHECKS
    from dagster_project.config import load_config
    from dagster_project.core.instance import project_instance
    from dagster_project.definitions import ALL_ASSETS, build_resources, with_snapshot
    from dagster_project.partitions import to_key
    config_path, quarter, stage = argv[:3]
    if "--swap-ties" in argv:
        import assets.claims.scored_claims as scoring

        scheme = scoring.label_scheme()
        scheme["decisive_order"] = list(reversed(scheme["decisive_order"]))
        scoring.label_scheme = lambda: scheme  # stage 6 and 7 read the scheme through this name
    config = load_config(config_path)
    result = dg.materialize([*ALL_ASSETS, *CHECKS], selection=with_snapshot([stage]), partition_key=to_key(quarter),
                            resources=build_resources(config), instance=project_instance(config),
                            tags={"veritas/quarter": quarter, "veritas/simulated": "true"}, raise_on_error=False)
    for tag, prefix in ((HEDGED, "llm/hedged/"), (SLOT_BUSY, "llm/slot_busy/")):  # the bench reads these lines
        per_member = {key.rsplit("/", 1)[1]: value.value for m in result.get_asset_materialization_events()
                      for key, value in m.materialization.metadata.items() if key.startswith(prefix)}
        print(f"{tag} {json.dumps(per_member)}", file=sys.stderr, flush=True)
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
