"""A real PostgreSQL server for the tests: a throw-away cluster (``initdb`` + ``pg_ctl`` from Debian's ``postgresql``
package, through ``dagster_project.commands.serve.PostgresCluster``) in a temporary folder, on a free loopback port,
without fsync, removed afterwards. As root the cluster belongs to the ``postgres`` user (``initdb`` refuses root), so
its folder is made under the system's temporary folder, which that user can reach.

Where the server binaries are missing the fixture skips, naming the package; in CI (``VERITAS_STRICT_SKIPS=1``,
tests/skip_guard.py) that skip fails the run, and ``.ci/run`` installs the package (``make system-deps``)."""

import contextlib
import shutil
import tempfile
from pathlib import Path

import pytest

from dagster_project.commands.serve import MISSING_SERVER, PostgresCluster, server_binaries
from tests.ops_support import free_port


@contextlib.contextmanager
def postgres_cluster():
    """A started throw-away cluster; yields the ``PostgresCluster`` (``create_database(name)`` gives a URL)."""
    if server_binaries() is None:
        pytest.skip(MISSING_SERVER)
    folder = Path(tempfile.mkdtemp(prefix="veritas-pg-"))
    folder.chmod(0o711)  # mkdtemp's 0700: the postgres user (as root) must pass through to its cluster folder
    cluster = PostgresCluster(folder / "cluster", free_port(), fast=True)
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        try:
            cluster.stop()
        finally:
            shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def postgres():
    """A throw-away PostgreSQL cluster for the module's tests; each test makes its own database in it."""
    with postgres_cluster() as cluster:
        yield cluster
