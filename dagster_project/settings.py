"""Reading the YAML config, without importing Dagster (read-only commands use it and must start fast);
``config`` holds the Dagster resources built from it."""

import os
from pathlib import Path
from typing import Any

import yaml

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = PROJECT_ROOT / "veritas.yaml"


def _resolve(value: str, base: Path) -> str:
    if "://" in value or os.path.isabs(value):
        return value
    return str((base / value).resolve())


def load_config(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """Read the YAML config; relative paths resolve against the config file's folder."""
    cfg_path = Path(path or os.environ.get("VERITAS_CONFIG") or DEFAULT_CONFIG).resolve()
    if not cfg_path.exists():
        raise FileNotFoundError(f"config file not found: {cfg_path}")
    raw = yaml.safe_load(cfg_path.read_text()) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{cfg_path}: the config must be a mapping")
    unknown = set(raw) - {"data_dir", "sources", "web", "llm", "store", "stages", "executor", "schedule", "pools"}
    if unknown:
        raise ValueError(f"{cfg_path}: unknown config keys {sorted(unknown)}")
    base = cfg_path.parent
    data_dir = Path(_resolve(raw.get("data_dir", ".veritas"), base))
    web = dict(raw.get("web") or {})
    web["warc_paths"] = [_resolve(p, base) for p in web.get("warc_paths", [])]
    web.setdefault("archive_dir", str(data_dir / "warc"))
    llm = dict(raw.get("llm") or {})
    llm.setdefault("cache_path", str(data_dir / "llm_cache.sqlite"))
    store = dict(raw.get("store") or {})
    store.setdefault("root", str(data_dir / "data"))
    if store.get("kind") == "s3":  # live WARC records are mirrored to the bucket too
        store.setdefault("warc_dir", web["archive_dir"])
    stages = dict(raw.get("stages") or {})
    if stages.get("systems_dir"):
        stages["systems_dir"] = _resolve(stages["systems_dir"], base)
    stages["sources"] = [
        {**s, "kind": s.get("kind", "datafeed"), **({"path": _resolve(s["path"], base)} if s.get("path") else {})}
        for s in raw.get("sources") or []
    ]
    executor = dict(raw.get("executor") or {})  # {kind: in_process | multiprocess | celery, ...}: see executors.py
    schedule = dict(raw.get("schedule") or {})  # {enabled: bool, ...}: see schedules.py
    return {"path": str(cfg_path), "data_dir": str(data_dir), "web": web, "llm": llm, "store": store, "stages": stages,
            "executor": executor, "schedule": schedule,
            "pools": {str(k): int(v) for k, v in (raw.get("pools") or {}).items()}}  # pool -> concurrent steps
