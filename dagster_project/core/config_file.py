"""Reading the YAML config, without importing Dagster (read-only commands use it and must start fast);
``config`` holds the Dagster resources built from it."""

import difflib
import os
from pathlib import Path
from typing import Any

import yaml

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = PROJECT_ROOT / "veritas.yaml"


def _resolve(value: str, base: Path) -> str:
    if "://" in value or os.path.isabs(value):
        return value
    return str((base / value).resolve())


class ConfigError(ValueError):
    """The config file cannot be used as written; the message names the file, the line and the key, and what to do."""


_MAPPINGS = ("web", "llm", "store", "stages", "executor", "schedule", "pools")  # sections that hold settings by name


def nearest(key: object, known) -> str:
    """'; did you mean release_size?' for the known key nearest to a mistyped one ('' when none is near)."""
    found = difflib.get_close_matches(str(key), [str(k) for k in known], n=1, cutoff=0.6)
    return f"; did you mean {found[0]}?" if found else ""


def config_line(cfg_path: str | os.PathLike, keys: tuple) -> int | None:
    """The line (1-based) of a key in the config file, or of the nearest enclosing key that is there.

    ``keys`` is the path as the file writes it: section names, keys, and list positions (``("sources", 0, "path")``)."""
    try:
        node = yaml.compose(Path(cfg_path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return None
    line = node.start_mark.line + 1 if node is not None else None
    for key in keys:
        child = None
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if getattr(key_node, "value", None) == str(key):
                    line, child = key_node.start_mark.line + 1, value_node
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
            child = node.value[key]
            line = child.start_mark.line + 1
        if child is None:
            break
        node = child
    return line


def config_error(cfg_path: str | os.PathLike, keys: tuple, problem: str) -> ConfigError:
    """``<file>:<line>: <a.b.c>: <problem>``, the line found in the file."""
    line = config_line(cfg_path, keys)
    dotted = ".".join(f"[{k}]" if isinstance(k, int) else str(k) for k in keys).replace(".[", "[")
    return ConfigError(f"{cfg_path}{f':{line}' if line else ''}: {dotted + ': ' if dotted else ''}{problem}")


def _read(cfg_path: Path) -> Any:
    """The parsed YAML of the config file; every way it can fail is a ConfigError naming the file."""
    try:
        if cfg_path.is_dir():
            hint = f" such as {cfg_path / 'veritas.yaml'}" if (cfg_path / "veritas.yaml").is_file() else ""
            raise ConfigError(f"{cfg_path}: is a folder, not a config file: give --config a YAML file{hint}")
        if not cfg_path.exists():
            raise FileNotFoundError(f"config file not found: {cfg_path} (give --config a YAML file, or set "
                                    "VERITAS_CONFIG)")
        text = cfg_path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{cfg_path}: is not UTF-8 text (byte {err.start}): save it as UTF-8") from None
    except OSError as err:
        raise ConfigError(f"{cfg_path}: cannot be read ({err.strerror}): check its permissions") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = " ".join(str(getattr(err, "problem", None) or err).split())
        raise ConfigError(f"{cfg_path}{where}: not valid YAML ({problem}): fix the file there") from None
    except RecursionError:
        raise ConfigError(f"{cfg_path}: nested too deep to be a config file") from None


def _check_shape(raw: dict, cfg_path: Path, known: set[str]) -> None:
    """Known sections of the right kind: a mapping where settings go, a list of mappings for sources, text for paths."""
    for key in raw:
        if key not in known:
            raise config_error(cfg_path, (key,), f"unknown key{nearest(key, known)} (the sections are: "
                                                 f"{', '.join(sorted(known))})")
    if "data_dir" in raw and not isinstance(raw["data_dir"], str):
        raise config_error(cfg_path, ("data_dir",), f"must be a folder path, not {raw['data_dir']!r}")
    for key in _MAPPINGS:
        if raw.get(key) is not None and not isinstance(raw[key], dict):
            raise config_error(cfg_path, (key,), f"must be a mapping of settings (e.g. '{key}: {{name: value}}'), "
                                                 f"not {raw[key]!r}")
    sources = raw.get("sources")
    if sources is not None and not isinstance(sources, list):
        raise config_error(cfg_path, ("sources",), f"must be a list of sources ('- kind: datafeed'), not {sources!r}")
    for i, spec in enumerate(sources or []):
        if not isinstance(spec, dict):
            raise config_error(cfg_path, ("sources", i), f"a source is a mapping such as '{{kind: datafeed, path: "
                                                         f"feed.json}}', not {spec!r}")
        if not isinstance(spec.get("path", ""), str):
            raise config_error(cfg_path, ("sources", i, "path"), f"must be a path or a URL, not {spec['path']!r}")
    warc_paths = (raw.get("web") or {}).get("warc_paths", [])
    if not isinstance(warc_paths, list) or not all(isinstance(p, str) for p in warc_paths):
        raise config_error(cfg_path, ("web", "warc_paths"), f"must be a list of WARC paths, not {warc_paths!r}")
    if not isinstance((raw.get("stages") or {}).get("systems_dir") or "", str):
        raise config_error(cfg_path, ("stages", "systems_dir"), "must be a folder path")
    for name, value in (raw.get("pools") or {}).items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise config_error(cfg_path, ("pools", name), f"must be a whole number of steps >= 1, not {value!r}")


def load_config(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """Read the YAML config; relative paths resolve against the config file's folder.

    The file's shape is checked here (sections, their kinds); the keys and values of each section are checked
    against the resources that read them by ``dagster_project.config.load_config``. Raises ``ConfigError``."""
    cfg_path = Path(path or os.environ.get("VERITAS_CONFIG") or DEFAULT_CONFIG).resolve()
    raw = _read(cfg_path)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise config_error(cfg_path, (), f"the config must be a mapping of sections (data_dir, sources, web, ...), "
                                         f"not {type(raw).__name__}")
    sections = {"data_dir", "sources", "web", "llm", "store", "stages", "executor", "schedule", "pools"}
    _check_shape(raw, cfg_path, sections)
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


def check_data_dir(config: dict, writes: bool = True) -> None:
    """The data dir (and a local store's root) is a folder this user may read (and write, for a command that
    writes), or one that can be made; else a ``ConfigError`` names the path and what to do."""
    folders = [("data_dir", config["data_dir"])]
    if config["store"].get("kind", "local") != "s3" and config["store"].get("root"):
        folders.append(("store.root", config["store"]["root"]))
    for key, value in folders:
        path = Path(value).expanduser()
        found = path
        while not os.path.lexists(found) and found.parent != found:
            found = found.parent  # the folder it would be made in
        name = "data dir" if key == "data_dir" else "store root"
        fix = f"set {key} in {config['path']} to another folder"
        if not found.is_dir():
            what = "is a file" if found == path else f"cannot be made: {found} is a file"
            raise ConfigError(f"{name} {path} {what}, not a folder: move the file away, or {fix}")
        need = os.R_OK | os.X_OK | (os.W_OK if writes or found != path else 0)
        if not os.access(found, need):
            can = "read and written" if need & os.W_OK else "read"
            raise ConfigError(f"{name} {found} cannot be {can} by this user: give it the permissions "
                              f"(chmod u+rwx {found}), or {fix}")
