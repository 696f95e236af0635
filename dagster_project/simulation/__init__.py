"""The simulated quarter and model panel (moved from bench/rehearsal/): a simulated quarter (quarter.py) made from
real records (records.py), a simulated model panel (panel.py) on loopback, and the helpers that run the real pipeline
on them and score the release (run.py). Everything here is labelled simulated; nothing of it is a default of the
pipeline."""
