"""The config file's ``instance:`` section: where the project's Dagster instance keeps its runs, events and schedules.

``dagster_project.core.instance`` writes it into ``<DAGSTER_HOME>/dagster.yaml``; ``dagster_project.config`` checks
the section against this model (its own module, so that the read-only commands, which import the instance module,
never pay for building a pydantic model). A secret never goes in the file: the PostgreSQL URL, password included,
is read from the variable that ``postgres_url_env`` names, and ``dagster.yaml`` names that variable too."""

import re
from typing import Literal

import pydantic
from pydantic import Field, field_validator

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a variable's name, never its value (a URL does not match)


class InstanceSettings(pydantic.BaseModel):
    """Which storage the Dagster instance uses (runs, events, schedules): one machine's SQLite files, or PostgreSQL."""

    model_config = pydantic.ConfigDict(extra="forbid")

    # `sqlite`: files under the instance folder, for one machine; `postgres`: a PostgreSQL server that the daemon,
    # the webserver, the run workers and the `veritas` commands of several machines share (through dagster-postgres)
    storage: Literal["sqlite", "postgres"] = "sqlite"
    # the NAME of the variable that holds the PostgreSQL URL (postgresql://user:password@host:5432/db), never the URL
    postgres_url_env: str = "VERITAS_POSTGRES_URL"
    # a folder for a local PostgreSQL cluster that `veritas serve` creates (initdb, Debian's `postgresql` package) and
    # starts on loopback, relative to the config file; empty: the server of the URL is already running elsewhere
    local_cluster: str = ""
    local_port: int = Field(5433, ge=1024, le=65535)  # the local cluster's port, on 127.0.0.1 only

    @field_validator("postgres_url_env")
    @classmethod
    def _a_name(cls, value: str) -> str:
        if not ENV_NAME.fullmatch(value):
            raise ValueError("must be the NAME of a variable (such as VERITAS_POSTGRES_URL) that holds the URL; the "
                             "URL and its password go in that variable, never in the file")
        return value
