"""Where a run's steps execute, chosen by the ``executor:`` section of the config file.

- ``{kind: in_process}`` (default): every step in the run's own process; the steps of a quarter form a chain,
  so nothing is lost, and each step skips the re-import a subprocess would pay.
- ``{kind: multiprocess, max_concurrent: N}``: one subprocess per step (Dagster's default executor).
- ``{kind: celery, broker: redis://127.0.0.1:6379/0, backend: ..., retries: ...}``: steps are queued on a
  Celery broker (Redis) and run by ``dagster-celery`` workers started on any host that sees the same Dagster
  instance storage, the same store and the same config (``VERITAS_CONFIG``). Start each worker with
  ``dagster-celery worker start -A dagster_celery.app -y worker.yaml -- --concurrency=1 --prefetch-multiplier=1
  --disable-prefetch`` (``CELERY_WORKER_ARGS``): Celery's default prefetch lets a busy worker hoard the steps of
  parallel runs, so a second worker adds nothing (Redis broker; the flag needs Celery >= 5.6).
"""

import os
from pathlib import Path

import dagster as dg
import yaml

from dagster_project.core.config_file import EXECUTOR_SETTINGS, shown

ALL_STAGES_JOB = "all_stages"  # the ten stages, quarter-partitioned: what `veritas backfill` runs per quarter
# give them to every worker (after `--`): else a busy worker reserves the next step and runs it later while another idles
CELERY_WORKER_ARGS = ["--concurrency=1", "--prefetch-multiplier=1", "--disable-prefetch"]
RETRY_DEFAULTS = {"max_retries": 2, "delay": 5.0}  # run-level retries (a transient failure that outlived step retries)


def executor_from_config(executor: dict | None) -> dg.ExecutorDefinition:
    """The executor named by the config section (see the module docstring); ``config_file`` checked the section
    against ``EXECUTOR_SETTINGS``, what this reads."""
    cfg = dict(executor or {})
    kind = cfg.pop("kind", "in_process")
    if kind == "in_process":
        return dg.in_process_executor
    if kind == "multiprocess":
        return dg.multiprocess_executor.configured({"max_concurrent": int(cfg.get("max_concurrent", 0))})
    if kind == "celery":
        from dagster_celery import celery_executor

        return celery_executor.configured(celery_settings(cfg))
    raise ValueError(f"executor: unknown kind {shown(kind)} ({', '.join(EXECUTOR_SETTINGS)})")


def celery_settings(cfg: dict) -> dict:
    broker = cfg.get("broker") or os.environ.get("VERITAS_CELERY_BROKER") or "redis://127.0.0.1:6379/0"
    out = {"broker": broker, "backend": cfg.get("backend") or broker}
    if "retries" in cfg:
        out["retries"] = cfg["retries"]
    return out


def write_celery_worker_yaml(config: dict, path: str | os.PathLike) -> Path:
    """The ``-y`` file of ``dagster-celery worker start``: the same broker and backend as the runs use."""
    settings = celery_settings({k: v for k, v in (config.get("executor") or {}).items() if k != "kind"})
    # also here, not only in CELERY_WORKER_ARGS: a worker started without the flags must not hoard steps either
    settings["config_source"] = {"worker_prefetch_multiplier": 1, "worker_disable_prefetch": True}
    target = Path(path)
    target.write_text(yaml.safe_dump({"execution": {"config": settings}}))
    return target
