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


# The frame form of each field validator in schemas.records: True where the validator would refuse the value. A model
# with a validator not named here has every row checked by pydantic (correct, only slower).
FRAME_RULES = {
    "Review._http_url": lambda col: ~(col.str.starts_with("http://") | col.str.starts_with("https://")),
}
_PLAIN_CONFIG = {"extra", "frozen"}  # model settings that change no value and refuse none


def _suspect(col: pl.Expr, annotation: Any, metadata: list) -> pl.Expr | None:
    """True where pydantic might refuse the column's value (None: no frame form, every row must go to pydantic)."""
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin in (typing.Union, types.UnionType):
        if len(args) != 1:
            return None
        inner = _suspect(col, args[0], metadata)
        return None if inner is None else col.is_not_null() & inner
    checks = [col.is_null()]
    for rule in metadata:  # Field(min_length=..., max_length=...) on a str: counted in characters, as Python does
        kind = type(rule).__name__  # pydantic's annotated_types.MinLen / MaxLen
        if annotation is str and kind == "MinLen":
            checks.append(col.str.len_chars() < rule.min_length)
        elif annotation is str and kind == "MaxLen":
            checks.append(col.str.len_chars() > rule.max_length)
        else:
            return None
    if origin is Literal:
        checks.append(~col.is_in(list(typing.get_args(annotation))))
    elif origin is list:
        if args[0] not in (str, int, float, bool, date):
            return None
        checks.append(col.list.eval(pl.element().is_null()).list.any())
    elif annotation not in (str, int, float, bool, date, datetime):
        return None  # nested models and the rest: pydantic decides
    return pl.any_horizontal(checks).fill_null(True)


def _suspects(df: pl.DataFrame, model: type[BaseModel]) -> pl.Expr | None:
    """True for the rows of ``df`` that pydantic might refuse; None when the frame cannot tell (a column missing or of
    another dtype than the model's, a validator or setting without a frame form)."""
    if set(model.model_config) - _PLAIN_CONFIG or model.__pydantic_decorators__.model_validators:
        return None
    schema = polars_schema(model)
    checks = []
    for name, field in model.model_fields.items():
        if name not in df.columns or df.schema[name] != schema[name]:
            return None
        check = _suspect(pl.col(name), field.annotation, field.metadata)
        if check is None:
            return None
        checks.append(check)
    for validator in model.__pydantic_decorators__.field_validators.values():
        rule = FRAME_RULES.get(getattr(validator.func, "__func__", validator.func).__qualname__)
        if rule is None:
            return None
        checks += [rule(pl.col(name)).fill_null(True) for name in validator.info.fields]
    return pl.any_horizontal(checks) if checks else pl.lit(False)


def validate_frame(
    df: pl.DataFrame, model: type[BaseModel], stage: str, quarter: str
) -> tuple[pl.DataFrame, list[QuarantineRecord]]:
    """``validate_rows`` for a frame, giving the same valid rows (as ``to_frame`` would) and the same quarantine.

    Only the rows that column checks cannot vouch for (nulls, lengths, validators) go through pydantic, which then
    decides and words the reason exactly as ``validate_rows`` does; the others are kept as they are."""
    schema = polars_schema(model)
    suspects = _suspects(df, model)
    if suspects is None:  # the frame cannot tell: every row through pydantic
        good, bad = validate_rows(df.iter_rows(named=True), model, stage, quarter)
        return to_frame(good, model), bad
    flagged = df.select(suspects.alias("_suspect")).to_series()
    if not flagged.any():
        return df.select(*schema).rechunk(), []
    refused = flagged.clear(n=df.height).fill_null(False)
    bad = []
    for i in flagged.arg_true().to_list():
        _good, one = validate_rows([df.row(i, named=True)], model, stage, quarter)
        if one:
            bad += one
            refused[i] = True
    return df.filter(~refused).select(*schema).rechunk(), bad
