"""Writing a local file so that a reader never sees half of it: the one helper the store, the web archive's
index files, the feed copies and the backfill state share."""

import os
import tempfile
from pathlib import Path

TMP_PREFIX = ".tmp-"  # what a file being written is called until it is renamed (listings skip these)


def atomic_write(path: Path, data: bytes) -> None:
    """Write beside ``path`` under a temporary name, then rename over it (creating the folder if needed)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=TMP_PREFIX)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
