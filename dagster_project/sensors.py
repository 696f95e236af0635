"""The sensors that alert (``AlertsResource``: a webhook, email): ``run_failure_alert`` on every failed run, with the
stage that failed, the quarter, the error and a link to the run; ``freshness_alert`` on each late release and on a
stale feed (the checks of ``dagster_project/freshness.py``, which it evaluates and records on each tick).

Both exist always, so that the UI lists them; they start running by default only when the config file names an
alert target (``alerts:``). An alert that cannot be delivered is logged as an error and fails the sensor's tick."""

import json

import dagster as dg

from dagster_project import freshness as rules
from dagster_project.alerts import Alert, AlertsResource, FreshnessSettings
from dagster_project.core.config_file import clip
from dagster_project.core.dagster_private import private
from dagster_project.partitions import to_label

ERROR_CHARS = 600  # of a step's error in an alert: its message, never its stack trace
FRESHNESS_INTERVAL_S = 6 * 3600  # a release is due by the day and a feed goes stale over days: four ticks a day
RANGE_START_TAG = private("ASSET_PARTITION_RANGE_START_TAG")  # a batched run's first and last quarter
RANGE_END_TAG = private("ASSET_PARTITION_RANGE_END_TAG")


# ---- a failed run ---------------------------------------------------------------------------------------------------

def _label(key: str) -> str:
    try:
        return to_label(key)
    except ValueError:  # a partition of another code location on the same instance
        return key


def run_quarter(tags: dict) -> str:
    """The quarter of a run (``2025Q4``), the range of a batched run (``2020Q1..2020Q4``), or ``none``."""
    if tags.get("dagster/partition"):
        return _label(tags["dagster/partition"])
    if tags.get(RANGE_START_TAG) and tags.get(RANGE_END_TAG):
        return f"{_label(tags[RANGE_START_TAG])}..{_label(tags[RANGE_END_TAG])}"
    return "none (the run has no partition)"


def step_error(event: dg.DagsterEvent) -> str:
    """A failed step's error as its code raised it: a ``dg.Failure``'s description, else the exception Dagster
    wrapped (``ValueError: ...``), without the wrapper and the stack trace."""
    data = event.step_failure_data
    if data.user_failure_data is not None and data.user_failure_data.description:
        return f"Failure: {data.user_failure_data.description}"
    error = data.error
    while error is not None and error.cause is not None and error.cls_name.startswith("Dagster"):
        error = error.cause
    return error.message.strip() if error is not None else "(no error recorded)"


def failure_alert(context: dg.RunFailureSensorContext, alerts: AlertsResource) -> Alert:
    """The alert for a failed run: the stage (each failed step), the quarter, the error (clipped) and the link."""
    run = context.dagster_run
    failures = context.get_step_failure_events()
    stages = list(dict.fromkeys(event.step_key for event in failures)) or ["(the run, before any step)"]
    if failures:
        error = step_error(failures[0]) + (f" (and {len(failures) - 1} more failed steps)" if len(failures) > 1 else "")
    else:
        error = context.failure_event.message or "(no error recorded)"
    quarter = run_quarter(dict(run.tags))
    link = alerts.link(f"runs/{run.run_id}")
    return Alert(
        subject=f"veritas: {stages[0]} failed for {quarter}",
        text="\n".join([f"veritas: a run failed at stage {', '.join(stages)}, quarter {quarter}",
                        f"stage: {', '.join(stages)}", f"quarter: {quarter}",
                        f"error: {clip(' '.join(error.split()), ERROR_CHARS)}",
                        f"run: {run.run_id} (job {run.job_name})", f"link: {link}"]))


def run_failure_sensor(default_status: dg.DefaultSensorStatus) -> dg.SensorDefinition:
    @dg.run_failure_sensor(
        name="run_failure_alert", default_status=default_status,
        monitor_all_code_locations=True,  # a run the CLI made in its own process has no code location to match
        description="Alerts the configured targets (alerts: in the config file) of every failed run: the stage, the "
                    "quarter, the error and a link to the run. A tick fails when an alert is not delivered.",
    )
    def run_failure_alert(context: dg.RunFailureSensorContext, alerts: AlertsResource) -> None:
        alerts.send(failure_alert(context, alerts), context.log)

    return run_failure_alert


# ---- freshness ------------------------------------------------------------------------------------------------------

def freshness_verdicts(instance: dg.DagsterInstance, settings: FreshnessSettings) -> dict[str, tuple]:
    """check name -> (its verdict now, the check, its severity)."""
    now = rules.utc_now()
    return {"release_freshness": (rules.evaluate_release(instance, settings, now), rules.release_freshness,
                                  rules.RELEASE_SEVERITY),
            "feed_freshness": (rules.evaluate_feed(instance, settings, now), rules.feed_freshness, rules.FEED_SEVERITY)}


def freshness_alert_message(new: dict[str, str], alerts: AlertsResource) -> Alert:
    """One alert for the problems not alerted before (key -> line): each on a line, a link to each check's page."""
    late = sorted(key.split(":", 1)[1] for key in new if key.startswith("release:"))
    stale = any(key.startswith("feed:") for key in new)
    what = [f"no release for {', '.join(late)}"] if late else []
    what += ["the ClaimReview feed is stale"] if stale else []
    links = ([alerts.link("assets/release?view=checks")] if late else []) + (
        [alerts.link("assets/review_snapshot?view=checks")] if stale else [])
    return Alert(subject=f"veritas: {'; '.join(what)}",
                 text="\n".join(["veritas: freshness", *new.values(), *(f"link: {url}" for url in links)]))


def freshness_sensor(default_status: dg.DefaultSensorStatus) -> dg.SensorDefinition:
    @dg.sensor(
        name="freshness_alert", minimum_interval_seconds=FRESHNESS_INTERVAL_S, default_status=default_status,
        description="Evaluates release_freshness (a finished quarter without a release freshness.days after its end) "
                    "and feed_freshness (the ClaimReview feed unchanged for too long), records both as the checks' "
                    "results and alerts the configured targets once for each new problem.",
    )
    def freshness_alert(context: dg.SensorEvaluationContext, alerts: AlertsResource,
                        freshness: FreshnessSettings) -> dg.SkipReason:
        verdicts = freshness_verdicts(context.instance, freshness)
        for verdict, check, severity in verdicts.values():  # recorded first: the UI shows them even if alerting fails
            context.instance.report_runless_asset_event(verdict.evaluation(check, severity))
        problems = {key: line for verdict, _, _ in verdicts.values() for key, line in verdict.problems.items()}
        alerted = set(json.loads(context.cursor)) if context.cursor else set()
        new = {key: line for key, line in problems.items() if key not in alerted}
        if new:  # raises when not delivered: the tick fails and the cursor stays, so the next tick sends it again
            alerts.send(freshness_alert_message(new, alerts), context.log)
        context.update_cursor(json.dumps(sorted(problems)))  # a problem that clears is alerted again if it returns
        summary = "; ".join(f"{name}: {'passed' if v.passed else 'FAILED'}" for name, (v, _, _) in verdicts.items())
        if new:
            return dg.SkipReason(f"{summary}; alerted {len(new)} new problem(s)")
        return dg.SkipReason(f"{summary}; nothing new to alert" if problems else summary)

    return freshness_alert


def alert_sensors(alerts: AlertsResource) -> list[dg.SensorDefinition]:
    """Both sensors, running by default when ``alerts`` names a target, else stopped (switchable in the UI)."""
    status = dg.DefaultSensorStatus.RUNNING if alerts.has_targets else dg.DefaultSensorStatus.STOPPED
    return [run_failure_sensor(status), freshness_sensor(status)]
