"""Calendar-quarter partitions: Dagster keys like ``2025-10`` shown and accepted as ``2025Q4``."""

import dagster as dg

from dagster_project.core.quarters import (  # noqa: F401 - re-exported: the stages import them from here
    FIRST_DAY,
    LAST_DAY,
    QUARTER_START,
    current_quarter,
    in_date_range,
    quarter_bounds,
    quarter_of,
    quarter_range,
    to_key,
    to_label,
)

quarterly_partitions = dg.TimeWindowPartitionsDefinition(
    cron_schedule="0 0 1 1,4,7,10 *",
    start=QUARTER_START,
    fmt="%Y-%m",
    timezone="UTC",
    end_offset=1,  # the running quarter is a partition too: claims arrive while it runs
)
