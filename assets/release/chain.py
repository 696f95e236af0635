"""The chain of releases (issue 51, section 5): a quarter's release reads the releases before it (the claims that
recur), through the nearest earlier quarter that has one, as Dagster recorded them.

So a release is never built while an earlier quarter that should have a release has none, or has a stale one
(built on another release than the current one of the quarter before it): its recurring marks would miss claims,
and building the quarters in another order would give other bytes. "Earlier" runs from the first quarter with a
release up to the quarter before; of those quarters, the ones with reviews in the sources' snapshot (unless
Dagster recorded that none of them was trusted) and the ones with a release must have a current release. A store's
first release has none before it (the demo's, one quarter run alone). The run tag ``ALLOW_TAG`` (``veritas run
--allow-missing-earlier``) builds a release without them anyway; its manifest and card name what it lacks.
"""

from assets.ingestion.snapshot import latest, manifest_of
from dagster_project.core.instance_records import latest_materializations
from dagster_project.partitions import to_label
from dagster_project.resources.store import StoreResource

ALLOW_TAG = "veritas/allow_missing_earlier"  # "true": build the release without the missing or stale earlier ones


def recorded_releases(instance) -> dict[str, dict]:
    """Quarter -> ``{"version", "content_id", "previous_release"}`` of each quarter's latest recorded release, oldest
    first; ``previous_release`` is the content id of the release it read ("" for none), None where not recorded."""
    import dagster as dg

    labels = sorted(to_label(k) for k in instance.get_materialized_partitions(dg.AssetKey("release")))
    out = {}
    for label, record in sorted(latest_materializations(instance, "release", labels).items()):
        meta = record.asset_materialization.metadata
        value = {k: meta[k].value if k in meta else None for k in ("version", "content_id", "previous_release")}
        out[label] = {**value, "content_id": value["content_id"] or ""}
    return out


def nearest_before(releases: dict[str, dict], quarter: str) -> str | None:
    """The latest quarter before ``quarter`` with a recorded release, or None."""
    return max((q for q in releases if q < to_label(quarter)), default=None)


def reads_another(releases: dict[str, dict], quarter: str) -> bool:
    """Whether the quarter's release read another release than the current one of the nearest earlier quarter with
    a release ("" for none): built before it, or on an older version of it. A release that did not record what it
    read (built before releases named it) is taken as current."""
    read = releases[quarter]["previous_release"]
    before = nearest_before(releases, quarter)
    return read is not None and read != (releases[before]["content_id"] if before else "")


def quarters_with_data(instance, store: StoreResource) -> set[str]:
    """The quarters the sources' current snapshot holds reviews for, less those whose ``trusted_reviews`` Dagster
    recorded empty (none of their reviews can reach a release); none before the first snapshot."""
    pointer, counts = latest(store), {}
    try:
        if pointer:
            counts = manifest_of(store, pointer["fingerprint"]).get("quarters") or {}
    except FileNotFoundError:  # the snapshot it names is gone: the next run's review_snapshot writes it again
        pass
    found = set()
    for quarter, n in counts.items():
        try:
            found |= {to_label(quarter)} if n else set()
        except ValueError:  # reviews that no date placed in a quarter
            continue
    trusted = latest_materializations(instance, "trusted_reviews", sorted(found)) if found else {}
    return {q for q in found if q not in trusted or "rows_out" not in trusted[q].asset_materialization.metadata
            or trusted[q].asset_materialization.metadata["rows_out"].value}


def chain_gaps(releases: dict[str, dict], with_data: set[str], quarter: str) -> tuple[list[str], list[str]]:
    """``(missing, stale)`` before ``quarter``, from the first quarter with a release: the quarters of ``with_data``
    without a release, and the quarters whose release read another release than the current one before it."""
    current = to_label(quarter)
    earlier = sorted(q for q in releases if q < current)
    if not earlier:
        return [], []
    missing = sorted(q for q in with_data if earlier[0] < q < current and q not in releases)
    return missing, [q for q in earlier if reads_another(releases, q)]


def release_gaps(instance, store: StoreResource, quarter: str) -> tuple[list[str], list[str]]:
    """``chain_gaps`` of ``quarter`` as the instance and the store hold them now."""
    return chain_gaps(recorded_releases(instance), quarters_with_data(instance, store), quarter)


def later_stale(releases: dict[str, dict], quarter: str) -> list[str]:
    """The releases after ``quarter`` that are stale: from the first that read another release than the current
    one before it, every later one (each read the one before it)."""
    later = sorted(q for q in releases if q > to_label(quarter))
    first = next((i for i, q in enumerate(later) if reads_another(releases, q)), len(later))
    return later[first:]


def later_message(quarter: str, stale: list[str]) -> str:
    """One line: the later releases the release of ``quarter`` left stale, and the command that rebuilds them."""
    return (f"the later releases {', '.join(stale)} were built before this release of {to_label(quarter)} and are "
            f"stale now (they read another release than the current one): rebuild them with `veritas backfill "
            f"--stale --from {stale[0]} --until release`")


def gap_message(quarter: str, missing: list[str], stale: list[str], override: str = "", last: str = "") -> str:
    """One line: which earlier releases ``quarter``'s release would be built without, the backfill that builds them
    oldest first (up to ``last``, default ``quarter``), and ``override`` (how to build it without them), if any."""
    quarter = to_label(quarter)
    parts = [f"{', '.join(missing)} {'has' if len(missing) == 1 else 'have'} reviews but no release"] if missing else []
    parts += [f"the release of {', '.join(stale)} is stale (built before the release of the quarter before it, or "
              "on an older one)"] if stale else []
    without = f", or {override} to build {quarter} without them (its manifest and card then say so)" if override else ""
    return (f"the release of {quarter} reads every earlier release (the claims that recur), and {'; '.join(parts)}: "
            f"build them oldest first with `veritas backfill --from {min(missing + stale)} --to "
            f"{to_label(last or quarter)}`{without}")
