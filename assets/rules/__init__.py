"""The rules the stages share, on the floor below them: what a claim's text must be (``claim_text``, ``length``,
``leaks``, ``languages``, ``negation``), which media go without a model's say (``media_rules``, ``overlays``,
``media_text``), when two claims are one (``near_duplicates``), the label bins and the ensemble's reliability, the
ratings' categories, failed answers, stable ids and the label-blind release order. Dagster-free: importing any module
here never imports Dagster (``tests/test_import_graph.py``), so stage 1's range processes and the tools use them."""
