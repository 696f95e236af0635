"""Typed polars frames from the pydantic records, validated at every stage boundary."""

import json
import types
import typing
from datetime import date, datetime
from typing import Any, Iterable, Literal

import polars as pl
from pydantic import BaseModel, ValidationError

from schemas.records import QuarantineRecord


def polars_dtype(annotation: Any) -> pl.DataType:
    """The polars dtype of a pydantic field annotation (Optional is nullable, Literal is its base type)."""
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin in (typing.Union, types.UnionType):
        return polars_dtype(args[0])
    if origin is Literal:
        return polars_dtype(type(args[0]))
    if origin in (list, tuple):
        return pl.List(polars_dtype(args[0]))
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return pl.Struct({name: polars_dtype(f.annotation) for name, f in annotation.model_fields.items()})
    simple = {str: pl.Utf8, int: pl.Int64, float: pl.Float64, bool: pl.Boolean, date: pl.Date, datetime: pl.Datetime("us")}
    if annotation in simple:
        return simple[annotation]
    raise TypeError(f"no polars dtype for {annotation!r}")


def polars_schema(model: type[BaseModel]) -> dict[str, pl.DataType]:
    return {name: polars_dtype(f.annotation) for name, f in model.model_fields.items()}


def to_frame(records: Iterable[BaseModel], model: type[BaseModel]) -> pl.DataFrame:
    """A frame with exactly the model's columns and dtypes, also when there are no records."""
    rows = [r.model_dump() for r in records]
    return pl.DataFrame(rows, schema=polars_schema(model), orient="row" if not rows else None)


def from_frame(df: pl.DataFrame, model: type[BaseModel]) -> list:
    """Re-validate a stored frame into records (the input boundary of a stage)."""
    return [model.model_validate(row) for row in df.iter_rows(named=True)]


def _json_default(value: Any) -> str:
    return value.isoformat() if isinstance(value, (date, datetime)) else repr(value)


def quarantine(stage: str, quarter: str, reason: str, record: Any, source: str = "") -> QuarantineRecord:
    text = record if isinstance(record, str) else json.dumps(record, ensure_ascii=False, default=_json_default)
    return QuarantineRecord(stage=stage, quarter=quarter, reason=reason, source=source, record=text[:20000])


def validation_reason(err: ValidationError) -> str:
    """A short, stable reason such as ``invalid:claim_text:string_too_short``."""
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "record"
    return f"invalid:{loc}:{first['type']}"


def validate_rows(
    rows: Iterable[dict], model: type[BaseModel], stage: str, quarter: str
) -> tuple[list, list[QuarantineRecord]]:
    """Split rows into valid records and quarantine entries with the validation reason."""
    good, bad = [], []
    for row in rows:
        try:
            good.append(model.model_validate(row))
        except ValidationError as err:
            bad.append(quarantine(stage, quarter, validation_reason(err), row))
    return good, bad
