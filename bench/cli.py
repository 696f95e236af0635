"""How long the read-only commands take (`veritas yields`, `costs`, `export`) next to `python -c "import dagster"`,
each a fresh process, timed in the same run; prints seconds and the ratio to that baseline.

Needs a data dir with a release, e.g. after `make demo`:
    .venv/bin/python bench/cli.py [--config veritas.yaml] [--quarter 2026Q2] [--repeat 5]
The target (issue 12) is under 2 s each on a warm machine, about the time of `import dagster`.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERITAS = Path(sys.executable).parent / "veritas"


def timed(cmd: list[str], repeat: int) -> list[float]:
    """Wall seconds of ``repeat`` runs of ``cmd`` (after one unrecorded warm-up run); any failure stops the bench."""
    times = []
    for i in range(repeat + 1):
        t0 = time.perf_counter()
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        elapsed = time.perf_counter() - t0
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-1000:]}{done.stderr[-2000:]}")
        if i:
            times.append(elapsed)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(ROOT / "veritas.yaml"))
    parser.add_argument("--quarter", default="2026Q2")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if not VERITAS.exists():
        raise SystemExit(f"{VERITAS} not found: run `make install` and this script with .venv/bin/python")
    out = tempfile.mkdtemp(prefix="bench-cli-")
    base = [str(VERITAS), "--config", args.config]
    cases = {
        'python -c "import dagster"': [sys.executable, "-c", "import dagster"],
        "veritas yields": [*base, "yields", "--quarter", args.quarter],
        "veritas yields --json": [*base, "yields", "--quarter", args.quarter, "--json"],
        "veritas costs": [*base, "costs", "--quarter", args.quarter],
        "veritas export": [*base, "export", "--quarter", args.quarter, "--out", out],
    }
    print(f"{args.repeat} runs each after one warm-up; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
          f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r} (set: only pre-compiled .pyc help)")
    print(f"{'command':<28}{'median s':>10}{'min s':>9}{'x import dagster':>18}")
    baseline = None
    for name, cmd in cases.items():
        times = timed(cmd, args.repeat)
        median = statistics.median(times)
        baseline = baseline or median
        print(f"{name:<28}{median:>10.2f}{min(times):>9.2f}{median / baseline:>18.2f}", flush=True)


if __name__ == "__main__":
    main()
