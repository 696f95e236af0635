"""The simulated quarter and model panel (moved from bench/rehearsal/): a simulated quarter (quarter.py) made from
real records (records.py), a simulated model panel (panel.py) on loopback, and the helpers that run the real pipeline
on them and score the release (run.py). Everything here is labelled simulated; nothing of it is a default of the
pipeline."""

import sys

from dagster_project.settings import PROJECT_ROOT

# The quarter's pages are drawn with the demo snapshot's builder (demo/build_snapshot.py) and the panel is served by
# the loopback OpenAI stub (tests/openai_stub.py): both live in the checkout (the editable install's PROJECT_ROOT,
# where the publisher registry and the records excerpt are too), outside the installed packages. Appended, so that it
# never shadows an installed module.
if str(PROJECT_ROOT) not in sys.path:
    sys.path.append(str(PROJECT_ROOT))
