"""Writing a local file so that a reader never sees half of it: the one helper the store, the web archive's
index files, the feed copies and the backfill state share. And following a ``LATEST`` pointer without leaving
its folder, which the store and ``veritas export`` share."""

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


def pointed_folder(folder: Path, name: str, where: str = "") -> Path:
    """The version ``name`` that ``folder/LATEST`` points to, when it is a folder directly inside ``folder`` (after
    symbolic links); a pointer aimed anywhere else (``..``, an absolute path, a link out) is a ValueError naming it."""
    folder = Path(folder)
    target = folder / name
    inside = bool(name) and name not in (".", "..") and Path(name).name == name and "\\" not in name
    if inside:
        try:
            inside = target.resolve().parent == folder.resolve()
        except (OSError, RuntimeError):  # a link loop
            inside = False
    if not inside:
        raise ValueError(f"{where or folder / 'LATEST'}: LATEST names {name[:200]!r}, which is not a version folder "
                         f"inside {folder}; write the name of one of its release versions there")
    return target
