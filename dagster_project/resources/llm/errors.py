"""Why a model call does not give an answer: a refusal, a dead member endpoint (``ModelUnavailable``), the
process-wide stop that a signal requests (``RunStopped``, ``request_stop``, ``stop_requested``), and the quarter's
spend reaching ``llm.budget_usd`` (``BudgetExceeded``)."""

import threading

import dagster as dg


class RefusalError(ValueError):
    """The model declined to answer, in any of the shapes ``refusals`` recognizes (its message is the provider's
    reason)."""


class ModelUnavailable(dg.Failure):
    """A member's endpoint is dead (nothing listens, or the embedded server process is gone): the stage stops."""

    stops_stage = True  # map_records lets it through at once instead of counting it as one item's failure

    def __init__(self, message: str):
        super().__init__(description=message, allow_retries=False)  # a step retry would meet the same dead endpoint


class RunStopped(dg.Failure):
    """The process was asked to stop (SIGINT/SIGTERM): no more model calls, and no stage output is written."""

    stops_stage = True

    def __init__(self, message: str):
        super().__init__(description=message, allow_retries=False)


_STOP = threading.Event()  # process-wide: a signal stops every resource copy Dagster made
_STOP_REASON: list[str] = []


def request_stop(reason: str) -> None:
    """Every later model call raises RunStopped (a signal handler calls this before stopping the servers)."""
    _STOP_REASON[:] = [reason]
    _STOP.set()


def stop_requested() -> str:
    """Why the process is stopping, or '' while it is not."""
    return (_STOP_REASON[0] if _STOP_REASON else "stop requested") if _STOP.is_set() else ""


class BudgetExceeded(RuntimeError):
    """The quarter's model spend reached ``llm.budget_usd``: the stage stops (answers so far stay cached)."""

    stops_stage = True  # map_records lets it through instead of counting it as one item's failure
