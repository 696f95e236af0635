"""Reading the YAML config, without importing Dagster (read-only commands use it and must start fast);
``config`` holds the Dagster resources built from it."""

import difflib
import os
import re
import reprlib
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


# ---- reading hostile YAML: bounded aliases, no key written twice, no value echoed in full -----------------------------

# What aliases may add to a file, all uses together: one per node plus one per character of a scalar. A config file
# has no need of more (a handful of anchors for shared settings); a "billion laughs" needs millions, and past this
# bound nothing of the file is built into Python objects, so nothing downstream (a check, a message) can blow it up.
ALIAS_BUDGET = 10_000
SHOWN_CHARS = 80  # a value from the file, as a message shows it: at most this many characters, cut with "..."

_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = SHOWN_CHARS
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple, _REPR.maxdict, _REPR.maxset = 3, 6, 6, 4, 6


def clip(text: object, limit: int = SHOWN_CHARS) -> str:
    """``text`` as a message shows it: at most ``limit`` characters, the end cut to "..."."""
    text = str(text)
    return text if len(text) <= limit else text[:limit - 3] + "..."


_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#@\s'\"]*@")  # the user:password@ of a URL


def hide_userinfo(text: str, mask: str = "") -> str:
    """``text`` with the ``user:password@`` of every URL in it replaced by ``mask@`` (by nothing when ``mask`` is
    empty): the one place a credential is taken out of what is shown or stored."""
    if "@" not in text:
        return text
    return _USERINFO.sub(lambda m: m[1] + (f"{mask}@" if mask else ""), text)


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """The ``repr`` of a value read from the file, bounded (never the whole of a huge or deeply nested value), with
    the ``user:password@`` of any URL in it left out: a secret put where it does not belong is not echoed."""
    try:
        text = _REPR.repr(value)
    except Exception:  # noqa: BLE001 - a value whose repr fails is shown by its type
        text = f"<{type(value).__name__}>"
    return clip(hide_userinfo(text, "***"), limit)


class _Refused(yaml.YAMLError):
    """What the loader refuses while composing, before any Python object is built: ``line`` is 1-based."""

    def __init__(self, line: int, problem: str):
        super().__init__(problem)
        self.line, self.problem = line, problem


class _BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses, as it composes the nodes: aliases that add more than ``ALIAS_BUDGET``
    nodes and characters, an alias inside the node it names, and a key written twice in one mapping."""

    def __init__(self, stream):
        super().__init__(stream)
        self.alias_added = 0
        self.weights: dict[int, int] = {}  # id(node) -> its nodes and characters with its aliases expanded

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            node = super().compose_node(parent, index)
            line = event.start_mark.line + 1
            weight = self.weights.get(id(node))
            if weight is None:
                raise _Refused(line, f"the alias *{clip(event.anchor, 40)} is inside the node it names (a loop): "
                                     "write the value out")
            self.alias_added += weight
            if self.alias_added > ALIAS_BUDGET:
                raise _Refused(line, f"the aliases expand past {ALIAS_BUDGET} values and characters at "
                                     f"*{clip(event.anchor, 40)} (an alias bomb?): write the values out, or use "
                                     "fewer aliases")
            return node
        node = super().compose_node(parent, index)
        if isinstance(node, yaml.ScalarNode):
            weight = 1 + len(node.value)
        elif isinstance(node, yaml.SequenceNode):
            weight = 1 + sum(self.weights[id(child)] for child in node.value)
        else:
            weight = 1 + sum(self.weights[id(k)] + self.weights[id(v)] for k, v in node.value)
        self.weights[id(node)] = weight
        return node

    def compose_mapping_node(self, anchor):
        node = super().compose_mapping_node(anchor)
        seen: dict[tuple, yaml.Node] = {}  # (tag, text) of a key -> where it is first written
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            first = seen.setdefault((key_node.tag, key_node.value), key_node)
            if first is not key_node:
                one, two = first.start_mark.line + 1, key_node.start_mark.line + 1
                where = f"on line {one}" if one == two else f"at lines {one} and {two}"
                raise _Refused(two, f"the key {clip(key_node.value, 40)} is written twice in one mapping, {where}: "
                                    "keep one (YAML would silently drop the first)")
        return node


def _yaml_load(text: str) -> Any:
    """``yaml.safe_load`` through ``_BoundedLoader``."""
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _yaml_compose(text: str):
    """``yaml.compose`` through ``_BoundedLoader``."""
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()


# sections that hold settings by name
_MAPPINGS = ("web", "llm", "store", "stages", "executor", "schedule", "pools", "alerts", "freshness", "instance")


def nearest(key: object, known) -> str:
    """'; did you mean release_size?' for the known key nearest to a mistyped one ('' when none is near)."""
    found = difflib.get_close_matches(clip(key, 200), [str(k) for k in known], n=1, cutoff=0.6)
    return f"; did you mean {found[0]}?" if found else ""


def config_line(cfg_path: str | os.PathLike, keys: tuple) -> int | None:
    """The line (1-based) of a key in the config file, or of the nearest enclosing key that is there.

    ``keys`` is the path as the file writes it: section names, keys, and list positions (``("sources", 0, "path")``)."""
    try:
        node = _yaml_compose(Path(cfg_path).read_text(encoding="utf-8"))
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
    dotted = ".".join(f"[{k}]" if isinstance(k, int) else clip(k, 40) for k in keys).replace(".[", "[")
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
        return _yaml_load(text)
    except _Refused as err:
        raise ConfigError(f"{cfg_path}:{err.line}: {err.problem}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = clip(" ".join(str(getattr(err, "problem", None) or err).split()), 200)
        raise ConfigError(f"{cfg_path}{where}: not valid YAML ({problem}): fix the file there") from None
    except ValueError as err:  # a value YAML reads but Python refuses to build, e.g. an integer of 5000 digits
        raise ConfigError(f"{cfg_path}: a value cannot be read ({clip(err, 120)}): fix the file") from None
    except RecursionError:
        raise ConfigError(f"{cfg_path}: nested too deep to be a config file") from None


def _check_shape(raw: dict, cfg_path: Path, known: set[str]) -> None:
    """Known sections of the right kind: a mapping where settings go, a list of mappings for sources, text for paths."""
    for key in raw:
        if key not in known:
            raise config_error(cfg_path, (key,), f"unknown key{nearest(key, known)} (the sections are: "
                                                 f"{', '.join(sorted(known))})")
    if "data_dir" in raw and not isinstance(raw["data_dir"], str):
        raise config_error(cfg_path, ("data_dir",), f"must be a folder path, not {shown(raw['data_dir'])}")
    for key in _MAPPINGS:
        if raw.get(key) is not None and not isinstance(raw[key], dict):
            raise config_error(cfg_path, (key,), f"must be a mapping of settings (e.g. '{key}: {{name: value}}'), "
                                                 f"not {shown(raw[key])}")
    sources = raw.get("sources")
    if sources is not None and not isinstance(sources, list):
        raise config_error(cfg_path, ("sources",), f"must be a list of sources ('- kind: datafeed'), not {shown(sources)}")
    for i, spec in enumerate(sources or []):
        if not isinstance(spec, dict):
            raise config_error(cfg_path, ("sources", i), f"a source is a mapping such as '{{kind: datafeed, path: "
                                                         f"feed.json}}', not {shown(spec)}")
        if not isinstance(spec.get("path", ""), str):
            raise config_error(cfg_path, ("sources", i, "path"), f"must be a path or a URL, not {shown(spec['path'])}")
    warc_paths = (raw.get("web") or {}).get("warc_paths", [])
    if not isinstance(warc_paths, list) or not all(isinstance(p, str) for p in warc_paths):
        raise config_error(cfg_path, ("web", "warc_paths"), f"must be a list of WARC paths, not {shown(warc_paths)}")
    if not isinstance((raw.get("stages") or {}).get("systems_dir") or "", str):
        raise config_error(cfg_path, ("stages", "systems_dir"), "must be a folder path")
    for name, value in (raw.get("pools") or {}).items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise config_error(cfg_path, ("pools", name), f"must be a whole number of steps >= 1, not {shown(value)}")
    _check_executor(raw.get("executor") or {}, cfg_path)
    _check_schedule(raw.get("schedule") or {}, cfg_path)


# the executor kinds and the settings each takes: what executors.executor_from_config reads, and nothing else
EXECUTOR_SETTINGS = {"in_process": (), "multiprocess": ("max_concurrent",), "celery": ("broker", "backend", "retries")}
SCHEDULE_SETTINGS = ("enabled", "cron")  # what schedules.quarterly_schedule reads (the cron is checked by Dagster)


def _check_executor(executor: dict, cfg_path: Path) -> None:
    """The ``executor:`` section as ``executor_from_config`` builds it: a known kind, only that kind's settings,
    each of the type Dagster's executor takes."""
    kind = executor.get("kind", "in_process")
    if not isinstance(kind, str) or kind not in EXECUTOR_SETTINGS:
        raise config_error(cfg_path, ("executor", "kind"), f"unknown executor{nearest(kind, EXECUTOR_SETTINGS)} "
                                                           f"(in_process, multiprocess or celery), not {shown(kind)}")
    takes = EXECUTOR_SETTINGS[kind]
    for key in executor:
        if key != "kind" and key not in takes:
            settings = f"its settings: {', '.join(takes)}" if takes else "it takes no settings"
            raise config_error(cfg_path, ("executor", key), f"not a setting of the {kind} executor"
                                                            f"{nearest(key, takes)} ({settings})")
    value = executor.get("max_concurrent", 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise config_error(cfg_path, ("executor", "max_concurrent"), f"must be a whole number of processes >= 0 "
                                                                     f"(0: one per CPU), not {shown(value)}")
    for key in ("broker", "backend"):  # left out (or empty): $VERITAS_CELERY_BROKER, else the local Redis
        value = executor.get(key)
        if value is not None and (not isinstance(value, str) or "://" not in value):
            raise config_error(cfg_path, ("executor", key), f"must be a URL such as redis://127.0.0.1:6379/0, "
                                                            f"not {shown(value)}")
    if "retries" in executor:
        value = executor["retries"]
        if not (isinstance(value, dict) and len(value) == 1 and next(iter(value)) in ("enabled", "disabled")
                and next(iter(value.values())) in (None, {})):
            raise config_error(cfg_path, ("executor", "retries"), f"must be {{enabled: {{}}}} or {{disabled: {{}}}}, "
                                                                  f"not {shown(value)}")


def _check_schedule(schedule: dict, cfg_path: Path) -> None:
    """The ``schedule:`` section's keys and their types (``config.check_config`` has Dagster check the cron)."""
    for key in schedule:
        if key not in SCHEDULE_SETTINGS:
            raise config_error(cfg_path, ("schedule", key), f"unknown key{nearest(key, SCHEDULE_SETTINGS)} (the "
                                                            f"settings: {', '.join(SCHEDULE_SETTINGS)})")
    if not isinstance(schedule.get("enabled", False), bool):
        raise config_error(cfg_path, ("schedule", "enabled"), f"must be true or false, not "
                                                              f"{shown(schedule['enabled'])}")
    if not isinstance(schedule.get("cron", ""), str):
        raise config_error(cfg_path, ("schedule", "cron"), f"must be a cron expression such as '0 3 8 1,4,7,10 *', "
                                                           f"not {shown(schedule['cron'])}")


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def log_level(default: str = "INFO") -> str:
    """``$VERITAS_LOG_LEVEL`` (any case), the console log level of the runs a command makes; ``default`` when unset.
    Set but empty or not a level: a one-line ``ConfigError`` naming the variable and the levels."""
    raw = os.environ.get("VERITAS_LOG_LEVEL")
    if raw is None:
        return default
    level = raw.strip().upper()
    if level not in LOG_LEVELS:
        said = "is empty" if not raw.strip() else f"is {shown(raw)}"
        raise ConfigError(f"VERITAS_LOG_LEVEL {said}: set it to one of {', '.join(LOG_LEVELS)} (any case), or unset "
                          "it")
    return level


def load_config(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """Read the YAML config; relative paths resolve against the config file's folder.

    The file's shape is checked here (sections, their kinds); the keys and values of each section are checked
    against the resources that read them by ``dagster_project.config.load_config``. Raises ``ConfigError``."""
    env = os.environ.get("VERITAS_CONFIG")
    given = "" if path is None else str(path)
    if given and not given.strip() and given != env:
        raise ConfigError(f"the config path is blank ({shown(given)}): give --config a YAML file")
    if not given.strip() and env is not None and not env.strip():
        raise ConfigError(f"VERITAS_CONFIG is set but blank ({shown(env)}): set it to a YAML file, or unset it to "
                          "read veritas.yaml")
    cfg_path = Path(path or os.environ.get("VERITAS_CONFIG") or DEFAULT_CONFIG).resolve()
    raw = _read(cfg_path)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise config_error(cfg_path, (), f"the config must be a mapping of sections (data_dir, sources, web, ...), "
                                         f"not {type(raw).__name__}")
    sections = {"data_dir", "sources", "web", "llm", "store", "stages", "executor", "schedule", "pools", "alerts",
                "freshness", "instance"}
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
            # where alerts go and when a release or the feed is late (dagster_project/alerts.py)
            "alerts": dict(raw.get("alerts") or {}), "freshness": dict(raw.get("freshness") or {}),
            # where the Dagster instance keeps its runs and events (dagster_project/core/instance.py)
            "instance": dict(raw.get("instance") or {}),
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
        if need & os.W_OK and _read_only_mount(found):
            raise ConfigError(f"{name} {found} is on a read-only file system: no permission makes it writable; "
                              f"{fix} on a writable disk")
        if not os.access(found, need):
            can = "read and written" if need & os.W_OK else "read"
            raise ConfigError(f"{name} {found} cannot be {can} by this user: give it the permissions "
                              f"(chmod u+rwx {found}), or {fix}")


def _read_only_mount(folder: Path) -> bool:
    """Whether ``folder`` lies on a file system mounted read-only (``statvfs``'s ST_RDONLY flag)."""
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # no statvfs (not POSIX), or the folder vanished: the access check decides
        return False
