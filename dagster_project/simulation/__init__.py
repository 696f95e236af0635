"""The simulated quarter and model panel: a simulated quarter (quarter.py) made from real records (records.py), with
pages and media drawn as the web serves them (pages.py), a simulated model panel (panel.py) served on loopback by the
OpenAI-compatible stub (openai_stub.py), and the helpers that run the real pipeline on them and score the release
(run.py). Everything here is labelled simulated; nothing of it is a default of the pipeline."""
