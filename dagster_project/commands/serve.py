"""``veritas serve``: the deployment of docs/how-to/deploy.md on one machine, in one command. It writes the
instance's ``dagster.yaml`` from the config's ``instance:`` section, starts a local PostgreSQL cluster when
``instance.local_cluster`` names one (created with ``initdb`` on first use; otherwise the server of
``$VERITAS_POSTGRES_URL`` is used as it is), then ``dagster-daemon run`` (schedules, sensors, backfills, the run
queue, run monitoring and retries) and ``dagster-webserver`` (the UI and its GraphQL) on the project's
``workspace.yaml``. Ctrl-C (or SIGTERM) stops them all, the cluster last; when one of them exits by itself, the
others are stopped too and the command exits 1 naming it.

``veritas instance`` only writes (or checks) the instance's ``dagster.yaml`` and prints where it is and what it
keeps (``make dev`` runs it before ``dg dev``).

``PostgresCluster`` is a PostgreSQL cluster in a folder, driven with Debian's server binaries (``initdb``,
``pg_ctl``): ``tests/pg_support.py`` makes its throw-away clusters with it. ``initdb`` refuses to run as root, so as
root the cluster belongs to the ``postgres`` user (``runuser``), as Debian's own clusters do."""

import argparse
import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from dagster_project.core.config_file import PROJECT_ROOT, ConfigError
from dagster_project.core.instance import DRIVER, LOCAL_URL_FILE

PG_PACKAGE = "postgresql"  # Debian's package with the server binaries
MISSING_SERVER = (f"PostgreSQL's server binaries (initdb, pg_ctl) are not installed: install Debian's `{PG_PACKAGE}` "
                  f"package (`make system-deps` as root, or `apt-get install {PG_PACKAGE}`)")
SUPERUSER = "veritas"  # the cluster's superuser, whose password only the URL file and the environment hold
STOP_GRACE_S = 20.0  # what a process gets to stop after SIGTERM before SIGKILL


def register(subparsers) -> list[argparse.ArgumentParser]:
    p = subparsers.add_parser(
        "serve",
        help="start the Dagster daemon and webserver on the project's instance (and a local PostgreSQL when "
             "configured); Ctrl-C stops them",
        description="Writes <DAGSTER_HOME>/dagster.yaml from the config's instance: section, starts the local "
                    "PostgreSQL cluster of instance.local_cluster (if any), then `dagster-daemon run` and "
                    "`dagster-webserver` on workspace.yaml. Ctrl-C or SIGTERM stops them all; the command exits 1 "
                    "when one of them exits by itself.",
    )
    p.add_argument("--host", default="127.0.0.1", help="the webserver's address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=3000, help="the webserver's port (default 3000)")
    p.add_argument("--workspace", default=str(PROJECT_ROOT / "workspace.yaml"),
                   help="the Dagster workspace file (default: the project's workspace.yaml)")
    p.set_defaults(handler=run)
    i = subparsers.add_parser(
        "instance",
        help="write the Dagster instance's dagster.yaml from the config's instance: section, and say where it is",
        description="Writes <DAGSTER_HOME>/dagster.yaml (else <data_dir>/dagster/dagster.yaml) when the project's "
                    "file is missing or out of date; a dagster.yaml of your own (without the project's first line) "
                    "is left as it is. Opens nothing.",
    )
    i.set_defaults(handler=write_instance)
    return [p, i]


# ---- a PostgreSQL cluster in a folder ---------------------------------------------------------------------------

def server_binaries() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``: the one on PATH, else Debian's newest
    ``/usr/lib/postgresql/<version>/bin``; None when neither is installed."""
    found = shutil.which("initdb")
    if found and (Path(found).resolve().parent / "pg_ctl").exists():
        return Path(found).resolve().parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                      key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0)
    return versions[-1].parent if versions else None


class PostgresCluster:
    """A PostgreSQL cluster under ``folder`` (``data/``, its log, its socket, ``veritas-url``) listening on loopback
    ``port`` only, with password authentication for its superuser ``veritas``. ``fast``: no fsync (throw-away
    clusters of the tests)."""

    def __init__(self, folder: Path, port: int, fast: bool = False):
        self.folder, self.port, self.fast = Path(folder), int(port), fast
        self.data = self.folder / "data"
        self.bin = server_binaries()
        if self.bin is None:
            raise ConfigError(MISSING_SERVER)
        self.as_root = os.geteuid() == 0

    def _cmd(self, *args: str) -> list[str]:
        """A server command, as the ``postgres`` user when this process is root (initdb and postgres refuse root)."""
        if not self.as_root:
            return list(args)
        runuser = shutil.which("runuser") or shutil.which("runuser", path="/usr/sbin:/sbin")
        if runuser is None:
            raise ConfigError("running PostgreSQL as root needs `runuser` (util-linux) to hand it to the postgres user")
        return [runuser, "-u", "postgres", "--", *args]

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        done = subprocess.run(self._cmd(*args), capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise ConfigError(f"{Path(args[0]).name} failed for the PostgreSQL cluster in {self.folder}: "
                              f"{' | '.join(tail) or f'exit status {done.returncode}'}")
        return done

    def _own(self, path: Path) -> None:
        if self.as_root:
            import pwd

            user = pwd.getpwnam("postgres")
            os.chown(path, user.pw_uid, user.pw_gid)

    @property
    def url_file(self) -> Path:
        return self.folder / LOCAL_URL_FILE

    def initialized(self) -> bool:
        return (self.data / "PG_VERSION").exists() and self.url_file.exists()

    def init(self) -> None:
        """``initdb`` with a new random password for ``veritas``, kept only in ``veritas-url`` (mode 0600)."""
        if self.as_root:
            try:
                import pwd

                pwd.getpwnam("postgres")
            except KeyError:
                raise ConfigError(f"running PostgreSQL as root needs the `postgres` user, which Debian's "
                                  f"`{PG_PACKAGE}` package creates: install it") from None
        self.folder.mkdir(parents=True, exist_ok=True)
        self._own(self.folder)
        if self.as_root:  # the postgres user must pass through every folder above its own
            shut = [p for p in self.folder.resolve().parents if not os.stat(p).st_mode & 0o001]
            if shut:
                raise ConfigError(f"the postgres user cannot reach {self.folder}: {shut[0]} is closed to other users "
                                  f"(chmod o+x {shut[0]}), or choose another folder for instance.local_cluster")
        password = secrets.token_urlsafe(24)
        pwfile = self.folder / ".initdb-password"
        pwfile.write_text(password + "\n")
        os.chmod(pwfile, 0o600)
        self._own(pwfile)
        try:
            self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", SUPERUSER, f"--pwfile={pwfile}",
                      "--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-locale")
        finally:
            pwfile.unlink(missing_ok=True)
        self.write_url(password, "veritas")

    def write_url(self, password: str, database: str) -> None:
        self.url_file.write_text(self.url(database, password) + "\n")
        os.chmod(self.url_file, 0o600)

    def password(self) -> str:
        from urllib.parse import unquote, urlsplit

        return unquote(urlsplit(self.url_file.read_text().strip()).password or "")

    def url(self, database: str = "veritas", password: str | None = None) -> str:
        from urllib.parse import quote

        secret = self.password() if password is None else password
        return f"{DRIVER}://{SUPERUSER}:{quote(secret, safe='')}@127.0.0.1:{self.port}/{database}"

    def running(self) -> bool:
        if not (self.data / "PG_VERSION").exists():
            return False
        return subprocess.run(self._cmd(str(self.bin / "pg_ctl"), "-D", str(self.data), "status"),
                              capture_output=True).returncode == 0

    def start(self) -> None:
        """Start the server on loopback (its socket in the folder); returns once it accepts connections."""
        options = [f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories='{self.folder}'"]
        if self.fast:
            options.append("-c fsync=off -c synchronous_commit=off -c full_page_writes=off")
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "postgres.log"), "-w",
                  "-t", "60", "-o", " ".join(options), "start")

    def stop(self) -> None:
        if self.running():
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop")

    def create_database(self, name: str) -> str:
        """Create the database ``name`` unless it exists; returns its URL."""
        import psycopg2

        with contextlib.closing(psycopg2.connect(host="127.0.0.1", port=self.port, user=SUPERUSER,
                                                 password=self.password(), dbname="postgres")) as conn:
            conn.autocommit = True
            with conn.cursor() as cursor:
                cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
                if cursor.fetchone() is None:
                    cursor.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join((self.folder / "postgres.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


# ---- the commands -----------------------------------------------------------------------------------------------

def write_instance(args: argparse.Namespace) -> int:
    from dagster_project.config import load_config
    from dagster_project.core.instance import instance_section, storage_of, write_settings

    config = load_config(getattr(args, "config", None))
    settings, done = write_settings(config)
    storage = storage_of(settings.read_text(encoding="utf-8"))
    where = f" (the URL from ${instance_section(config)['postgres_url_env']})" if (
        storage == "postgres" and done != "own file") else ""
    print(f"[veritas] {settings}: {done}; {storage} storage{where}")
    return 0


def start_local_cluster(config: dict) -> PostgresCluster | None:
    """The config's local cluster, created on first use and started unless it runs; its URL is exported in the
    variable ``instance.postgres_url_env`` names (for this process and the ones it starts). None: no local cluster
    (SQLite, or the URL's server runs elsewhere). Returns the cluster only when this call started it."""
    from dagster_project.core.instance import instance_section, local_cluster

    section = instance_section(config)
    folder = local_cluster(config)
    if section["storage"] != "postgres" or folder is None:
        return None
    cluster = PostgresCluster(folder, section["local_port"])
    if not cluster.initialized():
        if cluster.data.exists() and any(cluster.data.iterdir()):
            raise ConfigError(f"{cluster.data} holds a PostgreSQL cluster that veritas did not make (no "
                              f"{cluster.url_file.name} beside it): point instance.local_cluster at another folder")
        print(f"[serve] creating the PostgreSQL cluster in {folder} (initdb)", flush=True)
        cluster.init()
    started = None
    if not cluster.running():
        print(f"[serve] starting PostgreSQL on 127.0.0.1:{cluster.port} ({folder})", flush=True)
        try:
            cluster.start()
        except ConfigError as err:
            raise ConfigError(f"{err} (its log: {folder / 'postgres.log'})") from None
        started = cluster
    try:
        os.environ[section["postgres_url_env"]] = cluster.create_database("veritas")
    except Exception:
        if started is not None:
            started.stop()
        raise
    return started


def _program(name: str) -> str:
    """A Dagster program of this Python's environment (dagster-daemon, dagster-webserver)."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if not found:
        raise ConfigError(f"{name} is not installed beside {sys.executable}: install the pinned stack (`make install`)")
    return found


def _stop(proc: subprocess.Popen, grace: float = STOP_GRACE_S) -> None:
    """SIGTERM the process's group, then SIGKILL what is left of it after ``grace`` seconds."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):  # the group: a code server or run worker the process left
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)


def run(args: argparse.Namespace) -> int:
    from dagster_project.config import load_config
    from dagster_project.core.instance import instance_section, project_instance

    config = load_config(getattr(args, "config", None))
    workspace = Path(args.workspace).resolve()
    if not workspace.is_file():
        raise ConfigError(f"workspace file {workspace} not found: give --workspace the project's workspace.yaml")
    received: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: received.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    cluster = start_local_cluster(config)
    procs: dict[str, subprocess.Popen] = {}
    try:
        project_instance(config).dispose()  # the storage's tables, once, before two processes open it together
        env = {**os.environ, "VERITAS_CONFIG": config["path"], "DAGSTER_HOME": os.environ["DAGSTER_HOME"]}
        commands = {
            "daemon": [_program("dagster-daemon"), "run", "-w", str(workspace)],
            "webserver": [_program("dagster-webserver"), "-w", str(workspace), "-h", args.host, "-p", str(args.port)],
        }
        for name, cmd in commands.items():
            if received:
                break
            procs[name] = subprocess.Popen(cmd, cwd=workspace.parent, env=env, start_new_session=True)
        if len(procs) == len(commands):
            storage = instance_section(config)["storage"]
            print(f"[serve] Dagster UI on http://{args.host}:{args.port} ; instance {env['DAGSTER_HOME']} "
                  f"({storage}); daemon pid {procs['daemon'].pid}, webserver pid {procs['webserver'].pid}; Ctrl-C "
                  "stops them", flush=True)
        exited = None
        while not received and exited is None:
            exited = next((n for n, p in procs.items() if p.poll() is not None), None)
            time.sleep(0.2)
        if exited is not None:
            print(f"[serve] the {exited} exited by itself (status {procs[exited].returncode}): stopping the rest",
                  file=sys.stderr, flush=True)
        else:
            print(f"[serve] {signal.Signals(received[0]).name} received: stopping the webserver and the daemon",
                  flush=True)
        return 1 if exited is not None else 0
    finally:
        for name in ("webserver", "daemon"):
            if name in procs:
                _stop(procs[name])
        if cluster is not None:
            print(f"[serve] stopping PostgreSQL ({cluster.folder})", flush=True)
            cluster.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
