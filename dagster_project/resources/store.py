"""The blob store: versioned, quarter-partitioned Parquet tables, quarantine tables, media, WARC files and releases.

Two backends behind one resource: a local folder (``kind: local``, the default) or an S3 bucket (``kind: s3``,
through boto3). Every write is atomic: a local file is written beside its target and renamed over it; an S3
object is one PUT, or a multipart upload that is completed only when every part is in (and aborted on failure),
so a reader never sees a partial object. Tables and releases are versioned; a ``LATEST`` pointer, written last,
names the current version.

With S3, ``root`` is a local working copy: releases are staged there before upload, media are mirrored there
(ffmpeg, Pillow and the release builder need files), and released folders are downloaded there on demand.
"""

import io
import json
import os
import shutil
import tempfile
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import dagster as dg
import polars as pl
from pydantic import PrivateAttr

from dagster_project.core.atomic_files import TMP_PREFIX, atomic_write, pointed_folder
from dagster_project.resources.web import WARC_SUFFIXES
from schemas.frames import polars_schema, to_frame
from schemas.records import QuarantineRecord

MiB = 1024 * 1024


def new_version(run_id: str = "") -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    return f"v{stamp}-{(run_id or 'local')[:8]}"


def _parquet_bytes(df: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.write_parquet(buf, compression="zstd", statistics=True)
    return buf.getvalue()


class StoreResource(dg.ConfigurableResource):
    """A local folder (the default) or an S3 bucket. Every table version is kept; ``LATEST`` names the current one."""

    root: str = ".veritas/data"  # local: the data folder; s3: the local working copy (staging, media mirror)
    kind: str = "local"  # "local" | "s3"
    bucket: str = ""
    prefix: str = ""  # key prefix inside the bucket, e.g. "veritas/prod"
    endpoint_url: str = ""  # empty: AWS; e.g. http://127.0.0.1:8333 for SeaweedFS/MinIO
    region: str = "us-east-1"
    # the keys never go in the config: only the names of the variables holding them
    access_key_env: str = "AWS_ACCESS_KEY_ID"
    secret_key_env: str = "AWS_SECRET_ACCESS_KEY"
    create_bucket: bool = False  # create the bucket when missing (tests, fresh servers)
    multipart_threshold: int = 16 * MiB  # objects above this go up in parts (each part >= 5 MiB, S3's floor)
    part_size: int = 8 * MiB
    warc_dir: str = ""  # s3: a local WARC archive folder mirrored to ``warc/`` after each stage

    _client: Any = PrivateAttr(default=None)
    _client_pid: int = PrivateAttr(default=0)  # the process that built _client
    _media_pulled: bool = PrivateAttr(default=False)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)

    # ---- where things are -------------------------------------------------------------------
    @property
    def base(self) -> Path:
        return Path(self.root).expanduser().resolve()

    @property
    def is_s3(self) -> bool:
        return self.kind == "s3"

    @property
    def location(self) -> str:
        """Human-readable place of the data (for messages and metadata)."""
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/") if self.is_s3 else str(self.base)

    def _key(self, rel: str) -> str:
        return f"{self.prefix.strip('/')}/{rel}" if self.prefix.strip("/") else rel

    def _table_rel(self, kind: str, asset: str, quarter: str, name: str = "") -> str:
        return f"{kind}/{asset}/{quarter}/{name}".rstrip("/")

    def _dir(self, kind: str, asset: str, quarter: str) -> Path:
        return self.base / kind / asset / quarter

    # ---- the S3 client ----------------------------------------------------------------------
    def client(self):
        """The boto3 S3 client (s3 only), built once per resource instance and process: a client is not fork-safe (a
        forked worker of stage 3 or 4 would write into its parent's pooled connections, and S3 answers BadDigest)."""
        if not self.is_s3:
            raise ValueError("the local store has no S3 client")
        with self._lock:
            if self._client is None or self._client_pid != os.getpid():
                os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")  # never probe the instance-metadata address
                import boto3
                from botocore.config import Config

                if not self.bucket:
                    raise ValueError("store: kind s3 needs a bucket")
                self._client = boto3.client(
                    "s3",
                    endpoint_url=self.endpoint_url or None,
                    region_name=self.region,
                    aws_access_key_id=os.environ.get(self.access_key_env) or None,
                    aws_secret_access_key=os.environ.get(self.secret_key_env) or None,
                    config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 5, "mode": "standard"},
                                  signature_version="s3v4"),
                )
                self._client_pid = os.getpid()
                if self.create_bucket:
                    self._ensure_bucket(self._client)
            return self._client

    def _ensure_bucket(self, client) -> None:
        from botocore.exceptions import ClientError

        try:
            client.head_bucket(Bucket=self.bucket)
        except ClientError:
            try:
                client.create_bucket(Bucket=self.bucket)
            except ClientError as err:  # another process created it meanwhile
                if err.response.get("Error", {}).get("Code") not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                    raise

    # ---- the object API (both backends; ``rel`` is a path relative to the store) --------------
    def put_bytes(self, rel: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        """Write one object atomically."""
        if not self.is_s3:
            atomic_write(self.base / rel, data)
        elif len(data) > self.multipart_threshold:
            self.put_stream(rel, io.BytesIO(data), content_type)
        else:
            self.client().put_object(Bucket=self.bucket, Key=self._key(rel), Body=data, ContentType=content_type)

    def put_stream(self, rel: str, stream: IO[bytes], content_type: str = "application/octet-stream") -> None:
        """Write an object from a stream; on S3 a multipart upload, visible only once completed, aborted on failure."""
        if not self.is_s3:
            target = self.base / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=TMP_PREFIX)
            try:
                with os.fdopen(fd, "wb") as fh:
                    shutil.copyfileobj(stream, fh, self.part_size)
                os.replace(tmp, target)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            return
        client, key = self.client(), self._key(rel)
        first = stream.read(self.part_size)
        if len(first) < self.part_size:  # fits in one part: a single PUT is atomic by itself
            client.put_object(Bucket=self.bucket, Key=key, Body=first, ContentType=content_type)
            return
        upload_id = client.create_multipart_upload(Bucket=self.bucket, Key=key, ContentType=content_type)["UploadId"]
        try:
            parts, number, chunk = [], 1, first
            while chunk:
                etag = client.upload_part(Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=chunk)["ETag"]
                parts.append({"ETag": etag, "PartNumber": number})
                number, chunk = number + 1, stream.read(self.part_size)
            client.complete_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts})
        except BaseException:
            # the parts uploaded so far are discarded: the object never becomes visible
            client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
            raise

    def put_file(self, local_path: str | os.PathLike, rel: str, content_type: str = "application/octet-stream") -> None:
        """Upload (or, locally, copy) a file to ``rel`` atomically."""
        src = Path(local_path)
        if not self.is_s3 and src.resolve() == (self.base / rel).resolve():
            return
        with open(src, "rb") as fh:
            self.put_stream(rel, fh, content_type)

    def get_bytes(self, rel: str) -> bytes:
        """The object's bytes; FileNotFoundError when absent."""
        if not self.is_s3:
            return (self.base / rel).read_bytes()
        from botocore.exceptions import ClientError

        try:
            return self.client().get_object(Bucket=self.bucket, Key=self._key(rel))["Body"].read()
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                raise FileNotFoundError(f"{self.location}/{rel}") from None
            raise

    def get_file(self, rel: str, local_path: str | os.PathLike) -> Path:
        """Download (or copy) ``rel`` to ``local_path`` atomically; FileNotFoundError when absent."""
        target = Path(local_path)
        if not self.is_s3:
            src = self.base / rel
            if not src.exists():
                raise FileNotFoundError(str(src))
            if src.resolve() != target.resolve():
                with open(src, "rb") as fh:
                    _stream_to(target, fh)
            return target
        from botocore.exceptions import ClientError

        try:
            body = self.client().get_object(Bucket=self.bucket, Key=self._key(rel))["Body"]
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                raise FileNotFoundError(f"{self.location}/{rel}") from None
            raise
        _stream_to(target, body)
        return target

    def exists(self, rel: str) -> bool:
        if not self.is_s3:
            return (self.base / rel).exists()
        try:
            self.get_size(rel)
            return True
        except FileNotFoundError:
            return False

    def get_size(self, rel: str) -> int:
        if not self.is_s3:
            path = self.base / rel
            if not path.exists():
                raise FileNotFoundError(str(path))
            return path.stat().st_size
        from botocore.exceptions import ClientError

        try:
            return int(self.client().head_object(Bucket=self.bucket, Key=self._key(rel))["ContentLength"])
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                raise FileNotFoundError(f"{self.location}/{rel}") from None
            raise

    def list_objects(self, prefix: str) -> dict[str, int]:
        """Every object under ``prefix`` (a folder, relative to the store): relative path -> size."""
        prefix = prefix.rstrip("/") + "/"
        if not self.is_s3:
            folder = self.base / prefix
            if not folder.exists():
                return {}
            return {
                p.relative_to(self.base).as_posix(): p.stat().st_size
                for p in folder.rglob("*") if p.is_file() and not p.name.startswith((TMP_PREFIX, ".staging-"))
            }
        out: dict[str, int] = {}
        strip = len(self._key(""))
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self._key(prefix)):
            for obj in page.get("Contents", []):
                out[obj["Key"][strip:]] = int(obj["Size"])
        return out

    # ---- tables -------------------------------------------------------------------------------
    def write_table(self, asset: str, quarter: str, df: pl.DataFrame, run_id: str = "", kind: str = "tables",
                    point: bool = True) -> str:
        """Write a new version and point LATEST at it (``point``; else ``point_latest`` does, once every file of the
        stage is written); returns the version name."""
        version = new_version(run_id)
        self.put_bytes(self._table_rel(kind, asset, quarter, f"{version}.parquet"), _parquet_bytes(df))
        if point:
            self.point_latest(asset, quarter, version, kind)
        return version

    def point_latest(self, asset: str, quarter: str, version: str, kind: str = "tables") -> None:
        self.put_bytes(self._table_rel(kind, asset, quarter, "LATEST"), version.encode(), "text/plain")

    def versions(self, asset: str, quarter: str, kind: str = "tables") -> list[str]:
        names = (Path(rel).name for rel in self.list_objects(self._table_rel(kind, asset, quarter)))
        return sorted(n.removesuffix(".parquet") for n in names if n.startswith("v") and n.endswith(".parquet"))

    def latest_version(self, asset: str, quarter: str, kind: str = "tables") -> str | None:
        try:
            return self.get_bytes(self._table_rel(kind, asset, quarter, "LATEST")).decode().strip()
        except FileNotFoundError:
            return None

    def has_table(self, asset: str, quarter: str) -> bool:
        return self.latest_version(asset, quarter) is not None

    def read_table(self, asset: str, quarter: str, version: str | None = None, kind: str = "tables") -> pl.DataFrame:
        version = version or self.latest_version(asset, quarter, kind)
        if version is None:
            raise FileNotFoundError(
                f"no {asset} table for {quarter} in {self.location}: materialize {asset} for {quarter} first"
            )
        return pl.read_parquet(io.BytesIO(self.get_bytes(self._table_rel(kind, asset, quarter, f"{version}.parquet"))))

    def write_quarantine(self, asset: str, quarter: str, records: list[QuarantineRecord], run_id: str = "",
                         point: bool = True) -> str:
        return self.write_table(asset, quarter, to_frame(records, QuarantineRecord), run_id, "quarantine", point)

    def read_quarantine(self, asset: str, quarter: str) -> pl.DataFrame:
        if self.latest_version(asset, quarter, "quarantine") is None:
            return pl.DataFrame(schema=polars_schema(QuarantineRecord))
        return self.read_table(asset, quarter, kind="quarantine")

    # ---- media (content-addressed, immutable files) ----------------------------------------------
    @property
    def media_root(self) -> str:
        """A local media folder. With S3 it is a mirror, filled from the bucket on first use in this process."""
        root = self.base / "media"
        if self.is_s3 and not self._media_pulled:
            self.pull_dir("media", root)
            self._media_pulled = True
        return str(root)

    def media_store(self, **options):
        """The content-addressed media store (dagster_project.resources.media.MediaStore) on this store's backend.

        With S3 every write goes to the bucket at once and a read fetches just that file into the local mirror,
        so a step on a fresh host needs no full ``media_root`` pull. ``options`` are MediaStore's limits."""
        from dagster_project.resources.media import MediaStore

        if not self.is_s3:
            return MediaStore(str(self.base / "media"), **options)
        return _bucket_media_store(MediaStore)(self, **options)

    def sync_media(self) -> int:
        """Upload the media files the bucket lacks (s3; a no-op locally). Returns how many went up."""
        return self.push_dir(self.base / "media", "media") if self.is_s3 else 0

    def sync_warc(self) -> int:
        """Upload new or grown WARC files from ``warc_dir`` to ``warc/`` (s3; a no-op locally)."""
        if not (self.is_s3 and self.warc_dir):
            return 0
        # WARC files only: the index files beside them are local caches (stamped with local mtimes)
        return self.push_dir(Path(self.warc_dir), "warc", changed_size=True, suffixes=WARC_SUFFIXES)

    def push_dir(self, folder: Path, prefix: str, changed_size: bool = False, suffixes: tuple[str, ...] = ()) -> int:
        """Upload every file of ``folder`` missing under ``prefix`` (or, with ``changed_size``, of another size);
        with ``suffixes``, only the names ending in one of them."""
        folder = Path(folder)
        if not folder.exists():
            return 0
        remote = self.list_objects(prefix)
        sent = 0
        for path in sorted(folder.rglob("*")):
            if not path.is_file() or path.name.startswith(TMP_PREFIX) or (suffixes and not path.name.endswith(suffixes)):
                continue
            rel = f"{prefix}/{path.relative_to(folder).as_posix()}"
            size = path.stat().st_size
            if rel not in remote or (changed_size and remote[rel] != size):
                self.put_file(path, rel)
                sent += 1
        return sent

    def pull_dir(self, prefix: str, folder: Path) -> int:
        """Download every object under ``prefix`` missing from ``folder``."""
        got = 0
        for rel, size in self.list_objects(prefix).items():
            target = Path(folder) / rel[len(prefix.rstrip("/")) + 1:]
            if not target.exists() or target.stat().st_size != size:
                self.get_file(rel, target)
                got += 1
        return got

    def after_stage(self) -> None:
        """What a stage's end owes the bucket: the media and WARC records it wrote locally (s3 only)."""
        if self.is_s3:
            self.sync_media()
            self.sync_warc()

    # ---- releases: built in a staging folder, then published in one step -------------------------
    def release_staging(self, quarter: str, version: str) -> Path:
        path = self.base / "releases" / quarter / f".staging-{version}"
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return path

    def publish_release(self, quarter: str, staging: Path) -> Path:
        final = staging.parent / staging.name.removeprefix(".staging-")
        if self.is_s3:
            # every file first, the LATEST pointer last: a reader following LATEST only finds complete releases
            self.sync_media()
            self.push_dir(staging, f"releases/{quarter}/{final.name}")
        os.replace(staging, final)
        self.put_bytes(f"releases/{quarter}/LATEST", final.name.encode(), "text/plain")
        if self.is_s3:
            atomic_write(final.parent / "LATEST", final.name.encode())
        return final

    def release_quarters(self) -> list[str]:
        """The quarters with a published release (a LATEST pointer, here or in the bucket), oldest first."""
        from dagster_project.core.quarters import to_label

        found = set()
        for rel in self.list_objects("releases"):
            parts = rel.split("/")
            if len(parts) == 3 and parts[2] == "LATEST":
                try:
                    found.add(to_label(parts[1]))
                except ValueError:  # a folder that is not a quarter
                    continue
        return sorted(found)  # labels (2025Q3) sort as quarters do

    def latest_release(self, quarter: str) -> Path | None:
        """The local folder of the quarter's current release (downloaded into the working copy with S3)."""
        try:
            name = self.get_bytes(f"releases/{quarter}/LATEST").decode().strip()
        except FileNotFoundError:
            return None
        pointed_folder(self.base / "releases" / quarter, name, f"{self.location}/releases/{quarter}/LATEST")
        return self.release_folder(quarter, name)

    def release_folder(self, quarter: str, name: str) -> Path:
        """The local folder of one published version of the quarter's release (every version is kept)."""
        folder = self.base / "releases" / quarter / name
        if self.is_s3 and not folder.exists():
            scratch = Path(tempfile.mkdtemp(dir=self._mkparent(folder), prefix=TMP_PREFIX))
            try:
                self.pull_dir(f"releases/{quarter}/{name}", scratch)
                os.replace(scratch, folder)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
        return folder

    @staticmethod
    def _mkparent(path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        return path.parent

    def write_json(self, rel_path: str, payload: dict) -> Path:
        data = json.dumps(payload, indent=2, ensure_ascii=False, default=str).encode()
        path = self.base / rel_path
        if self.is_s3:
            self.put_bytes(rel_path, data, "application/json")
        atomic_write(path, data)
        return path


def _stream_to(target: Path, stream: IO[bytes]) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=TMP_PREFIX)
    try:
        with os.fdopen(fd, "wb") as fh:
            shutil.copyfileobj(stream, fh, MiB)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _bucket_media_store(base: type):
    """A MediaStore whose files live in the bucket under ``media/``, with a local mirror for file-path readers."""

    class BucketMediaStore(base):
        def __init__(self, store: StoreResource, **options):
            super().__init__(str(store.base / "media"), **options)
            self.store = store

        def _write_bytes(self, rel_path: str, data: bytes) -> None:
            super()._write_bytes(rel_path, data)
            self.store.put_bytes(f"media/{rel_path}", data)

        def path(self, rel_path: str) -> str:
            local = super().path(rel_path)
            if not os.path.exists(local):
                try:
                    self.store.get_file(f"media/{rel_path}", local)
                except FileNotFoundError:
                    pass  # absent in the bucket too: the caller's open() raises as for a local store
            return local

    return BucketMediaStore
