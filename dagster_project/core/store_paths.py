"""Where the store lies, and whether a folder a command is told to write to overlaps it: only the pipeline writes
into the store, so ``veritas export``, ``veritas evaluate`` and ``veritas averitec-score`` refuse an ``--out`` there
(issue 51). The one rule they use."""

from pathlib import Path


def store_root(config_path: str | None) -> Path:
    """The local store folder (with S3: its working copy), resolved."""
    from dagster_project.core.config_file import load_config

    return Path(load_config(config_path)["store"]["root"]).expanduser().resolve()


def store_overlap(path: Path, root: Path) -> str:
    """How ``path`` overlaps the store folder ``root``: "is", "is inside", "contains", or "" when it does not
    (after ``~`` and symbolic links)."""
    target, root = Path(path).expanduser().resolve(), Path(root).resolve()
    if target == root:
        return "is"
    if root in target.parents:
        return "is inside"
    if target in root.parents:
        return "contains"
    return ""


def refuse_in_store(option: str, path: Path, root: Path, why: str,
                    refused: tuple[str, ...] = ("is", "is inside", "contains"),
                    place: str = "the store", holds: str = "its tables and releases") -> None:
    """A ValueError naming ``option`` when ``path`` overlaps the store (or another ``place`` of the pipeline's, which
    ``holds`` what is named) in one of the ``refused`` ways, saying ``why`` the command may not write there."""
    where = store_overlap(path, root)
    if where in refused:
        raise ValueError(f"{option} {path} {where} {place} {Path(root).resolve()} ({holds}): "
                         f"{why}; choose a folder outside {place}")


FULL, READ_ONLY = "full", "read-only"


def storage_failure(err: BaseException) -> str:
    """FULL when ``err`` (or an error it wraps: ``__cause__``, ``__context__``, SQLAlchemy's ``orig``) is a full disk,
    READ_ONLY when it is a read-only file or file system; "" for anything else."""
    import errno

    seen: set[int] = set()
    todo = [err]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        code = getattr(e, "errno", None)
        text = str(e).lower()
        if code in (errno.ENOSPC, errno.EDQUOT) or "disk is full" in text or "no space left" in text:
            return FULL
        if code == errno.EROFS or "readonly database" in text or "read-only file system" in text:
            return READ_ONLY
        todo += [getattr(e, "orig", None), e.__cause__, e.__context__]
    return ""
