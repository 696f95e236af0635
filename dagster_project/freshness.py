"""Freshness: two asset checks that tell when the benchmark falls behind. ``release_freshness`` (on ``release``) fails
when a finished quarter has no release ``freshness.days`` after its end; ``feed_freshness`` (on ``review_snapshot``)
warns when the ClaimReview feed itself has stopped changing: the snapshot's content fingerprint stayed the same for
longer than ``freshness.feed_days`` and longer than any quiet spell it had before.

Both read what the Dagster instance recorded (the release's materializations per quarter; the snapshot's
materializations with their ``fingerprint``), so the same verdict comes from a run that executes a check and from
the ``freshness_alert`` sensor (``dagster_project/sensors.py``), which evaluates both on its ticks, records them as
the checks' results and alerts on each new problem."""

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from itertools import pairwise

import dagster as dg

from dagster_project.alerts import FreshnessSettings
from dagster_project.core.instance_records import latest_materializations
from dagster_project.partitions import (
    QUARTER_START,
    quarter_bounds,
    quarter_of,
    to_label,
)

DAY_S = 86400.0
FEED_HISTORY = 2000  # the snapshot's latest materializations read for its changes (years of daily runs)


def utc_now() -> datetime:
    """The time a check or a tick judges at (one place, so that a test can move it)."""
    return datetime.now(UTC)


@dataclass
class Verdict:
    """A check's verdict: passed or not, the metadata it records, and its problems (key -> one line each)."""

    passed: bool
    note: str
    metadata: dict
    problems: dict[str, str] = field(default_factory=dict)

    def result(self, severity: dg.AssetCheckSeverity) -> dg.AssetCheckResult:
        return dg.AssetCheckResult(passed=self.passed, severity=severity,
                                   metadata={**self.metadata, "note": self.note})

    def evaluation(self, check: dg.AssetChecksDefinition, severity: dg.AssetCheckSeverity) -> dg.AssetCheckEvaluation:
        (key,) = check.check_keys
        return dg.AssetCheckEvaluation(asset_key=key.asset_key, check_name=key.name, passed=self.passed,
                                       severity=severity, metadata={**self.metadata, "note": self.note})


# ---- the release of each finished quarter ---------------------------------------------------------------------------

def quarter_end(label: str) -> datetime:
    """The moment a quarter ends: midnight UTC at the start of the next quarter."""
    last = quarter_bounds(label)[1]
    return datetime.combine(last + timedelta(days=1), datetime.min.time(), UTC)


def release_due(label: str, days: int) -> datetime:
    return quarter_end(label) + timedelta(days=days)


def due_quarters(now: datetime, days: int, count: int) -> list[str]:
    """The ``count`` newest quarters whose release is due by ``now`` (newest first), none before the first partition."""
    first = to_label(QUARTER_START)
    label = quarter_of(now)
    out: list[str] = []
    while len(out) < count and (label[:4], label[5]) >= (first[:4], first[5]):
        if release_due(label, days) <= now:
            out.append(label)
        year, q = int(label[:4]), int(label[5])
        label = f"{year - 1}Q4" if q == 1 else f"{year}Q{q - 1}"
    return out


def release_verdict(now: datetime, settings: FreshnessSettings, released: set[str]) -> Verdict:
    """Late: a watched quarter (``due_quarters``) without a release in ``released``."""
    watched = due_quarters(now, settings.days, settings.quarters)
    late = [q for q in watched if q not in released]
    problems = {}
    for q in late:
        due = release_due(q, settings.days)
        problems[f"release:{q}"] = (f"no release for {q}: it was due {due.date()}, {settings.days} days after the "
                                    f"quarter's end ({(now - due).days} days ago)")
    if late:
        note = (f"{len(late)} of the {len(watched)} finished quarters watched have no release "
                f"{settings.days} days after their end: {', '.join(late)}; run them (veritas backfill, or the "
                "all_stages job's Partitions tab) or find why their runs failed")
    elif watched:
        note = f"every watched quarter has its release ({', '.join(watched)})"
    else:
        note = "no quarter's release is due yet"
    return Verdict(passed=not late, note=note, problems=problems, metadata={
        "late": dg.MetadataValue.json(late), "watched": dg.MetadataValue.json(watched), "days": settings.days,
        "judged_at": now.isoformat(timespec="seconds")})


def released_quarters(instance: dg.DagsterInstance, quarters: list[str]) -> set[str]:
    """Those of ``quarters`` that have a materialization of ``release`` in the instance."""
    return set(latest_materializations(instance, "release", quarters)) if quarters else set()


def evaluate_release(instance: dg.DagsterInstance, settings: FreshnessSettings, now: datetime) -> Verdict:
    watched = due_quarters(now, settings.days, settings.quarters)
    return release_verdict(now, settings, released_quarters(instance, watched))


# ---- the ClaimReview feed: review_snapshot's fingerprint over time --------------------------------------------------

def feed_history(instance: dg.DagsterInstance) -> list[tuple[float, str]]:
    """(timestamp, fingerprint) of the snapshot's latest ``FEED_HISTORY`` materializations, oldest first."""
    out: list[tuple[float, str]] = []
    cursor = None
    while len(out) < FEED_HISTORY:
        page = instance.fetch_materializations(dg.AssetKey("review_snapshot"), limit=min(500, FEED_HISTORY - len(out)),
                                               cursor=cursor, ascending=False)
        for record in page.records:
            value = record.asset_materialization.metadata.get("fingerprint")
            if value is not None:
                out.append((record.timestamp, str(value.value)))
        if not page.has_more:
            break
        cursor = page.cursor
    return out[::-1]


def _day(timestamp: float) -> date:
    return datetime.fromtimestamp(timestamp, UTC).date()


def feed_verdict(history: list[tuple[float, str]], settings: FreshnessSettings, now: datetime) -> Verdict:
    """Stale: the newest materialization shows the fingerprint it has shown since a change more than
    ``max(feed_days, the longest spell between two earlier changes)`` days before it. Measured up to the newest
    materialization, never to ``now``: the pipeline knows the feed only as far as it last looked."""
    if not history:
        return Verdict(passed=True, note="review_snapshot was never materialized: nothing to judge yet",
                       metadata={"feed_days": settings.feed_days})
    changes = [t for i, (t, fp) in enumerate(history) if i == 0 or fp != history[i - 1][1]]
    seen, fingerprint = history[-1]
    unchanged = (seen - changes[-1]) / DAY_S
    longest = max(((b - a) / DAY_S for a, b in pairwise(changes)), default=0.0)
    limit = max(float(settings.feed_days), longest)
    stale = unchanged > limit
    note = (f"the feed (fingerprint {fingerprint}) was seen unchanged for {unchanged:.1f} days, from "
            f"{_day(changes[-1])} to {_day(seen)}; the limit is {limit:.1f} days (feed_days {settings.feed_days}, "
            f"longest spell between earlier changes {longest:.1f} days)")
    if stale:
        note += ": check the sources (a feed no longer published, a URL moved, an API key expired)"
    metadata = {"fingerprint": fingerprint, "unchanged_days": round(unchanged, 2), "limit_days": round(limit, 2),
                "longest_spell_days": round(longest, 2), "changes_seen": len(changes), "feed_days": settings.feed_days,
                "last_change": datetime.fromtimestamp(changes[-1], UTC).isoformat(timespec="seconds"),
                "last_seen": datetime.fromtimestamp(seen, UTC).isoformat(timespec="seconds"),
                "judged_at": now.isoformat(timespec="seconds")}
    problems = {f"feed:{fingerprint}": f"the ClaimReview feed has not changed for {unchanged:.0f} days "
                                       f"(since {_day(changes[-1])}, last looked at {_day(seen)}; limit "
                                       f"{limit:.0f} days)"} if stale else {}
    return Verdict(passed=not stale, note=note, metadata=metadata, problems=problems)


def evaluate_feed(instance: dg.DagsterInstance, settings: FreshnessSettings, now: datetime) -> Verdict:
    return feed_verdict(feed_history(instance), settings, now)


# ---- the checks -----------------------------------------------------------------------------------------------------

RELEASE_SEVERITY = dg.AssetCheckSeverity.ERROR
FEED_SEVERITY = dg.AssetCheckSeverity.WARN  # a quiet feed may be a quiet season: a warning, not an error


@dg.asset_check(asset="release", description="Freshness: every finished quarter watched (freshness.quarters, newest "
                                             "first) has a release freshness.days after its end. Evaluated by the "
                                             "freshness_alert sensor, which alerts on each late quarter.")
def release_freshness(context: dg.AssetCheckExecutionContext, freshness: FreshnessSettings) -> dg.AssetCheckResult:
    return evaluate_release(context.instance, freshness, utc_now()).result(RELEASE_SEVERITY)


@dg.asset_check(asset="review_snapshot", description="Freshness (WARN): the ClaimReview feed changes; its fingerprint "
                                                     "was not seen unchanged for longer than freshness.feed_days and "
                                                     "than any quiet spell before. Evaluated by the freshness_alert "
                                                     "sensor, which alerts when the feed goes stale.")
def feed_freshness(context: dg.AssetCheckExecutionContext, freshness: FreshnessSettings) -> dg.AssetCheckResult:
    return evaluate_feed(context.instance, freshness, utc_now()).result(FEED_SEVERITY)


FRESHNESS_CHECKS = [release_freshness, feed_freshness]

