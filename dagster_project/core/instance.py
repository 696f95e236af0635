"""The project's Dagster instance: a persistent one under the data dir (``dagster dev`` with the same
``DAGSTER_HOME`` shows the same runs and backfills), with the config's pool limits set on it.

Its ``dagster.yaml`` follows the config file's ``instance:`` section (``core/instance_settings.py``): SQLite files
under the instance folder (the default), or PostgreSQL through dagster-postgres, whose URL (password included) is
only ever in the environment: the file names the variable (``postgres_url: {env: VERITAS_POSTGRES_URL}``).

The file the project writes starts with ``MARKER``, and every command rewrites it when what the project manages in
it changed (another storage, another core count). A ``dagster.yaml`` without the marker is the user's own: it is
left as it is, and used as it is, unless the config's ``instance.storage`` names another storage than the file
uses, which is an error saying so (delete the file to let veritas write it, or edit it). A file written by an
earlier version of the project (without the marker) is recognised and rewritten."""

import json
import os
import re
import threading
from pathlib import Path
from urllib.parse import urlsplit

from dagster_project.core.config_file import ConfigError
from dagster_project.core.dagster_private import PRIVATE

MARKER = "# written by veritas from the config's instance: section (dagster_project/core/instance.py); " \
         "remove this line to keep your own edits"
DEFAULTS = {"storage": "sqlite", "postgres_url_env": "VERITAS_POSTGRES_URL", "local_cluster": "", "local_port": 5433}
# the driver dagster-postgres brings (psycopg2-binary): SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3
DRIVER = "postgresql+psycopg2"
LOCAL_URL_FILE = "veritas-url"  # in a local cluster's folder (`veritas serve`): its URL, readable by its owner only

# runs wait in the instance's queue; as many run at once as there are cores (each run is a process of its own); a
# code server on a busy machine may take minutes to import the definitions
SETTINGS = (f"telemetry:\n  enabled: false\nrun_queue:\n  max_concurrent_runs: {os.cpu_count() or 2}\n"
            "code_servers:\n  local_startup_timeout: 900\n")
# where a daemon serves the instance (`veritas serve`, `dagster dev`): it fails a run stuck in STARTING (its worker
# never came up) and cancels one stuck in CANCELING; a failed run is launched again from its failure as often as its
# job's `dagster/max_retries` tag says (definitions.py), never one of a cancelled backfill
DAEMON = "run_monitoring:\n  enabled: true\nrun_retries:\n  enabled: true\n"
# all events in one SQLite file in WAL mode: Dagster's default opens, creates and syncs a database file per run,
# which cost about 2 s a run (more than a quarter's ingestion) in a 42-quarter backfill
EVENT_LOG_MODULE, EVENT_LOG_CLASS = PRIVATE["ConsolidatedSqliteEventLogStorage"]
EVENT_LOG = (f"event_log_storage:\n  module: {EVENT_LOG_MODULE}\n  class: {EVENT_LOG_CLASS}\n"
             "  config:\n    base_dir: {base_dir}\n")
# runs, events and schedules in PostgreSQL; the URL from the variable, never in the file
POSTGRES = "storage:\n  postgres:\n    postgres_url:\n      env: {env}\n"
# what earlier versions wrote, without the marker: recognised as the project's, and rewritten
LEGACY = re.compile(re.escape("telemetry:\n  enabled: false\nrun_queue:\n  max_concurrent_runs: ") + r"\d+\n"
                    + re.escape("code_servers:\n  local_startup_timeout: 900\n")
                    + re.escape(EVENT_LOG.split("{base_dir}")[0]) + r'"[^"\n]*"\n')


def apply_pools(instance, config: dict) -> dict[str, int]:
    """Set the instance's pool limits from the config's ``pools:`` (e.g. {llm: 2, web: 4}); others stay as they are.

    The limits live in the instance's storage, so they bind every run of it, whoever launches it (the CLI, a
    backfill, the UI, a schedule)."""
    for pool, limit in config.get("pools", {}).items():
        instance.event_log_storage.set_concurrency_slots(pool, limit)
    return config.get("pools", {})


def instance_home(config: dict) -> Path:
    """The instance folder: ``$DAGSTER_HOME``, else ``<data_dir>/dagster``."""
    return Path(os.environ.get("DAGSTER_HOME") or Path(config["data_dir"]) / "dagster")


def instance_section(config: dict) -> dict:
    """The config's ``instance:`` section with its defaults (``core/instance_settings.py`` checks it)."""
    return {**DEFAULTS, **(config.get("instance") or {})}


def local_cluster(config: dict) -> Path | None:
    """The folder of the local PostgreSQL cluster that ``veritas serve`` starts (relative to the config file), or
    None when the config names none."""
    folder = instance_section(config)["local_cluster"]
    if not folder:
        return None
    return Path(folder) if os.path.isabs(folder) else (Path(config["path"]).parent / folder).resolve()


def settings_text(config: dict, home: Path) -> str:
    """The ``dagster.yaml`` the project writes for ``config``: the marker, the run queue, the daemon's monitoring
    and retries, and the storage (the consolidated SQLite event log, or PostgreSQL from the named variable)."""
    section = instance_section(config)
    storage = (POSTGRES.format(env=section["postgres_url_env"]) if section["storage"] == "postgres"
               else EVENT_LOG.format(base_dir=json.dumps(str(home.resolve() / "history"))))
    return f"{MARKER}\n{SETTINGS}{DAEMON}{storage}"


def storage_of(text: str) -> str:
    """``postgres`` when a dagster.yaml keeps anything in PostgreSQL, ``sqlite`` when it keeps all in Dagster's
    SQLite storage (its own choice or the default), else ``other`` (MySQL, a custom class)."""
    import yaml

    try:
        chosen = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        return "other"
    if not isinstance(chosen, dict):
        return "other"
    storage = chosen.get("storage") if isinstance(chosen.get("storage"), dict) else {}
    parts = ("run_storage", "event_log_storage", "schedule_storage")
    modules = [str(chosen[k].get("module", "")) for k in parts if isinstance(chosen.get(k), dict)]
    if "postgres" in storage or any("postgres" in m for m in modules):
        return "postgres"
    if set(storage) - {"sqlite"} or any(not m.startswith("dagster.") for m in modules):  # Dagster's own SQLite
        return "other"
    return "sqlite"


def is_projects(text: str) -> bool:
    """Whether a dagster.yaml is the one the project writes (its marker, or an earlier version's exact text)."""
    return text.startswith(MARKER + "\n") or LEGACY.fullmatch(text) is not None


def write_settings(config: dict) -> tuple[Path, str]:
    """Write ``<home>/dagster.yaml`` for the config when the project's file is missing or out of date; returns the
    file and what was done: ``written``, ``unchanged`` or ``own file`` (the user's, left as it is). A user's file
    that keeps another storage than ``instance.storage`` names explicitly is a ``ConfigError``."""
    home = instance_home(config)
    home.mkdir(parents=True, exist_ok=True)
    settings = home / "dagster.yaml"
    wanted = settings_text(config, home)
    try:
        found = settings.read_text(encoding="utf-8")
    except FileNotFoundError:
        found = None
    if found == wanted:
        return settings, "unchanged"
    if found is not None and not is_projects(found):
        asked = (config.get("instance") or {}).get("storage")
        if asked and storage_of(found) != asked:
            raise ConfigError(f"{settings} is your own (it lacks the line '{MARKER[:40]}...') and keeps "
                              f"{storage_of(found)} storage, but instance.storage in {config.get('path')} asks for "
                              f"{asked}: delete that file to let veritas write it, or change one of the two")
        return settings, "own file"
    temporary = settings.with_name(f".dagster.yaml.{os.getpid()}.{threading.get_ident()}")
    temporary.write_text(wanted, encoding="utf-8")
    os.replace(temporary, settings)  # a process opening the instance meanwhile reads the old file or the new one
    return settings, "written"


def postgres_url(config: dict) -> str:
    """The PostgreSQL URL of the instance: the variable that ``instance.postgres_url_env`` names, else the URL that
    ``veritas serve`` left in its local cluster's folder (the variable is then set in this process, for Dagster and
    for the processes it starts). A ``ConfigError`` says what to set when neither is there."""
    section = instance_section(config)
    name = section["postgres_url_env"]
    url = os.environ.get(name, "").strip()
    cluster = local_cluster(config)
    if not url and cluster is not None and (cluster / LOCAL_URL_FILE).is_file():
        url = (cluster / LOCAL_URL_FILE).read_text(encoding="utf-8").strip()
        os.environ[name] = url
    if not url:
        started = (f" or start the local cluster {cluster} with `veritas serve`" if cluster is not None else "")
        raise ConfigError(f"instance.storage is postgres but ${name} is not set: export {name}="
                          f"postgresql://USER:PASSWORD@HOST:5432/DB{started}, or set instance.storage: sqlite in "
                          f"{config.get('path')}")
    scheme = urlsplit(url).scheme
    if scheme not in ("postgresql", "postgres", DRIVER):
        raise ConfigError(f"${name} is not a PostgreSQL URL (it must start with postgresql://): set it to "
                          "postgresql://USER:PASSWORD@HOST:5432/DB")
    if scheme != DRIVER:  # SQLAlchemy 2.1 reads postgresql:// as psycopg 3, which is not installed: name psycopg2
        url = f"{DRIVER}{url[len(scheme):]}"
        os.environ[name] = url  # for Dagster here, and for the daemon, webserver and run workers started from here
    return url


def where(url: str) -> str:
    """``host:port/db`` of a PostgreSQL URL, without the user and the password (for messages)."""
    parts = urlsplit(url)
    return f"{parts.hostname or 'localhost'}:{parts.port or 5432}{parts.path or ''}"


def project_instance(config: dict):
    """The instance of ``$DAGSTER_HOME``, else ``<data_dir>/dagster``, its ``dagster.yaml`` written from the
    config's ``instance:`` section (``write_settings``); ``DAGSTER_HOME`` is set to it, so that run workers and code
    servers started from here open the same one. PostgreSQL that cannot be reached is one ``ConfigError`` line."""
    import dagster as dg

    settings, done = write_settings(config)
    # the project's file names the variable: it must hold the URL (a user's own file is used as it is)
    url = postgres_url(config) if done != "own file" and instance_section(config)["storage"] == "postgres" else None
    os.environ["DAGSTER_HOME"] = str(settings.parent)
    try:
        instance = dg.DagsterInstance.get()
    except Exception as err:
        if url is None or not type(err).__module__.startswith(("dagster_postgres", "sqlalchemy", "psycopg2")):
            raise
        cause = err
        while cause.__cause__ is not None:
            cause = cause.__cause__
        first = (str(cause).strip().splitlines() or [type(cause).__name__])[0][:200]
        raise ConfigError(f"the Dagster instance's PostgreSQL server at {where(url)} cannot be used ({first}): "
                          "start it (or `veritas serve` with instance.local_cluster), or fix "
                          f"${instance_section(config)['postgres_url_env']}") from None
    apply_pools(instance, config)
    return instance
