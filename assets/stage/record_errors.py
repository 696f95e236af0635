"""A record that raises drops as ``error:<Type>`` with what a maintainer needs to find the fault, while the stage's
error budget allows; past it the stage fails. ``map_records`` runs a stage's function over its records that way."""

import os
import sysconfig
import time
import traceback
from collections import Counter
from pathlib import Path

from assets.stage.tables import StageYield

# frames outside these are the code that failed (the project's, or a test's); the report names the innermost of them
LIBRARY_DIRS = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")})


ROOT = str(Path(__file__).resolve().parents[2])


class RecordError(str):
    """The drop reason of a record that raised (``error:<Type>``), carrying what a maintainer needs to find the fault:
    the message, where it was raised and the traceback's text. A ``str``, so it pickles across worker processes
    and counts like any other reason."""

    message: str = ""
    where: str = ""
    trace: str = ""

    @classmethod
    def of(cls, err: BaseException) -> "RecordError":
        out = cls(f"error:{type(err).__name__}")
        frames = traceback.extract_tb(err.__traceback__)
        ours = [f for f in frames if not f.filename.startswith(LIBRARY_DIRS)] or frames
        out.message = str(err)[:300]
        if ours:
            name = os.path.relpath(ours[-1].filename, ROOT) if ours[-1].filename.startswith(ROOT) else ours[-1].filename
            out.where = f"{name}:{ours[-1].lineno} in {ours[-1].name}"
        out.trace = "".join(traceback.format_exception(type(err), err, err.__traceback__))[-4000:]
        return out


def describe_record(item) -> str:
    """A record named by its ids (claim, review), or a short repr: the example an error report shows."""
    for part in item if isinstance(item, tuple) else (item,):
        ids = [f"{k}={getattr(part, k)}" for k in ("claim_id", "review_id", "review_url") if getattr(part, k, None)]
        if ids:
            return ", ".join(ids[:2])
    return repr(item)[:200]


class ErrorBudgetExceeded(Exception):
    """More records of a stage raised than its error budget allows: the stage fails instead of dropping them."""

    stops_stage = True


class ErrorBudget:
    """How many records of a stage may fail with an error before the stage itself fails: more than ``share`` of
    its records or ``minimum`` records, whichever is more (stages.error_budget_share / error_budget_min). Each
    error is logged with its cause and where it was raised; past the budget the stage stops, naming the most
    frequent error type, one record it hit, where it was raised, and that error's traceback."""

    def __init__(self, stage: str, total: int, share: float = 0.02, minimum: int = 5, log=None):
        self.stage, self.total, self.log = stage, total, log
        self.allowed = max(int(minimum), int(share * total))
        self.errors: list[tuple[RecordError, str]] = []

    @classmethod
    def for_stage(cls, settings, stage: str, total: int, log=None) -> "ErrorBudget":
        """The budget of a stage from its ``ErrorBudgetSettings`` (stages.error_budget_share / error_budget_min)."""
        return cls(stage, total, settings.error_budget_share, settings.error_budget_min, log)

    def note(self, item, error: BaseException | str) -> RecordError:
        """Count one failed record; raises ErrorBudgetExceeded when the errors pass the budget."""
        err = error if isinstance(error, RecordError) else (
            RecordError.of(error) if isinstance(error, BaseException) else RecordError(error))
        record = describe_record(item)
        self.errors.append((err, record))
        if self.log:
            self.log.warning(f"{self.stage}: {record} failed: {err}: {err.message or '(no message)'} "
                             f"[{err.where or 'raised in a worker process'}]")
        if len(self.errors) > self.allowed:
            raise ErrorBudgetExceeded(self.report())
        return err

    def report(self) -> str:
        kinds = Counter(str(e) for e, _ in self.errors)
        kind, n = kinds.most_common(1)[0]
        err, record = next((e, r) for e, r in self.errors if str(e) == kind)
        others = ", ".join(f"{k} x{v}" for k, v in kinds.most_common()[1:])
        return (f"{self.stage}: {len(self.errors)} of {self.total} records failed with an error, over the error budget "
                f"of {self.allowed} (stages.error_budget_share / error_budget_min). Most frequent: {kind} x{n}"
                + (f" (also {others})" if others else "") + f". Example record: {record}. {kind}: "
                f"{err.message or '(no message)'}; raised at {err.where or 'an unknown place (a worker process)'}."
                + (f" Its traceback:\n{err.trace}" if err.trace else " No traceback came back with it."))


PROGRESS_EVERY_S = 2.0  # map_records' progress lines, at most one per this many seconds


def map_records(stage: str, items: list, fn, stats: StageYield, log=None, budget: ErrorBudget | None = None) -> list:
    """Apply ``fn(item) -> (record | list of records | None, drop reason)`` to every item, with progress.

    An item that raises, or whose reason is an ``error:<Type>``, is logged and counted as that drop, within the
    stage's error budget (``budget``; by default 2% of the items or 5, whichever is more); past it the stage fails.
    """
    budget = budget or ErrorBudget(stage, len(items), log=log)
    out: list = []
    logged = time.monotonic()
    for i, item in enumerate(items, 1):
        try:
            record, reason = fn(item)
        except Exception as err:  # noqa: BLE001 - one bad record must not lose the others
            if getattr(err, "stops_stage", False):  # e.g. the LLM budget: the whole stage stops, loudly
                raise
            record, reason = None, budget.note(item, err)
        else:
            if record is None and str(reason).startswith("error:"):
                reason = budget.note(item, reason)
        if record is None:
            stats.drop(str(reason))
        else:
            out.extend(record if isinstance(record, list) else [record])
        # a line per 10 items, at most one per PROGRESS_EVERY_S: a stage whose items were prefetched goes through
        # them in well under a second, and each line is an event the instance stores (3,000 claims: 3 s)
        if log and (i == len(items) or (i % 10 == 0 and time.monotonic() - logged >= PROGRESS_EVERY_S)):
            log.info(f"{stage}: {i}/{len(items)} done, {len(out)} kept")
            logged = time.monotonic()
    return out
