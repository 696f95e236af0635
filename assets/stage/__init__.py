"""What every stage asset shares, on the floor below the stage groups: its Dagster wiring (``wiring``), its tables
and yields (``tables``) and its record errors (``record_errors``)."""
