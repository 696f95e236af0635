"""The blob store: versioned, quarter-partitioned Parquet tables, quarantine tables, media and releases."""

import json
import os
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
import polars as pl

from schemas.frames import polars_schema, to_frame
from schemas.records import QuarantineRecord


def _atomic_write(path: Path, data: bytes) -> None:
    # A reader never sees a half-written file: write beside it, then rename over it.
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def new_version(run_id: str = "") -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
    return f"v{stamp}-{(run_id or 'local')[:8]}"


class StoreResource(dg.ConfigurableResource):
    """A local folder (the default). Every table version is kept; ``LATEST`` names the current one."""

    root: str = ".veritas/data"

    @property
    def base(self) -> Path:
        return Path(self.root).expanduser().resolve()

    def _dir(self, kind: str, asset: str, quarter: str) -> Path:
        return self.base / kind / asset / quarter

    def write_table(self, asset: str, quarter: str, df: pl.DataFrame, run_id: str = "", kind: str = "tables") -> str:
        """Write a new version and point LATEST at it; returns the version name."""
        version = new_version(run_id)
        folder = self._dir(kind, asset, quarter)
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".parquet")
        os.close(fd)
        try:
            df.write_parquet(tmp, compression="zstd", statistics=True)
            os.replace(tmp, folder / f"{version}.parquet")
        finally:
            Path(tmp).unlink(missing_ok=True)
        _atomic_write(folder / "LATEST", version.encode())
        return version

    def versions(self, asset: str, quarter: str, kind: str = "tables") -> list[str]:
        folder = self._dir(kind, asset, quarter)
        return sorted(p.stem for p in folder.glob("v*.parquet")) if folder.exists() else []

    def latest_version(self, asset: str, quarter: str, kind: str = "tables") -> str | None:
        pointer = self._dir(kind, asset, quarter) / "LATEST"
        return pointer.read_text().strip() if pointer.exists() else None

    def has_table(self, asset: str, quarter: str) -> bool:
        return self.latest_version(asset, quarter) is not None

    def read_table(self, asset: str, quarter: str, version: str | None = None, kind: str = "tables") -> pl.DataFrame:
        version = version or self.latest_version(asset, quarter, kind)
        if version is None:
            raise FileNotFoundError(
                f"no {asset} table for {quarter} in {self.base}: materialize {asset} for {quarter} first"
            )
        return pl.read_parquet(self._dir(kind, asset, quarter) / f"{version}.parquet")

    def write_quarantine(self, asset: str, quarter: str, records: list[QuarantineRecord], run_id: str = "") -> str:
        return self.write_table(asset, quarter, to_frame(records, QuarantineRecord), run_id, kind="quarantine")

    def read_quarantine(self, asset: str, quarter: str) -> pl.DataFrame:
        if self.latest_version(asset, quarter, "quarantine") is None:
            return pl.DataFrame(schema=polars_schema(QuarantineRecord))
        return self.read_table(asset, quarter, kind="quarantine")

    @property
    def media_root(self) -> str:
        return str(self.base / "media")

    # Releases are folders: built in a staging folder, then renamed into place in one step.
    def release_staging(self, quarter: str, version: str) -> Path:
        path = self.base / "releases" / quarter / f".staging-{version}"
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return path

    def publish_release(self, quarter: str, staging: Path) -> Path:
        final = staging.parent / staging.name.removeprefix(".staging-")
        os.replace(staging, final)
        _atomic_write(final.parent / "LATEST", final.name.encode())
        return final

    def latest_release(self, quarter: str) -> Path | None:
        pointer = self.base / "releases" / quarter / "LATEST"
        return pointer.parent / pointer.read_text().strip() if pointer.exists() else None

    def write_json(self, rel_path: str, payload: dict) -> Path:
        path = self.base / rel_path
        _atomic_write(path, json.dumps(payload, indent=2, ensure_ascii=False, default=str).encode())
        return path
