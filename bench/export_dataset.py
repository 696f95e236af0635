"""Issue 36 section 4: the ``--format hf`` export of full-size releases, and loading it as researchers do.

    .venv/bin/python bench/export_dataset.py RELEASE_FOLDER [--quarters 2] [--workdir /tmp/veritas_bench_export]

RELEASE_FOLDER is one complete release (a published version or a rehearsal's staging folder); it is exported as
``--quarters`` quarters (2025Q3, 2025Q4, ...: the same release under each label). Measured in the same run:
- baseline: the plain copy of the same folders (``veritas export`` without ``--format hf``);
- hf: ``export_hf`` (the copies, each quarter's metadata.parquet, the card and the Croissant file);
- datasets: ``load_dataset`` on the export, offline, into a fresh cache, then decoding every image once;
- mlcroissant: loading the export's croissant.json and reading every claim record.
It prints each time, hf against the baseline, the rows per split and the mlcroissant records per quarter.
"""

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from assets.release.card import export_hf  # noqa: E402 (after the sys.path line)


def labels(n: int) -> list[str]:
    out, (y, q) = [], (2025, 3)
    for _ in range(n):
        out.append(f"{y}Q{q}")
        y, q = (y + 1, 1) if q == 4 else (y, q + 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("release")
    parser.add_argument("--quarters", type=int, default=2)
    parser.add_argument("--workdir", default="/tmp/veritas_bench_export")
    args = parser.parse_args()
    release, work = Path(args.release).resolve(), Path(args.workdir)
    if not (release / "claims.parquet").is_file():
        raise SystemExit(f"{release}: no claims.parquet; give a complete release folder")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    quarters = labels(args.quarters)
    releases = {q: release for q in quarters}

    t = time.perf_counter()
    for q in quarters:
        shutil.copytree(release, work / "plain" / q)
    baseline = time.perf_counter() - t
    t = time.perf_counter()
    out = export_hf(releases, work / "hf")
    hf = time.perf_counter() - t

    os.environ.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_HOME=str(work / "hf-home"))
    from datasets import load_dataset

    t = time.perf_counter()
    dd = load_dataset(str(out), cache_dir=str(work / "cache"))
    images = sum(len(row["images"]) for q in dd for row in dd[q])
    loaded = time.perf_counter() - t

    import mlcroissant as mlc

    t = time.perf_counter()
    records = list(mlc.Dataset(jsonld=out / "croissant.json").records("claims"))
    croissant = time.perf_counter() - t
    per_quarter = {q: sum(r["claims/quarter"] == q.encode() for r in records) for q in quarters}
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) / 2**20
    print(f"release {release.name}, {args.quarters} quarters, export {size:.0f} MiB")
    print(f"baseline copy {baseline:.2f} s | hf export {hf:.2f} s (x{hf / baseline:.2f}) | "
          f"datasets load + decode {images} images {loaded:.1f} s | mlcroissant claims {croissant:.1f} s")
    print("datasets rows per split:", {q: dd[q].num_rows for q in dd})
    print("datasets features:", dict(dd[quarters[0]].features))
    print("mlcroissant claims per quarter:", per_quarter)


if __name__ == "__main__":
    main()
