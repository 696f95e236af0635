"""Helpers of the operations tests (issue 7): a SeaweedFS server, a schema-driven model stub, fast demo configs."""

import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import yaml

from dagster_project.simulation.openai_stub import OpenAIStub
from tests.conftest import write_demo_config

VENV_BIN = Path(__file__).resolve().parent.parent / ".venv" / "bin"
S3_KEYS = {"VERITAS_TEST_S3_KEY": "veritas-test-key", "VERITAS_TEST_S3_SECRET": "veritas-test-secret"}


def _is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_port() -> int:
    """A free loopback port whose +10000 neighbour is free too (SeaweedFS puts its gRPC port there)."""
    import random

    while True:
        port = random.randint(20000, 45000)
        if _is_free(port) and _is_free(port + 10000):
            return port


def stop_group(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """SIGTERM the process group, then SIGKILL what is left after ``grace`` seconds."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


@contextlib.contextmanager
def seaweedfs(folder: Path):
    """A real S3 server (SeaweedFS) on loopback; yields its endpoint URL."""
    weed = VENV_BIN / "weed"
    if not weed.exists():
        import shutil

        weed = Path(shutil.which("weed") or "weed")
    data = folder / "seaweed"
    data.mkdir(parents=True, exist_ok=True)
    s3_port = free_port()
    cmd = [str(weed), "server", f"-dir={data}", "-s3", f"-s3.port={s3_port}", f"-master.port={free_port()}",
           f"-volume.port={free_port()}", f"-filer.port={free_port()}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1"]
    endpoint = f"http://127.0.0.1:{s3_port}"
    with open(folder / "seaweed.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError

        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                              aws_access_key_id="k", aws_secret_access_key="s")
        deadline = time.monotonic() + 90
        while True:
            try:
                client.list_buckets()
                break
            except (BotoCoreError, ClientError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"SeaweedFS did not answer: {(folder / 'seaweed.log').read_text()[-2000:]}") from None
                time.sleep(0.5)
        yield endpoint
    finally:
        stop_group(proc)


WORDS = ["vaccines", "mayor", "flood", "bridge", "election", "tax", "river", "school", "virus", "border", "farm", "police",
         "storm", "bank", "hospital", "train", "minister", "wolves", "oil", "bread", "satellite", "court", "festival"]


def _pick(options: list, seed: str):
    return options[int(hashlib.sha256(seed.encode()).hexdigest(), 16) % len(options)]


def _instance(schema: dict, seed: str, user: str):
    """A deterministic instance of the answer schema; enum values vary with the prompt, so labels vary."""
    if "enum" in schema:
        if set(schema["enum"]) == {"yes", "no"}:
            return "yes"
        if "part_of_claim" in schema["enum"]:
            return "part_of_claim"
        return _pick(schema["enum"], seed)
    kind = schema.get("type")
    if kind == "object":
        return {k: _instance(v, f"{seed}/{k}", user) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return []
    if kind == "string":
        return "scripted answer"
    if kind in ("integer", "number"):
        return 0
    if kind == "boolean":
        return True
    return None


def schema_responder(mode: str, body: dict):
    """Answers every prompt of the pipeline from the request's JSON schema (the stub stays ignorant of prompts)."""
    user = json.dumps(body["messages"][-1]["content"])
    fmt = body.get("response_format") or {}
    schema = fmt.get("schema") or (fmt.get("json_schema") or {}).get("schema") or {}
    answer = _instance(schema, mode + user, user)
    if isinstance(answer, dict) and "claim" in answer:
        media = [t for t in ("<image:1>", "<video:1>") if t in user]
        answer["claim"] = ("The post shows " + " and ".join(media) + " and says it happened." if media
                           else " ".join(_pick(WORDS, f"{user}/{i}") for i in range(8)).capitalize() + ".")
    return 200, json.dumps(answer)


def write_ops_config(folder: Path, stub: OpenAIStub, store: dict | None = None, executor: dict | None = None,
                     llm_cache: str | None = None) -> str:
    """The demo config with three raters on ``stub`` (fast, deterministic), optionally another store and executor."""
    folder.mkdir(parents=True, exist_ok=True)
    path = Path(write_demo_config(folder, max_candidate_media=2, max_media=2, evidence_tokens_embedded=150))
    cfg = yaml.safe_load(path.read_text())
    cfg["llm"] = {"members": [
        {"name": f"stub-{i}", "model": "openai/stub-model", "api_base": stub.base(f"m{i}"), "api_key_env": "STUB_KEY",
         "context_window": 8192}
        for i in range(3)
    ]}
    if llm_cache:
        cfg["llm"]["cache_path"] = llm_cache
    if store:
        cfg["store"] = store
    if executor:
        cfg["executor"] = executor
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def release_files(folder: Path) -> dict[str, bytes]:
    """A release's files; the manifest without the fields that name this run (version, time, input versions) or
    describe how it paid (llm_cost: cache hits and spend differ when a run reuses another's LLM cache)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            if p.name == "manifest.json":
                manifest = json.loads(data)
                for volatile in ("version", "created", "inputs", "llm_cost"):
                    manifest.pop(volatile, None)
                data = json.dumps(manifest, sort_keys=True).encode()
            out[p.relative_to(folder).as_posix()] = data
    return out


@contextlib.contextmanager
def redis_server(folder: Path):
    """A throwaway redis-server on loopback (no persistence); yields its URL."""
    import shutil

    port = free_port()
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop_group(proc)


@contextlib.contextmanager
def celery_workers(config_path: str, n: int, folder: Path, env: dict | None = None):
    """``n`` dagster-celery workers (concurrency 1 each, no prefetch) for the config's broker; yields their log files."""
    from dagster_project.config import load_config
    from dagster_project.executors import CELERY_WORKER_ARGS, write_celery_worker_yaml

    config = load_config(config_path)
    worker_yaml = write_celery_worker_yaml(config, folder / "worker.yaml")
    root = Path(__file__).resolve().parent.parent
    worker_env = {**os.environ, **(env or {}), "VERITAS_CONFIG": config["path"],
                  "DAGSTER_HOME": str(Path(config["data_dir"]) / "dagster"),
                  "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                  "PATH": str(VENV_BIN) + os.pathsep + os.environ.get("PATH", "")}  # the wrapper execs `celery`
    Path(worker_env["DAGSTER_HOME"]).mkdir(parents=True, exist_ok=True)
    settings = Path(worker_env["DAGSTER_HOME"]) / "dagster.yaml"
    if not settings.exists():
        settings.write_text("telemetry:\n  enabled: false\n")
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    # create the SQLite storage once, before the workers open it together (two creators leave two schema heads)
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(worker_env["DAGSTER_HOME"])):
        pass
    procs, logs = [], []
    try:
        for i in range(n):
            log_path = folder / f"worker-{i}.log"
            with open(log_path, "wb") as log:
                procs.append(subprocess.Popen(
                    [str(VENV_BIN / "dagster-celery"), "worker", "start", "-A", "dagster_celery.app", "-y", str(worker_yaml),
                     "-n", f"veritas-w{i}", "--", *CELERY_WORKER_ARGS, "--loglevel=INFO"],
                    cwd=root, env=worker_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
            logs.append(log_path)
        from celery import Celery

        app = Celery(broker=config["executor"]["broker"])
        deadline = time.monotonic() + 120
        while len(app.control.ping(timeout=1.0) or []) < n:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise RuntimeError("celery workers did not come up: " + " | ".join(p.read_text()[-800:] for p in logs))
        yield logs
    finally:
        for p in procs:
            stop_group(p, grace=10)


# ---- scripted replies for the OpenAI stub, and a Router that backs off in milliseconds ----
def rating(category: str, certainty: str = "certain", why: str = "scripted") -> dict:
    """One scripted rater answer to a stage-6 property prompt."""
    return {"category": category, "certainty": certainty, "justification": why, "tags": []}


def rating_reply(user: str, contextualization: dict, veracity: dict) -> tuple:
    """The scripted reply to a stage-6 rating prompt (media authenticity and contextualization, veracity, context
    coverage); any other prompt gets a 500 that names it."""
    if "on authenticity and on contextualization" in user:
        return 200, json.dumps({"authenticity": rating("positive"), "contextualization": contextualization})
    if "Rate the claim on veracity" in user:
        return 200, json.dumps(veracity)
    if "Rate the claim on context_coverage" in user:
        return 200, json.dumps(rating("positive", "rather certain"))
    return 500, {"error": {"message": f"unscripted prompt: {user[-80:]}"}}


@contextlib.contextmanager
def fast_router_backoff(max_sleep_s: float = 0.01):
    """Shorten the retry backoff (seconds per 429/5xx) of litellm's Router and of the openai SDK (OpenAIDirect) while
    keeping their decisions; yields the list of the sleeps they asked for. litellm is imported offline first (cost
    map from the package)."""
    from dagster_project.resources.llm import _import_litellm

    _import_litellm()
    from litellm.router_python_host import PythonHost
    from openai._base_client import SyncAPIClient

    asked: list[float] = []
    original, original_sdk = PythonHost.sleep_sync, SyncAPIClient._calculate_retry_timeout

    def short_sleep(self, seconds: float) -> None:
        asked.append(seconds)
        time.sleep(min(seconds, max_sleep_s))

    def short_retry_timeout(self, *args, **kwargs) -> float:
        seconds = original_sdk(self, *args, **kwargs)
        asked.append(seconds)
        return min(seconds, max_sleep_s)

    PythonHost.sleep_sync, SyncAPIClient._calculate_retry_timeout = short_sleep, short_retry_timeout
    try:
        yield asked
    finally:
        PythonHost.sleep_sync, SyncAPIClient._calculate_retry_timeout = original, original_sdk
