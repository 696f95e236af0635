"""Quarter labels (``2025Q4``) and Dagster partition keys (``2025-10``), without importing Dagster: the read-only
commands use them and must start fast. ``partitions`` builds the Dagster partitions on them."""

import re
from datetime import date, datetime, timezone

QUARTER_START = "2016-01"
# The dates a review may carry: from the first partition's first day to the end of the century. Outside it a date
# (year 9999, year 1) anchors no partition that any command can reach: stage 1 quarantines it as date_out_of_range.
# A fixed end, not today: the same feed must give the same snapshot whenever it is parsed.
FIRST_DAY, LAST_DAY = date(2016, 1, 1), date(2099, 12, 31)

_LABEL = re.compile(r"^\s*(\d{4})\s*-?\s*[Qq]\s*([1-4])\s*$")
_KEY = re.compile(r"^\s*(\d{4})-(\d{2})(?:-(\d{2}))?\s*$")


def quarter_of(day: date | datetime) -> str:
    """The quarter label (``2025Q4``) of a date."""
    return f"{day.year}Q{(day.month - 1) // 3 + 1}"


def in_date_range(day: date) -> bool:
    """Whether a date anchors a partition (``FIRST_DAY``..``LAST_DAY``)."""
    return FIRST_DAY <= day <= LAST_DAY


def to_label(value: str) -> str:
    """Accept a label (``2025Q4``, ``2025-q4``) or a Dagster key (``2025-10``, ``2025-10-01``); return the label."""
    m = _LABEL.match(value)
    if m:
        return f"{m.group(1)}Q{m.group(2)}"
    m = _KEY.match(value)
    if m:
        month = int(m.group(2))
        if month in (1, 4, 7, 10) and (m.group(3) in (None, "01")):
            return f"{m.group(1)}Q{(month - 1) // 3 + 1}"
    raise ValueError(f"not a quarter: {value!r} (expected e.g. 2025Q4 or 2025-10)")


def to_key(value: str) -> str:
    """The Dagster partition key (``2025-10``) for a label or key."""
    label = to_label(value)
    year, q = int(label[:4]), int(label[5])
    return f"{year:04d}-{3 * (q - 1) + 1:02d}"


def quarter_bounds(value: str) -> tuple[date, date]:
    """First and last day of a quarter."""
    label = to_label(value)
    year, q = int(label[:4]), int(label[5])
    start = date(year, 3 * (q - 1) + 1, 1)
    end = date(year + 1, 1, 1) if q == 4 else date(year, 3 * q + 1, 1)
    return start, date.fromordinal(end.toordinal() - 1)


def quarter_range(first: str, last: str) -> list[str]:
    """All quarter labels from ``first`` to ``last`` inclusive."""
    a, b = to_label(first), to_label(last)
    y, q = int(a[:4]), int(a[5])
    out = []
    while (y, q) <= (int(b[:4]), int(b[5])):
        out.append(f"{y}Q{q}")
        y, q = (y + 1, 1) if q == 4 else (y, q + 1)
    if not out:
        raise ValueError(f"empty quarter range {a}..{b}")
    return out


def current_quarter() -> str:
    """The running quarter's label: the last partition (``end_offset=1``)."""
    return quarter_of(datetime.now(timezone.utc))


def partition_label(value: str) -> str:
    """The label of a quarter that has a partition; a ValueError that says which quarters exist for any other."""
    label = to_label(value)
    first, last = to_label(QUARTER_START), current_quarter()
    if not (first[:4], first[5]) <= (label[:4], label[5]) <= (last[:4], last[5]):
        raise ValueError(f"quarter {label} has no partition: the quarters run from {first} to {last} (the running "
                         f"quarter); give one of those")
    return label
