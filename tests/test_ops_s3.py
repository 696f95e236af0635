"""The S3 store against a real SeaweedFS server: atomic objects, and the simulated quarter giving the local store's
release of 100 claims byte for byte."""

import io
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dagster_project.config import PROJECT_ROOT, load_config
from dagster_project.resources.store import MiB, StoreResource
from schemas.frames import to_frame
from schemas.records import Review
from tests.ops_support import S3_KEYS, release_files, seaweedfs

BUCKET = "veritas-ops"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        for name, value in S3_KEYS.items():
            mp.setenv(name, value)
        with seaweedfs(tmp_path_factory.mktemp("s3")) as endpoint:
            yield endpoint


def s3_settings(endpoint: str, **extra) -> dict:
    return {"kind": "s3", "bucket": BUCKET, "endpoint_url": endpoint, "access_key_env": "VERITAS_TEST_S3_KEY",
            "secret_key_env": "VERITAS_TEST_S3_SECRET", "create_bucket": True, **extra}


def s3_store(endpoint: str, root: Path, **extra) -> StoreResource:
    return StoreResource(root=str(root), **s3_settings(endpoint, **extra))


def test_tables_are_versioned_objects_with_a_latest_pointer(s3, tmp_path):
    from datetime import date

    store = s3_store(s3, tmp_path / "wc", prefix="unit")
    rows = [Review(review_id=f"r{i}", review_url=f"https://fullfact.org/{i}", claim_text="Masks cause oxygen deprivation",
                   claim_date=date(2020, 5, i), quarter="2020Q2", sources=["feed:test"]) for i in (1, 2)]
    v1 = store.write_table("reviews", "2020Q2", to_frame(rows[:1], Review))
    v2 = store.write_table("reviews", "2020Q2", to_frame(rows, Review))
    assert store.versions("reviews", "2020Q2") == sorted([v1, v2]) and store.latest_version("reviews", "2020Q2") == v2
    assert store.read_table("reviews", "2020Q2").height == 2 and store.read_table("reviews", "2020Q2", v1).height == 1
    keys = {o["Key"] for o in store.client().list_objects_v2(Bucket=BUCKET, Prefix="unit/")["Contents"]}
    assert keys == {f"unit/tables/reviews/2020Q2/{v}.parquet" for v in (v1, v2)} | {"unit/tables/reviews/2020Q2/LATEST"}
    assert not (tmp_path / "wc" / "tables").exists()  # the working copy holds no table: they live in the bucket
    with pytest.raises(FileNotFoundError, match="materialize reviews for 2020Q3 first"):
        store.read_table("reviews", "2020Q3")
    # a file goes up in parts and comes back byte for byte
    payload = os.urandom(11 * MiB)
    (tmp_path / "big.bin").write_bytes(payload)
    small_parts = s3_store(s3, tmp_path / "wc", prefix="unit", multipart_threshold=5 * MiB, part_size=5 * MiB)
    small_parts.put_file(tmp_path / "big.bin", "warc/big.warc.gz")
    assert small_parts.get_file("warc/big.warc.gz", tmp_path / "back.bin").read_bytes() == payload
    # the WARC mirror takes WARCs, not the local index files beside them
    warcs = tmp_path / "warcs"
    warcs.mkdir()
    (warcs / "run1.warc.gz").write_bytes(b"warc bytes")
    (warcs / "run1.warc.gz.index.json").write_text("{}")
    mirror = s3_store(s3, tmp_path / "wc", prefix="mirror", warc_dir=str(warcs))
    assert mirror.sync_warc() == 1 and set(mirror.list_objects("warc")) == {"warc/run1.warc.gz"}


class Interrupted(io.RawIOBase):
    """A stream that fails after ``good`` bytes, as a dropped connection or a full disk would."""

    def __init__(self, good: int):
        self.left = good

    def readable(self):
        return True

    def readinto(self, buf):
        if self.left <= 0:
            raise OSError("connection reset while reading the source")
        n = min(len(buf), self.left)
        buf[:n] = b"x" * n
        self.left -= n
        return n


def test_a_failed_multipart_upload_is_aborted_and_leaves_no_object(s3, tmp_path):
    store = s3_store(s3, tmp_path, prefix="fail", multipart_threshold=5 * MiB, part_size=5 * MiB)
    with pytest.raises(OSError, match="connection reset"):
        store.put_stream("media/videos/ab/big.mp4", io.BufferedReader(Interrupted(12 * MiB)))
    assert not store.exists("media/videos/ab/big.mp4")
    assert store.list_objects("media") == {}
    assert store.client().list_multipart_uploads(Bucket=BUCKET, Prefix="fail/").get("Uploads") is None


def test_a_killed_upload_leaves_no_visible_object(s3, tmp_path):
    """SIGKILL in the middle of a multipart upload: no abort runs, and still no object is visible."""
    script = textwrap.dedent(f"""
        import io, sys, time
        sys.path.insert(0, {str(PROJECT_ROOT)!r})
        from dagster_project.resources.store import StoreResource, MiB
        class Slow(io.RawIOBase):
            def __init__(self): self.sent = 0
            def readable(self): return True
            def readinto(self, buf):
                if self.sent >= 5 * MiB:
                    print("one part sent", flush=True); time.sleep(60)
                n = min(len(buf), 5 * MiB - self.sent if self.sent < 5 * MiB else len(buf))
                buf[:n] = b"y" * n; self.sent += n; return n
        store = StoreResource(root={str(tmp_path)!r}, kind="s3", bucket={BUCKET!r}, endpoint_url={s3!r}, prefix="kill",
                              access_key_env="VERITAS_TEST_S3_KEY", secret_key_env="VERITAS_TEST_S3_SECRET",
                              multipart_threshold=5 * MiB, part_size=5 * MiB)
        store.put_stream("releases/2020Q2/v1/videos/1.mp4", io.BufferedReader(Slow(), 5 * MiB))
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert proc.stdout.readline().strip() == "one part sent"  # the first part is already uploaded
        store = s3_store(s3, tmp_path, prefix="kill")
        deadline = time.monotonic() + 30
        while not store.client().list_multipart_uploads(Bucket=BUCKET, Prefix="kill/").get("Uploads"):
            assert time.monotonic() < deadline, "the multipart upload never started"
            time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        proc.kill()
        proc.wait()
    assert not store.exists("releases/2020Q2/v1/videos/1.mp4")
    assert store.list_objects("releases") == {}


def test_the_simulated_quarter_on_s3_gives_the_local_release_byte_for_byte(s3, simulated, tmp_path, monkeypatch):
    """The session's simulated quarter (a release of 100 claims, run on the local store) again with the S3 store, from
    the same LLM cache: the same release, byte for byte, and every table the same."""
    from dagster_project.definitions import ASSET_NAMES
    from dagster_project.quarter_run import run_quarter
    from dagster_project.yield_report import collect_yields
    from tests.simulated import (
        QUARTER,
        RELEASE,
        SIM_KEY,
        release_claim_count,
        rerun_config,
    )

    for name, value in SIM_KEY.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    served = simulated["server"].panel.counters()["served"]
    s3_cfg = rerun_config(simulated, tmp_path / "s3", store=s3_settings(s3, prefix="simulated"))
    assert run_quarter(s3_cfg, QUARTER)
    assert simulated["server"].panel.counters()["served"] == served  # every answer came from the shared cache

    local_release = simulated["release"]
    fresh = s3_store(s3, tmp_path / "fresh-working-copy", prefix="simulated")  # nothing local: all from the bucket
    s3_release = fresh.latest_release(QUARTER)
    assert s3_release.is_relative_to(tmp_path / "fresh-working-copy")
    local_files, s3_files = release_files(local_release), release_files(s3_release)
    assert {"meta.json", "claims.json", "claims.parquet", "manifest.json"} <= set(s3_files)
    assert s3_files == local_files
    assert release_claim_count(s3_release) == RELEASE
    assert any(name.startswith(("images/", "videos/")) for name in s3_files)  # the release's media came back too

    # every stage ran and wrote its table to the bucket, with the same rows as locally
    local = StoreResource(root=load_config(simulated["config"])["store"]["root"])
    for asset in ASSET_NAMES:
        if asset == "release":
            continue
        assert fresh.has_table(asset, QUARTER), asset
        volatile = ["created"] if asset == "predictions" else []  # the prediction's timestamp names its run
        assert fresh.read_table(asset, QUARTER).drop(volatile).equals(local.read_table(asset, QUARTER).drop(volatile)), asset
    local_media = local.list_objects("media")
    assert local_media and fresh.list_objects("media") == local_media
    assert fresh.exists(f"reports/{QUARTER}/evaluation.json")
    assert not (Path(load_config(s3_cfg)["store"]["root"]) / "tables").exists()
    stages = collect_yields(s3_cfg, QUARTER)["stages"]
    assert list(stages) == ASSET_NAMES and stages["release"]["rows_out"] == RELEASE


def test_media_written_through_the_bucket_are_read_on_a_fresh_host(s3, tmp_path):
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (320, 240), (200, 40, 40)).save(buf, "JPEG", quality=90)
    writer = s3_store(s3, tmp_path / "host-a", prefix="media-test").media_store()
    medium = writer.put(buf.getvalue(), "image/jpeg")
    assert s3_store(s3, tmp_path / "x", prefix="media-test").exists(f"media/{medium.path}")  # in the bucket at once
    reader = s3_store(s3, tmp_path / "host-b", prefix="media-test").media_store()
    assert reader.read(medium.path) == writer.read(medium.path)
    local = Path(reader.path(medium.path))
    assert local.is_relative_to(tmp_path / "host-b") and Image.open(local).size == (320, 240)
    with pytest.raises(FileNotFoundError):
        reader.read("images/00/missing.jpg")


def test_warc_pull_brings_the_buckets_archive_to_a_replaying_host(s3, tmp_path, capsys):
    import shutil

    import yaml

    from dagster_project.cli import main
    from dagster_project.resources.web import WebResource

    demo_warc = PROJECT_ROOT / "demo" / "snapshot" / "pages.warc.gz"

    def config(name: str, archive: Path) -> str:
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump({"data_dir": str(tmp_path / name), "web": {"archive_dir": str(archive)},
                                        "store": s3_settings(s3, prefix="warc-test")}))
        return str(path)

    crawler = tmp_path / "crawler-warc"
    crawler.mkdir()
    shutil.copy(demo_warc, crawler / "run1.warc.gz")
    assert main(["--config", config("crawler", crawler), "warc", "push"]) == 0
    replayer = tmp_path / "replayer-warc"
    assert main(["--config", config("replayer", replayer), "warc", "pull"]) == 0
    assert "pulled 1 WARC file(s)" in capsys.readouterr().out
    assert (replayer / "run1.warc.gz").read_bytes() == demo_warc.read_bytes()
    page = WebResource(mode="replay", warc_paths=[str(replayer)]).fetch("https://faktencheck.afp.com/doc.afp.com.B2LA2G3")
    assert page.ok and b"Alex Jones" in page.content
    assert main(["--config", config("replayer", replayer), "warc", "pull"]) == 0  # nothing new: nothing fetched
    assert "pulled 0 WARC file(s)" in capsys.readouterr().out


def test_a_forked_worker_builds_its_own_s3_client(tmp_path):
    """Stages 3 and 4 fork workers that write media to the bucket: a boto3 client (its pooled connections) built in
    the parent and used in a child interleaved their uploads, and S3 refused them as BadDigest. Each process builds
    its own client; a thread of the same process shares it."""
    import os

    from dagster_project.resources.store import StoreResource

    store = StoreResource(root=str(tmp_path / "data"), kind="s3", bucket="veritas-fork", endpoint_url="http://127.0.0.1:9")
    parent = store.client()
    assert store.client() is parent
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report whether it got a client of its own, then leave without pytest's teardown
        try:
            os.write(write, b"own" if store.client() is not parent else b"shared")
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    assert os.read(read, 16) == b"own"
    assert store.client() is parent  # the parent keeps its own
