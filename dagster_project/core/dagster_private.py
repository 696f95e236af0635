"""Every private Dagster API the code location touches, named in one place (Dagster 1.13).

``veritas backfill`` does in its own process what the daemon does (advance a backfill a tick, launch its queued runs,
execute a run) and reads stale status and backfill progress as the UI does; Dagster offers no public API for any of
that, nor for the consolidated event log the instance is configured with or an asset check's execution status. So
the project reaches these private names, and only through this module: ``private(name)`` returns one of ``PRIVATE``,
and the two instance attributes that ``veritas backfill`` replaces are set by the functions below.
``tests/test_dagster_private.py`` resolves every one of them (a Dagster upgrade that moves one fails there, naming it)
and fails on a private Dagster import anywhere else in the code. Importing this module does not import Dagster."""

import importlib

# the name the project uses -> (module, attribute) in Dagster 1.13
PRIVATE: dict[str, tuple[str, str]] = {
    # the code location loaded in the command's process, or as the UI loads it (commands/backfill.py workspace)
    "InProcessCodeLocationOrigin": ("dagster._core.remote_origin", "InProcessCodeLocationOrigin"),
    "LoadableTargetOrigin": ("dagster._core.types.loadable_target_origin", "LoadableTargetOrigin"),
    "WorkspaceProcessContext": ("dagster._core.workspace.context", "WorkspaceProcessContext"),
    "InProcessWorkspaceLoadTarget": ("dagster._core.workspace.load_target", "InProcessWorkspaceLoadTarget"),
    "ModuleTarget": ("dagster._core.workspace.load_target", "ModuleTarget"),
    # a run launcher that executes each run in the command's process
    "execute_run_iterator": ("dagster._core.execution.api", "execute_run_iterator"),
    "RunLauncher": ("dagster._core.launcher", "RunLauncher"),
    "RUN_FAILURE_REASON_TAG": ("dagster._core.storage.tags", "RUN_FAILURE_REASON_TAG"),
    "recon_job_from_origin": ("dagster._utils.hosted_user_process", "recon_job_from_origin"),
    "check_captured_interrupt": ("dagster._utils.interrupts", "check_captured_interrupt"),
    "NoOpComputeLogManager": ("dagster._core.storage.noop_compute_log_manager", "NoOpComputeLogManager"),
    # backfills: made, retried, of stale partitions, followed, cancelled
    "PartitionBackfill": ("dagster._core.execution.backfill", "PartitionBackfill"),
    "BulkActionStatus": ("dagster._core.execution.backfill", "BulkActionStatus"),
    "make_new_backfill_id": ("dagster._core.utils", "make_new_backfill_id"),
    "AssetBackfillStatus": ("dagster._core.execution.asset_backfill", "AssetBackfillStatus"),
    "AssetGraphSubset": ("dagster._core.definitions.assets.graph.asset_graph_subset", "AssetGraphSubset"),
    "AssetKeyPartitionKey": ("dagster._core.definitions.events", "AssetKeyPartitionKey"),
    "CachingStaleStatusResolver": ("dagster._core.definitions.data_version", "CachingStaleStatusResolver"),
    "StaleStatus": ("dagster._core.definitions.data_version", "StaleStatus"),
    "partition_loading_context": ("dagster._core.definitions.partitions.context", "partition_loading_context"),
    # one tick of the daemon's work, and whether a daemon serves the instance
    "get_daemon_statuses": ("dagster._daemon.controller", "get_daemon_statuses"),
    "QueuedRunCoordinator": ("dagster._core.run_coordinator", "QueuedRunCoordinator"),
    "QueuedRunCoordinatorDaemon": ("dagster._daemon.run_coordinator.queued_run_coordinator_daemon",
                                   "QueuedRunCoordinatorDaemon"),
    "execute_backfill_iteration": ("dagster._daemon.backfill", "execute_backfill_iteration"),
    # the tags on a run of a range of quarters (checks.py reads a batched run's quarters from them)
    "ASSET_PARTITION_RANGE_START_TAG": ("dagster._core.storage.tags", "ASSET_PARTITION_RANGE_START_TAG"),
    "ASSET_PARTITION_RANGE_END_TAG": ("dagster._core.storage.tags", "ASSET_PARTITION_RANGE_END_TAG"),
    # the instance's records: an asset check's execution status (core/instance_records.py)
    "AssetCheckExecutionRecordStatus": ("dagster._core.storage.asset_check_execution_record",
                                        "AssetCheckExecutionRecordStatus"),
    # all events in one SQLite file (core/instance.py writes it into dagster.yaml as module and class)
    "ConsolidatedSqliteEventLogStorage": ("dagster._core.storage.event_log", "ConsolidatedSqliteEventLogStorage"),
}
# attributes of DagsterInstance that ``veritas backfill`` replaces on its own instance (never the UI's or the daemon's)
INSTANCE_ATTRIBUTES = ("_run_launcher", "_compute_log_manager")


def private(name: str):
    """The private Dagster object the project calls ``name`` (a key of ``PRIVATE``)."""
    module, attribute = PRIVATE[name]
    return getattr(importlib.import_module(module), attribute)


def replace_run_launcher(instance, launcher) -> None:
    """Runs of this instance object are launched by ``launcher`` (the instance takes its launcher from its config)."""
    instance._run_launcher = launcher
    launcher.register_instance(instance)


def replace_compute_log_manager(instance, manager) -> None:
    """Runs of this instance object capture their output with ``manager``."""
    instance._compute_log_manager = manager
    manager.register_instance(instance)
