"""The dress rehearsal's stage runner (stage.py). The simulated quarter, the simulated model panel and the helpers
that run and score them are in dagster_project/simulation/. Everything here is labelled simulated; nothing of it is a
default of the pipeline."""
