"""The Dagster-free floor of the code location: the config file, quarters, the cost ledger, atomic writes and the
instance's records. Importing any module here never imports Dagster (``tests/test_import_graph.py`` holds it), so
the read-only commands that use only these start fast; nothing here imports a module above it."""
