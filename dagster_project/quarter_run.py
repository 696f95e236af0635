"""Running a quarter in process, for the commands that run one (``veritas run``, ``veritas demo``):
``materialize_quarter`` (and ``run_quarter``, its success alone) materializes a quarter's stages on the project's
Dagster instance, ``failure_reason`` says why a failed run failed, and ``run_stoppable`` runs a command's work so that
SIGINT/SIGTERM stop it within seconds, the embedded model servers and the demo's simulated model panels
(``SIM_PANELS``) with it."""

import os
import sys
import time

SIM_PANELS: list = []  # the panel servers running now (a signal stops them before the process exits)


def run_quarter(config_path: str | None, quarter: str, until: str | None = None,
                allow_missing_earlier: bool = False) -> bool:
    """Materialize the stages (up to ``until``) for one quarter in process; returns success. The release refuses to
    be built without an earlier quarter's release (missing or stale) unless ``allow_missing_earlier``."""
    return materialize_quarter(config_path, quarter, until, allow_missing_earlier)[0]


def materialize_quarter(config_path: str | None, quarter: str, until: str | None = None,
                        allow_missing_earlier: bool = False) -> tuple[bool, str]:
    """``run_quarter`` that also says why a failed run failed: ``(False, "scored_claims: ModelUnavailable: ...")``."""
    from dagster_project.core.config_file import log_level

    level = log_level("INFO")  # before the slow imports: a bogus $VERITAS_LOG_LEVEL is one line at once
    import dagster as dg

    from assets.release.chain import ALLOW_TAG
    from dagster_project.checks import CHECKS
    from dagster_project.config import load_config
    from dagster_project.core.instance import project_instance
    from dagster_project.core.quarters import partition_label
    from dagster_project.definitions import (
        ALL_ASSETS,
        ASSET_NAMES,
        build_resources,
        with_snapshot,
    )
    from dagster_project.partitions import to_key

    config = load_config(config_path)
    label = partition_label(quarter)
    if until and until not in ASSET_NAMES:
        raise SystemExit(f"unknown asset {until!r}; choose one of {', '.join(ASSET_NAMES)}")
    selection = ASSET_NAMES[: ASSET_NAMES.index(until) + 1] if until else ASSET_NAMES
    started = time.monotonic()
    print(f"[veritas] {label}: {' -> '.join(selection)}", flush=True)
    result = dg.materialize(
        [*ALL_ASSETS, *CHECKS],
        selection=with_snapshot(selection),
        partition_key=to_key(label),
        resources=build_resources(config),
        instance=project_instance(config),
        tags={"veritas/quarter": label, **({ALLOW_TAG: "true"} if allow_missing_earlier else {})},
        run_config={"loggers": {"console": {"config": {"log_level": level}}}},
        raise_on_error=False,
    )
    reason = "" if result.success else failure_reason(result)
    print(f"[veritas] {label}: {'done' if result.success else 'FAILED'} in {time.monotonic() - started:.1f}s"
          + (f": {reason}" if reason else ""), flush=True)
    return result.success, reason


def releases_in(until: str | None) -> bool:
    """Whether a run up to ``until`` (None: every stage) builds the release."""
    from dagster_project.definitions import ASSET_NAMES

    return until is None or (until in ASSET_NAMES and ASSET_NAMES.index(until) >= ASSET_NAMES.index("release"))


def earlier_refusal(config_path: str | None, quarter: str) -> str:
    """Why the quarter's release may not be built now, before anything runs ("" when it may): an earlier quarter's
    release is missing or stale (``assets/release/chain.py``; the release asset refuses the same)."""
    from assets.release.chain import gap_message, release_gaps
    from dagster_project.config import load_config
    from dagster_project.core.instance import project_instance
    from dagster_project.core.quarters import partition_label
    from dagster_project.resources.store import StoreResource

    config = load_config(config_path)
    missing, stale = release_gaps(project_instance(config), StoreResource(**config["store"]), partition_label(quarter))
    return gap_message(quarter, missing, stale, "pass --allow-missing-earlier") if missing or stale else ""


def stale_later(config_path: str | None, quarter: str) -> str:
    """After the quarter's release was built: the later releases that are stale now (built before it), and the
    command that rebuilds them, as one line; "" when none is."""
    from assets.release.chain import later_message, later_stale, recorded_releases
    from dagster_project.config import load_config
    from dagster_project.core.instance import project_instance
    from dagster_project.core.quarters import to_label

    stale = later_stale(recorded_releases(project_instance(load_config(config_path))), to_label(quarter))
    return later_message(quarter, stale) if stale else ""


def failure_reason(result) -> str:
    """The first failed step of a run and its error's first line, e.g. ``scored_claims: ModelUnavailable: ...``."""
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data is not None:
            error = event.step_failure_data.error
            while error is not None and error.cause is not None and error.cls_name in (
                    "DagsterExecutionStepExecutionError", "DagsterUserCodeExecutionError"):
                error = error.cause  # Dagster's wrapper says "Error occurred while executing op"; the cause says why
            first = (error.message.strip().splitlines() or [""])[0] if error is not None else "failed"
            head, sep, rest = first.partition(": ")
            if sep and error is not None and head.rsplit(".", 1)[-1] == error.cls_name:
                first = f"{error.cls_name}: {rest}"  # the class without its module path
            return f"{event.step_key}: {first}"
    return "the run failed before any step (see the log above)"


STOP_GRACE_S = 5.0  # after a signal: time for the run to record its failure (the servers get 3 s before it)


def run_stoppable(command: str, work) -> int:
    """``work()`` in a worker thread while the main thread waits for SIGINT/SIGTERM (Dagster defers signals until a
    step ends, and a model stage runs for minutes). On a signal: no more model calls, the embedded servers stop,
    the run fails before any stage writes a partial table, and the process exits 128+signal within seconds; the
    model cache keeps every answer received, so the next run resumes from it."""
    import signal
    import threading

    from dagster_project.core.stop_hooks import run_stop_hooks
    from dagster_project.resources.llm import request_stop
    from dagster_project.resources.local_llm import stop_all

    if threading.current_thread() is not threading.main_thread():
        return work()  # only the main thread receives signals (a caller's own thread, e.g. in tests)
    box: dict = {}
    received: list[int] = []

    def target():
        try:
            box["rc"] = work()
        except BaseException as err:  # noqa: BLE001 - handed to the main thread, which raises it
            box["error"] = err

    def on_signal(signum, frame):
        received.append(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    worker = threading.Thread(target=target, name=f"veritas-{command}", daemon=True)
    worker.start()
    while worker.is_alive() and not received:
        worker.join(0.2)
    if received:  # our handler stays: a second Ctrl-C during the stop changes nothing
        name = signal.Signals(received[0]).name
        request_stop(f"{name} received")
        run_stop_hooks()  # child processes and scratch folders of the work under way (e.g. a feed read in ranges)
        servers = stop_all()
        panels = list(SIM_PANELS)
        for panel in panels:  # the demo's simulated panel: its port closes before the process exits
            panel.__exit__(None, None, None)
        worker.join(STOP_GRACE_S)
        print(f"[veritas] {command} stopped by {name}: {servers} embedded model server(s)"
              f"{' and the simulated model panel' if panels else ''} stopped, no stage output "
              f"written after the signal; the model cache keeps every answer received, so running it again resumes "
              f"from there.", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(128 + received[0])  # worker threads may still wait on a remote model: do not wait for them
    for sig, handler in previous.items():
        signal.signal(sig, handler)
    if "error" in box:
        raise box["error"]
    return box["rc"]

