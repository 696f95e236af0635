"""The one config file (YAML) that chooses the sources, the web mode, the models, the store and the data dir."""

import functools
import inspect
import os
import typing
from typing import Any

import pydantic

from dagster_project.core import config_file
from dagster_project.core.config_file import (  # noqa: F401
    DEFAULT_CONFIG,
    PROJECT_ROOT,
    ConfigError,
    clip,
    config_error,
    nearest,
    shown,
)
from dagster_project.stage_settings import STAGE_SETTINGS


# ---- checking a config file against the resources that read it ------------------------------------------------------


@functools.cache  # built once: every command loads the config at its start
def stages_model() -> type[pydantic.BaseModel]:
    """Every key of the flat ``stages:`` section, each with the field of the stage settings model that owns it
    (stage_settings.STAGE_SETTINGS): the file is checked as one section, and read as one model per stage."""
    fields = {name: (field.annotation, field) for model in STAGE_SETTINGS.values()
              for name, field in model.model_fields.items()}
    return pydantic.create_model("StagesSection", __config__=pydantic.ConfigDict(extra="forbid"), **fields)


def _section_models() -> dict[str, type]:
    from dagster_project.alerts import AlertsResource, FreshnessSettings
    from dagster_project.core.instance_settings import InstanceSettings
    from dagster_project.resources.llm import LLMResource
    from dagster_project.resources.store import StoreResource
    from dagster_project.resources.web import WebResource

    return {"stages": stages_model(), "web": WebResource, "llm": LLMResource, "store": StoreResource,
            "alerts": AlertsResource, "freshness": FreshnessSettings, "instance": InstanceSettings}


def _nested_model(annotation: Any) -> tuple[type | None, bool]:
    """(the config model a field holds, whether it holds a list of them), or (None, False)."""
    many = typing.get_origin(annotation) is list
    inner = typing.get_args(annotation)[0] if many else annotation
    if inspect.isclass(inner) and issubclass(inner, pydantic.BaseModel):
        return inner, many
    return None, False


def _unknown_key(values: dict, model: type, keys: tuple) -> tuple[tuple, str] | None:
    """(path, "; did you mean ...?") of the first key that no field of ``model`` (or of a model in it) takes."""
    fields = model.model_fields
    for key, value in values.items():
        if key not in fields:
            return (*keys, key), nearest(key, fields)
        inner, many = _nested_model(fields[key].annotation)
        if inner is None:
            continue
        entries = list(enumerate(value)) if many and isinstance(value, list) else [] if many else [(None, value)]
        for i, entry in entries:
            if isinstance(entry, dict):
                found = _unknown_key(entry, inner, (*keys, key) if i is None else (*keys, key, i))
                if found:
                    return found
    return None


def _as_written(keys: tuple) -> tuple:
    """A path in the loaded config as the file writes it (the sources move under stages when loaded)."""
    return keys[1:] if keys[:2] == ("stages", "sources") else keys


def check_config(config: dict) -> None:
    """Every section against the resource that reads it: an unknown key (with the nearest known one), a value of
    the wrong type or out of its range raise ``ConfigError`` naming the file, the line and the key."""
    path = config["path"]
    for section, model in _section_models().items():
        values = config.get(section) or {}  # a section the file leaves out: the model's defaults
        unknown = _unknown_key(values, model, (section,))
        if unknown:
            hint = unknown[1] or " (the keys and their meanings: docs/reference/configuration.md)"
            raise config_error(path, _as_written(unknown[0]), f"unknown key{hint}")
        try:
            model(**values)
        except pydantic.ValidationError as err:
            first = err.errors()[0]
            message = clip(first["msg"].replace("Input should be", "must be").replace("Value error, ", ""), 200)
            raise config_error(path, _as_written((section, *first["loc"])),
                               f"{message}, not {shown(first.get('input'))}") from None
    _check_cron(config)


def _check_cron(config: dict) -> None:
    """``schedule.cron`` as Dagster reads it (config_file checked that it is text): five fields, or ``@daily``..."""
    import dagster as dg

    cron = (config.get("schedule") or {}).get("cron")
    if cron is None:
        return
    try:
        dg.ScheduleDefinition(name="cron_check", cron_schedule=cron, job_name="cron_check")
    except dg.DagsterInvalidDefinitionError:
        raise config_error(config["path"], ("schedule", "cron"), f"not a cron expression Dagster reads (five fields "
                                                                 f"such as '0 3 8 1,4,7,10 *', or @daily), not "
                                                                 f"{shown(cron)}") from None


def load_config(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """``config_file.load_config``, then ``check_config``: what the pipeline's resources are built from."""
    config = config_file.load_config(path)
    check_config(config)
    return config
