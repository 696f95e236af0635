"""LLM ensemble resource: per member the openai SDK (OpenAI-compatible endpoints) or a litellm Router (other providers,
fallbacks), embedded local model, durable SQLite cache and cost ledger."""

import atexit
import base64
import hashlib
import json
import os
import re
import socket
import sqlite3
import threading
import time
import uuid
from collections import Counter, deque
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import dagster as dg
import pydantic
from pydantic import Field, PrivateAttr

from dagster_project.ledger import LEDGER_ADDED as _LEDGER_ADDED, SUMS as _SUMS, ledger_report, pack as _pack
from dagster_project.resources.local_llm import LocalModelServer, smollm2_gguf_path

LOCAL_PREFIX = "local/"
_LOCAL_API_KEY = "sk-local-no-key"  # the OpenAI client insists on some key; the local server ignores it


def _import_litellm():
    """Import litellm lazily (about 7 s) and only after forcing its offline, bundled cost map."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    os.environ["LITELLM_OFFLINE_MODE"] = "true"
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm


class OpenAIDirect:
    """One OpenAI-compatible deployment through the openai SDK, called like a Router: the SDK retries 429 (after its
    Retry-After), 408/409, 5xx, timeouts and lost connections itself, with backoff. litellm's Router, which wraps the
    same SDK for these endpoints, spends about 7 ms more CPU per call on bookkeeping this resource does itself
    (cost, ledger, limits); at a panel's 100 calls/s that was most of a core (bench/llm.py)."""

    def __init__(self, params: dict[str, Any], num_retries: int, timeout: float):
        import openai

        self.model = params["model"].split("/", 1)[1]
        self.client = openai.OpenAI(base_url=params["api_base"], api_key=params.get("api_key"),
                                    max_retries=num_retries, timeout=timeout)

    def completion(self, model: str, messages: list[dict], **kwargs: Any):
        from openai.types.chat import ChatCompletion

        # the body as built, through the client's retry loop: chat.completions.create would first walk every
        # message and the answer schema against its typed parameters (about 2 ms per call here)
        return self.client.post("/chat/completions", cast_to=ChatCompletion,
                                body={"model": self.model, "messages": messages, **kwargs})


def direct_deployment(params: dict[str, Any], fallbacks: list) -> bool:
    """Whether a member's deployment goes through OpenAIDirect: an OpenAI-compatible server of its own (``api_base``:
    the embedded one, llama.cpp, vLLM, a simulated panel) without fallbacks. OpenAI's own models keep the Router,
    which maps their parameters per model (max_completion_tokens, unsupported temperature)."""
    return params["model"].startswith("openai/") and bool(params.get("api_base")) and not fallbacks


def image_part(jpeg_bytes: bytes) -> dict:
    """A chat content part carrying a JPEG as a data URL (only vision members receive these)."""
    b64 = base64.b64encode(jpeg_bytes).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{b64}"}}


def strip_images(messages: list[dict]) -> list[dict]:
    """Drop image parts, keep the text; text-only part lists collapse to a plain string every provider accepts."""
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            texts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
            m = {**m, "content": "\n".join(texts)}
        out.append(m)
    return out


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


def parse_json_text(raw: str) -> Any:
    """Parse a JSON answer, tolerating only a surrounding markdown code fence and raw newlines or tabs inside
    strings (small models emit them; the value is unchanged). Nothing else is repaired."""
    text = raw.strip()
    m = _FENCE.match(text)
    if m:
        text = m.group(1).strip()
    return json.loads(text, strict=False)


class RefusalError(ValueError):
    """The model declined to answer (OpenAI-style ``refusal`` field)."""


class ModelUnavailable(dg.Failure):
    """A member's endpoint is dead (nothing listens, or the embedded server process is gone): the stage stops."""

    stops_stage = True  # map_records lets it through at once instead of counting it as one item's failure

    def __init__(self, message: str):
        super().__init__(description=message, allow_retries=False)  # a step retry would meet the same dead endpoint


class RunStopped(dg.Failure):
    """The process was asked to stop (SIGINT/SIGTERM): no more model calls, and no stage output is written."""

    stops_stage = True

    def __init__(self, message: str):
        super().__init__(description=message, allow_retries=False)


_STOP = threading.Event()  # process-wide: a signal stops every resource copy Dagster made
_STOP_REASON: list[str] = []


def request_stop(reason: str) -> None:
    """Every later model call raises RunStopped (a signal handler calls this before stopping the servers)."""
    _STOP_REASON[:] = [reason]
    _STOP.set()


def stop_requested() -> str:
    """Why the process is stopping, or '' while it is not."""
    return (_STOP_REASON[0] if _STOP_REASON else "stop requested") if _STOP.is_set() else ""


def _refused(api_base: str) -> str:
    """'' when a TCP connection to the endpoint opens, else why not (connection refused, no route...)."""
    import httpx

    url = httpx.URL(api_base)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.host, port), timeout=3):
            return ""
    except OSError as err:
        return f"{type(err).__name__}: {err.strerror or err}"


class BudgetExceeded(RuntimeError):
    """The quarter's model spend reached ``llm.budget_usd``: the stage stops (answers so far stay cached)."""

    stops_stage = True  # map_records lets it through instead of counting it as one item's failure


def _quarter_label(value: str) -> str:
    """``2025-10`` or ``2025Q4`` as ``2025Q4``; anything else (no partition) as ''."""
    if not value:
        return ""
    from dagster_project.partitions import to_label

    try:
        return to_label(value)
    except ValueError:
        return ""


class RateLimiter:
    """Blocking requests-per-minute and tokens-per-minute limits over a sliding 60 s window."""

    def __init__(self, rpm: int | None = None, tpm: int | None = None, clock=time.monotonic, sleep=time.sleep,
                 window_s: float = 60.0):
        self.rpm, self.tpm, self.window = rpm, tpm, window_s
        self._clock, self._sleep = clock, sleep
        self._starts: deque[float] = deque()
        self._tokens: deque[tuple[float, int]] = deque()
        self._lock = threading.Lock()

    def wait_time(self) -> float:
        """Seconds until one more request fits both limits (0 when it fits now)."""
        now = self._clock()
        while self._starts and self._starts[0] <= now - self.window:
            self._starts.popleft()
        while self._tokens and self._tokens[0][0] <= now - self.window:
            self._tokens.popleft()
        waits = [0.0]
        if self.rpm and len(self._starts) >= self.rpm:
            waits.append(self._starts[len(self._starts) - self.rpm] + self.window - now)
        if self.tpm and self._tokens and sum(n for _, n in self._tokens) >= self.tpm:
            spent, budget = 0, sum(n for _, n in self._tokens) - self.tpm
            for ts, n in self._tokens:  # wait until enough of the oldest usage leaves the window
                spent += n
                if spent > budget:
                    waits.append(ts + self.window - now)
                    break
        return max(waits)

    def acquire(self) -> float:
        """Block until a request may start; returns the seconds waited."""
        waited = 0.0
        if not (self.rpm or self.tpm):
            return waited
        while True:
            with self._lock:
                delay = self.wait_time()
                if delay <= 0:
                    self._starts.append(self._clock())
                    return waited
            self._sleep(delay)
            waited += delay

    def used(self, tokens: int) -> None:
        if self.tpm and tokens:
            with self._lock:
                self._tokens.append((self._clock(), tokens))


class FallbackModel(dg.Config):
    """Another deployment a member's Router falls back to when its own model keeps failing."""

    model: str
    api_base: str | None = None
    api_key_env: str | None = None


class EnsembleMember(dg.Config):
    name: str
    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    temperature: float = 0.0
    seed: int | None = None
    max_tokens: int = 384
    rpm: int | None = None  # requests per minute, enforced here before each request (litellm only routes by it)
    tpm: int | None = None  # tokens per minute, enforced here from the usage of the last minute's answers
    max_parallel: int = 1  # requests in flight at once for this member; callers wait for a slot
    fallbacks: list[FallbackModel] = Field(default_factory=list)  # tried in order by the member's Router after its retries are spent
    vision: bool = False
    input_cost_per_token: float | None = None
    output_cost_per_token: float | None = None
    # "json_object" (+schema) suits llama.cpp/litellm's schema translation; "json_schema" for strict OpenAI-style APIs
    json_mode: str = "json_object"
    context_window: int | None = None  # tokens; empty: litellm's model info (the embedded model: its server's n_ctx)
    # a cap on every "justification" string of the answer schema sent to it (a small local model generates a few
    # tokens per second, and the schema's grammar holds it to the cap); empty: the schema's own limits
    max_justification_chars: int | None = None

    @property
    def is_embedded(self) -> bool:
        return self.model.startswith(LOCAL_PREFIX) and self.api_base is None

    def answer_schema(self, schema: dict) -> dict:
        """The JSON schema as this member is asked for it: with its justification cap, if it has one."""
        return _cap_justifications(schema, self.max_justification_chars) if self.max_justification_chars else schema


def _cap_justifications(node: Any, cap: int) -> Any:
    """A copy of a JSON schema in which every object property named "justification" allows at most ``cap`` chars."""
    if isinstance(node, list):
        return [_cap_justifications(v, cap) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _cap_justifications(v, cap) for k, v in node.items()}
    field = out.get("properties", {}).get("justification") if isinstance(out.get("properties"), dict) else None
    if isinstance(field, dict) and field.get("type") == "string":
        field["maxLength"] = min(cap, field.get("maxLength", cap))
    return out


class LLMAnswer(pydantic.BaseModel):
    member: str
    model: str  # the model that answered: the member's own, or the fallback the Router used
    parsed: dict | None
    raw: str
    error: str | None
    cache_hit: bool
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    latency_s: float


def default_members() -> list[EnsembleMember]:
    return [
        EnsembleMember(name="smollm2-t0", model="local/smollm2", temperature=0.0, seed=1),
        EnsembleMember(name="smollm2-t6", model="local/smollm2", temperature=0.6, seed=2),
        EnsembleMember(name="smollm2-t9", model="local/smollm2", temperature=0.9, seed=3),
    ]


_SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS llm_cache (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    member TEXT NOT NULL,
    template_id TEXT NOT NULL,
    template_hash TEXT NOT NULL,
    raw TEXT NOT NULL,
    reasoning TEXT,
    parsed_json TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cost_usd REAL NOT NULL,
    created_ts REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS llm_ledger (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    run_id TEXT NOT NULL,
    stage TEXT NOT NULL,
    member TEXT NOT NULL,
    model TEXT NOT NULL,
    template_id TEXT NOT NULL,
    cache_key TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cost_usd REAL NOT NULL,
    latency_s REAL NOT NULL,
    cache_hit INTEGER NOT NULL,
    error TEXT
);
CREATE INDEX IF NOT EXISTS llm_ledger_stage ON llm_ledger(stage);
CREATE INDEX IF NOT EXISTS llm_ledger_run ON llm_ledger(run_id);
CREATE INDEX IF NOT EXISTS llm_ledger_key ON llm_ledger(cache_key);
CREATE TABLE IF NOT EXISTS llm_outputs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    call_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    ts REAL NOT NULL,
    raw TEXT NOT NULL,
    reasoning TEXT,
    refusal TEXT,
    error TEXT
);
CREATE INDEX IF NOT EXISTS llm_outputs_call ON llm_outputs(call_id);
"""
_CACHE_INSERT = (
    "INSERT OR REPLACE INTO llm_cache (key, model, member, template_id, template_hash, raw, reasoning, parsed_json,"
    " prompt_tokens, completion_tokens, cost_usd, created_ts, error) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
)
_CACHE_ADDED = {"error": "TEXT"}  # a model's settled failure (refusal, invalid answer after the re-ask)


class _RequestThreads:
    """The threads hedged requests run on (``LLMResource._send``): daemon threads, so that a request that lost its
    race, whose answer nobody waits for, does not hold up the process's exit until it times out (a thread pool's
    threads are joined at exit: a stage's process lingered 8 s after its run for a hung request)."""

    def __init__(self, size: int):
        import queue

        self._jobs: Any = queue.SimpleQueue()
        self._size = size
        for i in range(size):
            threading.Thread(target=self._work, name=f"llm-hedge-{i}", daemon=True).start()

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, fn = job
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as err:  # noqa: BLE001 - the caller reads it from the future
                    future.set_exception(err)

    def submit(self, fn):
        from concurrent.futures import Future

        future: Future = Future()
        self._jobs.put((future, fn))
        return future

    def shutdown(self) -> None:
        """Each thread ends once its request (if any) has: the requests still queued run first."""
        for _ in range(self._size):
            self._jobs.put(None)


class LLMResource(dg.ConfigurableResource):
    """An ensemble of chat models answering JSON against a schema, with a shared durable cache and a ledger."""

    members: list[EnsembleMember] = Field(default_factory=default_members)
    cache_path: str = ".veritas/llm_cache.sqlite"
    local_n_threads: int = 2
    num_retries: int = 2
    timeout_s: float = 120
    # "auto": members served by an OpenAI-compatible server of their own (model "openai/..." with an api_base, the
    # embedded server) without fallbacks are called through the openai SDK directly (OpenAIDirect: about 7 ms less CPU
    # per call), every other member through litellm's Router; "litellm": all through it.
    transport: Literal["auto", "litellm"] = "auto"
    # Seconds a request may go unanswered before the same request is sent again beside it (a hedged request): the first
    # answer wins, the other is left to end on its own (its tokens are paid, not counted). A hung request then holds its
    # claim this long instead of the whole timeout_s, and a demand round no longer waits on it. Set it well above the
    # members' slow answers (it re-sends those too): each re-send is counted as llm/hedged/<member>. None: never.
    hedge_after_s: float | None = Field(None, gt=0)
    # A refusal or an answer still invalid after the re-ask is cached as that model's failure, so re-runs do not
    # pay for it again; set this to ask such calls again (transport errors are never cached).
    retry_failed: bool = False
    # Claims a model stage works on at once (threads); each member's max_parallel/rpm/tpm still bound its calls.
    parallel_claims: int = 1
    # Consecutive calls of one member that fail because its endpoint refuses connections before the stage stops
    # (a dead embedded server stops it at the first); rate limits, 5xx and bad answers never count.
    breaker_failures: int = 3
    # USD the model calls of one quarter may cost (the ledger's sum); reaching it stops the stage before the next
    # paid call. Cache hits stay free, so raising it and running again resumes from the cache. None: no limit.
    budget_usd: float | None = None

    _lock: Any = PrivateAttr(default_factory=threading.RLock)  # made per instance, also for copies
    _server: Any = PrivateAttr(default=None)
    _routers: Any = PrivateAttr(default=None)
    _semaphores: Any = PrivateAttr(default=None)
    _held: Any = PrivateAttr(default=None)  # (run, stage, member) -> [seconds a slot was held, first taken, given back]
    _limiters: Any = PrivateAttr(default=None)
    _hedging: Any = PrivateAttr(default=None)  # (thread pool for hedged requests, (run, stage, member) -> re-sends)
    _conns: Any = PrivateAttr(default=None)
    _db_ready: bool = PrivateAttr(default=False)
    _run_id: str = PrivateAttr(default="")
    _quarter: str = PrivateAttr(default="")
    _unreachable: Any = PrivateAttr(default=None)  # member -> consecutive calls that found its endpoint dead
    _dead: Any = PrivateAttr(default=None)  # member -> why its breaker opened

    # ---- lifecycle -------------------------------------------------------------------------
    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._run_id = getattr(context, "run_id", None) or ""
        run = getattr(context, "dagster_run", None)
        key = (run.tags.get("dagster/partition") if run is not None else None) or ""
        self._quarter = _quarter_label(key)

    def set_quarter(self, quarter: str) -> None:
        """Label later ledger rows with this quarter (Dagster runs set it from their partition)."""
        self._quarter = _quarter_label(quarter)

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        self.close()

    def close(self) -> None:
        """Stop the embedded server if this resource started it (safe to call repeatedly)."""
        server, self._server = self._server, None
        if server is not None:
            server.stop()
        hedging, self._hedging = self._hedging, None
        if hedging is not None:  # requests that lost their race end on their own: their answers are not waited for
            hedging[0].shutdown()
        self._routers = {}
        self._close_db()

    def _state_lock(self) -> threading.Lock:
        return self._lock

    @property
    def run_id(self) -> str:
        return self._run_id

    def member_names(self) -> list[str]:
        return [m.name for m in self.members]

    def member(self, name: str) -> EnsembleMember:
        for m in self.members:
            if m.name == name:
                return m
        raise KeyError(f"unknown ensemble member {name!r}; known: {self.member_names()}")

    def is_vision(self, name: str) -> bool:
        return self.member(name).vision

    def model_set(self) -> list[dict]:
        """The ensemble as recorded in release manifests: who rated, with which model and sampling, and whether it saw
        the images (``vision``: a member without it rates media from their alt text, caption and source only)."""
        return [{"name": m.name, "model": m.model, "temperature": m.temperature, "seed": m.seed, "vision": m.vision}
                for m in self.members]

    def local_server(self) -> LocalModelServer:
        """The one embedded llama.cpp server shared by every local member, started on first need."""
        with self._state_lock():
            if self._server is not None and not self._server.running:
                raise self._server.died("during the run")  # restarting would hide the crash (and repeat it)
            if self._server is None:
                log = Path(self.cache_path).parent / "llama_server.log"  # kept beside the cache for post-mortems
                log.parent.mkdir(parents=True, exist_ok=True)
                server = LocalModelServer(smollm2_gguf_path(), n_threads=self.local_n_threads, log_path=str(log))
                server.start()
                atexit.register(server.stop)  # backstop if close()/teardown never runs
                self._server = server
            return self._server

    def _deployment(self, model: str, api_base: str | None, api_key_env: str | None) -> dict[str, Any]:
        params: dict[str, Any] = {"model": model, "timeout": self.timeout_s}
        if model.startswith(LOCAL_PREFIX):
            base = api_base or self.local_server().api_base  # no api_base: the embedded server
            params.update(model="openai/" + model[len(LOCAL_PREFIX):], api_base=base, api_key=_LOCAL_API_KEY)
        elif api_base:
            params["api_base"] = api_base
        if api_key_env:
            params["api_key"] = os.environ.get(api_key_env) or ""
        return params

    def _router(self, m: EnsembleMember):
        """One client per member, the only retry loop around the transport: OpenAIDirect, or a litellm Router (with
        the member's fallbacks)."""
        with self._state_lock():
            if self._routers is None:
                self._routers = {}
            router = self._routers.get(m.name)
            if router is not None:
                return router
            params = self._deployment(m.model, m.api_base, m.api_key_env)
            if self.transport == "auto" and direct_deployment(params, m.fallbacks):
                router = self._routers[m.name] = OpenAIDirect(params, self.num_retries, self.timeout_s)
                return router
            litellm = _import_litellm()
            # rpm/tpm are not passed: litellm would only route by them (and track usage per call, ~1 ms), while
            # each Router holds one deployment; the blocking limits are this resource's (see _limiter)
            # litellm prices each answer itself; with the member's own prices it skips the cost-map search
            params.update({k: v for k, v in (("input_cost_per_token", m.input_cost_per_token),
                                             ("output_cost_per_token", m.output_cost_per_token)) if v is not None})
            model_list = [{"model_name": m.name, "litellm_params": params, "model_info": {"id": f"{m.name}#0"}}]
            names = []
            for i, fb in enumerate(m.fallbacks, 1):
                names.append(f"{m.name}~fallback{i}")
                model_list.append({"model_name": names[-1], "model_info": {"id": f"{m.name}#{i}"},
                                   "litellm_params": self._deployment(fb.model, fb.api_base, fb.api_key_env)})
            router = litellm.Router(
                model_list=model_list,
                num_retries=self.num_retries,
                timeout=self.timeout_s,
                fallbacks=[{m.name: names}] if names else [],
            )
            self._routers[m.name] = router
            return router

    # ---- circuit breaker: a dead endpoint stops the stage, it is not a per-claim drop -----------------
    def _endpoint(self, m: EnsembleMember) -> str:
        if m.is_embedded:
            return self._server.api_base if self._server is not None and self._server.port else "the embedded server"
        return m.api_base or f"{m.model.split('/')[0]}'s default endpoint"

    def _open_breaker(self, m: EnsembleMember, cause: str) -> ModelUnavailable:
        message = (f"ensemble member {m.name!r} (model {m.model}, endpoint {self._endpoint(m)}) is unreachable: "
                   f"{cause}")
        with self._state_lock():
            if self._dead is None:
                self._dead = {}
            self._dead.setdefault(m.name, message)
        return ModelUnavailable(message)

    def _check_open(self) -> None:
        """Raise before any work once the process is stopping or a member's breaker has opened."""
        reason = stop_requested()
        if reason:
            raise RunStopped(f"no more model calls: {reason}")
        dead = self._dead
        if dead:
            raise ModelUnavailable(next(iter(dead.values())))

    def _dead_cause(self, m: EnsembleMember) -> tuple[str, bool]:
        """After a failed call: why the member's endpoint is dead ('' when it is alive, so the failure is per-call),
        and whether that is certain at once (the embedded process ended) rather than after a few calls."""
        if m.is_embedded:
            server = self._server
            if server is not None and not server.running:
                return str(server.died("during the run")), True
            return "", False
        if m.api_base:
            refused = _refused(m.api_base)
            return (f"{refused} (nothing listens there)" if refused else ""), False
        return "", False

    def _note_call(self, m: EnsembleMember, transport_error: Exception | None) -> None:
        """Count consecutive calls that found the member's endpoint dead; raise ModelUnavailable when the breaker opens."""
        with self._state_lock():
            if self._unreachable is None:
                self._unreachable = {}
        if transport_error is None:
            self._unreachable[m.name] = 0
            return
        self._check_open()  # stopping on a signal kills the server: that is not the member's fault
        cause, certain = self._dead_cause(m)
        if not cause:
            return  # the endpoint accepts connections: a rate limit, 5xx or timeout stays this call's matter
        with self._state_lock():
            n = self._unreachable[m.name] = self._unreachable.get(m.name, 0) + 1
        if certain or n >= self.breaker_failures:
            raise self._open_breaker(m, f"{cause}; {n} call(s) in a row failed, last: {str(transport_error)[:300]}")

    def check_stage(self, stage: str, run_id: str) -> None:
        """Before a model stage writes its table: raise when the run is stopping, a member's endpoint died, or none
        of the stage's calls in this run got an answer (its output would be fallbacks and drops only)."""
        self._check_open()
        summary = self.ledger_summary(stage=stage, run_id=run_id)
        if summary["calls"] and summary["transport_errors"] == summary["calls"]:
            with self._db() as conn:
                last = conn.execute("SELECT member, model, error FROM llm_ledger WHERE stage=? AND run_id=?"
                                    " ORDER BY id DESC LIMIT 1", (stage, run_id)).fetchone()
            raise ModelUnavailable(f"{stage}: none of its {summary['calls']} model calls got an answer; last: member "
                                   f"{last[0]!r} (model {last[1]}): {last[2]}")

    def _served_model(self, m: EnsembleMember, response: Any) -> str:
        """The configured model string of the deployment that answered (a fallback's, after a fallback)."""
        hidden = getattr(response, "_hidden_params", None) or {}
        model_id = str(hidden.get("model_id") or "")
        if model_id.startswith(f"{m.name}#"):
            i = int(model_id.rsplit("#", 1)[1])
            if 0 < i <= len(m.fallbacks):
                return m.fallbacks[i - 1].model
        return m.model

    def _limiter(self, m: EnsembleMember) -> "RateLimiter":
        with self._state_lock():
            if self._limiters is None:
                self._limiters = {}
            limiter = self._limiters.get(m.name)
            if limiter is None:
                limiter = self._limiters[m.name] = RateLimiter(rpm=m.rpm, tpm=m.tpm)
            return limiter

    def _semaphore(self, m: EnsembleMember) -> threading.Semaphore:
        with self._state_lock():
            if self._semaphores is None:
                self._semaphores = {}
            sem = self._semaphores.get(m.name)
            if sem is None:
                sem = self._semaphores[m.name] = threading.Semaphore(max(1, m.max_parallel))
            return sem

    def _send(self, stage: str, m: EnsembleMember, request):
        """``request()`` (one completion through the member's client), hedged after ``hedge_after_s``: when no answer
        has come by then, the same request again beside it; the first answer wins, and when both fail, the first's
        error is raised. Without hedge_after_s, in this thread."""
        if not self.hedge_after_s:
            return request()
        from concurrent.futures import FIRST_COMPLETED, wait

        with self._state_lock():
            if self._hedging is None:
                # room for every member's slots twice over: a request and its re-send
                slots = sum(max(1, x.max_parallel) for x in self.members)
                self._hedging = _RequestThreads(2 * slots + 2), Counter()
            pool, hedged = self._hedging
        first = pool.submit(request)
        done, _ = wait([first], timeout=self.hedge_after_s)
        if done:
            return first.result()
        with self._state_lock():
            hedged[(self._run_id, stage, m.name)] += 1
        sent = [first, pool.submit(request)]
        while sent:
            done, _ = wait(sent, return_when=FIRST_COMPLETED)
            for f in done:
                if f.exception() is None:
                    return f.result()
                sent.remove(f)
        return first.result()  # both failed: the first request's error

    def hedged(self, stage: str) -> dict[str, int]:
        """Per member, the requests of this run's calls for ``stage`` that were sent again (see hedge_after_s)."""
        with self._state_lock():
            counts = self._hedging[1] if self._hedging else {}
            return {name: n for (run, st, name), n in counts.items() if run == self._run_id and st == stage}

    @contextmanager
    def _holding(self, stage: str, m: EnsembleMember):
        """Time a slot of ``m`` held for ``stage`` (see slot_busy)."""
        began = time.monotonic()
        try:
            yield
        finally:
            ended = time.monotonic()
            with self._state_lock():
                if self._held is None:
                    self._held = {}
                held = self._held.setdefault((self._run_id, stage, m.name), [0.0, began, ended])
                held[0] += ended - began
                held[1], held[2] = min(held[1], began), max(held[2], ended)

    def slot_busy(self, stage: str) -> dict[str, float]:
        """Per member, the share of its max_parallel slots that this run's calls for ``stage`` held (in this process),
        from the stage's first call to its last. A claim asks each question of every member at once, so the member
        near 1.0 paces the stage: the others wait for it (more max_parallel there, where the provider allows it)."""
        with self._state_lock():
            held = {name: list(v) for (run, st, name), v in (self._held or {}).items()
                    if run == self._run_id and st == stage}
        if not held:
            return {}
        span = max(v[2] for v in held.values()) - min(v[1] for v in held.values())
        if span <= 0:
            return {}
        return {name: round(v[0] / (span * max(1, self.member(name).max_parallel)), 3) for name, v in held.items()}

    # ---- storage ---------------------------------------------------------------------------
    @contextmanager
    def _db(self):
        """A connection for this block, taken from the free ones (or opened) and given back after: a thread that ends
        leaves none behind, and connections stay open because closing the last one checkpoints the WAL (slow)."""
        with self._state_lock():
            if self._conns is None:
                self._conns = [], []  # free, all opened
            free, opened = self._conns
            conn = free.pop() if free else None
            if conn is None:  # under the lock: the first connection switches to WAL and creates the schema
                conn = self._connect()
                opened.append(conn)
        try:
            yield conn
        finally:
            with self._state_lock():
                if self._conns is not None and self._conns[1] is opened:
                    free.append(conn)

    def _close_db(self) -> None:
        conns, self._conns = self._conns, None
        for conn in conns[1] if conns else []:
            conn.close()

    def _connect(self) -> sqlite3.Connection:
        path = Path(self.cache_path)
        if not self._db_ready:
            path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout=30000")
        conn.execute("PRAGMA synchronous=NORMAL")  # WAL stays consistent; a power cut may lose the last few rows
        if not self._db_ready:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA_SQL)
            for table, added in (("llm_ledger", _LEDGER_ADDED), ("llm_cache", _CACHE_ADDED)):
                have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
                for column, decl in added.items():
                    if column not in have:
                        try:
                            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
                        except sqlite3.OperationalError:  # another process added it first
                            pass
            conn.execute("CREATE INDEX IF NOT EXISTS llm_ledger_quarter ON llm_ledger(quarter)")
            self._db_ready = True
        return conn

    @staticmethod
    def cache_key(m: EnsembleMember, messages: list[dict], schema: dict, template_id: str, template_hash: str,
                  media_hashes: list[str]) -> str:
        payload = {
            "member": m.name,  # two members on one model name may be different deployments: never share answers
            "model": m.model,
            "temperature": m.temperature,
            "seed": m.seed,
            "template_id": template_id,
            "template_hash": template_hash,
            "messages": messages,
            "media": sorted(media_hashes),
            "schema": schema,
        }
        return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()

    def _cache_get(self, key: str) -> tuple[str, dict | None, str | None, str] | None:
        """(raw, parsed, error, model that answered) of a settled call; a cached failure counts only while
        retry_failed is off."""
        with self._db() as conn:
            row = conn.execute("SELECT raw, parsed_json, error, model FROM llm_cache WHERE key=?", (key,)).fetchone()
        if row is None or (row[2] and self.retry_failed):
            return None
        return row[0], json.loads(row[1]), row[2], row[3]

    @staticmethod
    def _cache_row(key: str, m: EnsembleMember, template_id: str, template_hash: str, raw: str,
                   reasoning: str | None, parsed: dict | None, pt: int, ct: int, cost: float,
                   error: str | None = None) -> tuple:
        return (key, m.model, m.name, template_id, template_hash, raw, reasoning, canonical_json(parsed),
                pt, ct, cost, time.time(), error)

    def _cache_put(self, *args, **kwargs) -> None:
        with self._db() as conn:
            conn.execute(_CACHE_INSERT, self._cache_row(*args, **kwargs))

    def _ledger_add(self, *, stage: str, template_id: str, key: str, attempts: int, ans: LLMAnswer,
                    call_id: str | None = None, outputs: list[tuple] = (), requested_model: str = "",
                    cache_row: tuple | None = None) -> None:
        """One ledger row per call, every raw answer it got, and its cache entry, in one transaction."""
        with self._db() as conn, conn:
            conn.execute("BEGIN")
            if cache_row is not None:
                conn.execute(_CACHE_INSERT, cache_row)
            conn.execute(
                "INSERT INTO llm_ledger (ts, run_id, stage, member, model, template_id, cache_key, attempts,"
                " prompt_tokens, completion_tokens, cost_usd, latency_s, cache_hit, error, quarter, call_id,"
                " requested_model) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (time.time(), self._run_id, stage, ans.member, ans.model, template_id, key, attempts,
                 ans.prompt_tokens, ans.completion_tokens, ans.cost_usd, ans.latency_s, int(ans.cache_hit), ans.error,
                 self._quarter, call_id, requested_model or ans.model),
            )
            conn.executemany(
                "INSERT INTO llm_outputs (call_id, attempt, ts, raw, reasoning, refusal, error) VALUES (?,?,?,?,?,?,?)",
                [(call_id, *row) for row in outputs],
            )

    def raw_outputs(self, stage: str, run_id: str) -> list[dict]:
        """Every call of one stage in one run with its raw answer(s) and reasoning; cache hits give the cached ones."""
        with self._db() as conn:
            calls = conn.execute(
                # a cache hit shows the answers of the call that filled the cache
                "SELECT l.id, l.member, l.model, l.template_id, l.cache_key, l.cache_hit, l.attempts, l.error,"
                " CASE WHEN l.cache_hit = 0 THEN l.call_id ELSE (SELECT o.call_id FROM llm_ledger o"
                "  WHERE o.cache_key = l.cache_key AND o.cache_hit = 0 AND o.call_id IS NOT NULL"
                "  ORDER BY o.id DESC LIMIT 1) END, c.raw, c.reasoning"
                " FROM llm_ledger l LEFT JOIN llm_cache c ON c.key = l.cache_key"
                " WHERE l.stage=? AND l.run_id=? ORDER BY l.id", (stage, run_id),
            ).fetchall()
            attempts: dict[str, list] = {}
            ids = [c[8] for c in calls if c[8]]
            for chunk in range(0, len(ids), 500):
                part = ids[chunk:chunk + 500]
                rows = conn.execute(
                    f"SELECT call_id, attempt, raw, reasoning, refusal, error FROM llm_outputs WHERE call_id IN"
                    f" ({','.join('?' * len(part))}) ORDER BY call_id, attempt", part,
                ).fetchall()
                for r in rows:
                    attempts.setdefault(r[0], []).append(
                        {"attempt": r[1], "raw": r[2], "reasoning": r[3], "refusal": r[4], "error": r[5]})
        out = []
        for (_, member, model, template_id, key, hit, n, error, call_id, cached_raw, cached_reasoning) in calls:
            tried = attempts.get(call_id or "", [])
            last = tried[-1] if tried else {}
            out.append({
                "member": member, "model": model, "template_id": template_id, "cache_key": key,
                "cache_hit": bool(hit), "attempts": int(n), "error": error or "",
                "raw": cached_raw if hit else last.get("raw", ""),
                "reasoning": (cached_reasoning if hit else last.get("reasoning")) or "",
                "attempts_json": json.dumps(tried, ensure_ascii=False),
            })
        return out

    def ledger_summary(self, stage: str | None = None, run_id: str | None = None) -> dict:
        """Totals over the ledger, optionally for one stage and/or run, plus a per-member breakdown."""
        where, args = [], []
        if stage is not None:
            where.append("stage=?"); args.append(stage)
        if run_id is not None:
            where.append("run_id=?"); args.append(run_id)
        clause = (" WHERE " + " AND ".join(where)) if where else ""
        with self._db() as conn:
            total = _pack(conn.execute(f"SELECT {_SUMS} FROM llm_ledger{clause}", args).fetchone())
            rows = conn.execute(f"SELECT member, {_SUMS} FROM llm_ledger{clause} GROUP BY member", args).fetchall()
        total["by_member"] = {r[0]: _pack(r[1:]) for r in rows}
        return total

    def ledger_report(self, quarter: str | None = None) -> dict:
        """The ledger of one quarter (or all of it): totals, by model and by stage; for ``veritas costs``."""
        with self._db() as conn:
            return ledger_report(conn, _quarter_label(quarter) if quarter else None)

    def quarter_spend(self) -> float:
        """What the ledger says this resource's quarter has cost so far, every stage and run together."""
        with self._db() as conn:
            return float(conn.execute("SELECT COALESCE(SUM(cost_usd),0) FROM llm_ledger WHERE quarter=?",
                                      (self._quarter,)).fetchone()[0])

    def _check_budget(self) -> None:
        if self.budget_usd is None:
            return
        spent = self.quarter_spend()
        if spent >= self.budget_usd:
            raise BudgetExceeded(
                f"LLM budget reached: quarter {self._quarter or '(none)'} has spent ${spent:.4f} of llm.budget_usd="
                f"${self.budget_usd:.4f}; raise llm.budget_usd in the config and run again (answers so far are cached)")

    # ---- calls -----------------------------------------------------------------------------
    def _cost(self, m: EnsembleMember, response: Any, pt: int, ct: int) -> float:
        if m.input_cost_per_token is not None or m.output_cost_per_token is not None:
            return pt * (m.input_cost_per_token or 0.0) + ct * (m.output_cost_per_token or 0.0)
        if m.model.startswith(LOCAL_PREFIX):
            return 0.0
        known = (getattr(response, "_hidden_params", None) or {}).get("response_cost")
        if isinstance(known, (int, float)):  # litellm priced it already from the same cost map (0: unmapped)
            return float(known)
        try:  # an OpenAIDirect answer: the same cost map, by its tokens
            return float(sum(_import_litellm().cost_per_token(model=m.model, prompt_tokens=pt, completion_tokens=ct)))
        except Exception:  # noqa: BLE001 - litellm raises many kinds for an unmapped model
            return 0.0  # model missing from the bundled cost map: set the member's per-token overrides instead

    def _response_format(self, m: EnsembleMember, schema: dict) -> dict:
        if m.json_mode == "json_schema":
            return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
        return {"type": "json_object", "schema": schema}

    def complete_json(
        self,
        member: str,
        messages: list[dict],
        schema: dict,
        response_model: type[pydantic.BaseModel],
        *,
        template_id: str,
        template_hash: str,
        media_hashes: list[str] = [],  # noqa: B006 - read-only
        stage: str = "",
        parse_attempts: int = 2,
    ) -> LLMAnswer:
        """Ask one member for a JSON answer validated by response_model.

        parse_attempts is the total number of answers tried: after a malformed/invalid answer the model is
        re-asked with its bad answer and a correction, until parse_attempts answers have failed.
        """
        t0 = time.monotonic()
        m = self.member(member)
        self._check_open()
        sent = messages if m.vision else strip_images(messages)
        schema = m.answer_schema(schema)
        key = self.cache_key(m, sent, schema, template_id, template_hash, list(media_hashes))

        hit = self._cache_get(key)
        if hit is not None:
            ans = LLMAnswer(member=m.name, model=hit[3], parsed=hit[1], raw=hit[0], error=hit[2], cache_hit=True,
                            prompt_tokens=0, completion_tokens=0, cost_usd=0.0, latency_s=time.monotonic() - t0)
            self._ledger_add(stage=stage, template_id=template_id, key=key, attempts=0, ans=ans)
            return ans
        self._check_budget()
        call_id = uuid.uuid4().hex
        outputs: list[tuple] = []  # (attempt, ts, raw, reasoning, refusal, error) of every answer received
        served = m.model
        cache_row: tuple | None = None

        convo = list(sent)
        pt = ct = 0
        cost = 0.0
        raw = ""
        error: str | None = None
        parsed: dict | None = None
        attempts = 0
        try:
            router = self._router(m)
        except Exception as e:  # noqa: BLE001 - e.g. the embedded server failed to start: nothing to retry
            raise self._open_breaker(m, f"{type(e).__name__}: {e}") from e
        failed: Exception | None = None
        while attempts < max(1, parse_attempts):
            attempts += 1
            limiter = self._limiter(m)
            try:
                with self._semaphore(m), self._holding(stage, m):
                    limiter.acquire()
                    resp = self._send(stage, m, lambda: router.completion(
                        model=m.name, messages=convo, temperature=m.temperature, seed=m.seed,
                        max_tokens=m.max_tokens, response_format=self._response_format(m, schema),
                    ))
            except Exception as e:  # noqa: BLE001 - the Router already retried and fell back: a failure
                error = f"transport: {type(e).__name__}: {str(e)[:500]}"
                failed = e
                break
            served = self._served_model(m, resp)
            usage = getattr(resp, "usage", None)
            p = int(getattr(usage, "prompt_tokens", 0) or 0)
            c = int(getattr(usage, "completion_tokens", 0) or 0)
            limiter.used(p + c)
            pt, ct = pt + p, ct + c
            answered = m if served == m.model else m.model_copy(update={"model": served})
            cost += self._cost(answered, resp, p, c)
            msg = resp.choices[0].message
            raw = msg.content or ""
            reasoning = getattr(msg, "reasoning_content", None)
            refusal = getattr(msg, "refusal", None)
            try:
                if refusal:
                    raise RefusalError(str(refusal))
                obj = parse_json_text(raw)
                parsed = response_model.model_validate(obj).model_dump(mode="json")
                error = None
                outputs.append((attempts, time.time(), raw, reasoning, refusal, None))
                cache_row = self._cache_row(key, answered, template_id, template_hash, raw, reasoning, parsed, pt, ct,
                                            cost)
                break
            except (ValueError, pydantic.ValidationError) as e:  # JSONDecodeError is a ValueError
                kind = "refusal" if isinstance(e, RefusalError) else "invalid_output"
                error = f"{kind}: {type(e).__name__}: {str(e)[:300]}"
                outputs.append((attempts, time.time(), raw, reasoning, refusal, error))
                convo = convo + [
                    {"role": "assistant", "content": raw},
                    {"role": "user", "content": "That answer was rejected (" + str(e)[:200].replace("\n", " ")
                     + "). Reply again with only one JSON object that matches the schema exactly."},
                ]

        if error is not None and not error.startswith("transport"):
            cache_row = self._cache_row(key, m.model_copy(update={"model": served}), template_id, template_hash, raw,
                                        None, None, pt, ct, cost, error)
        ans = LLMAnswer(member=m.name, model=served, parsed=parsed if error is None else None, raw=raw, error=error,
                        cache_hit=False, prompt_tokens=pt, completion_tokens=ct, cost_usd=cost,
                        latency_s=time.monotonic() - t0)
        self._ledger_add(stage=stage, template_id=template_id, key=key, attempts=attempts, ans=ans, call_id=call_id,
                         outputs=outputs, requested_model=m.model, cache_row=cache_row)
        self._note_call(m, failed)  # after the ledger row: the failed call is on record before the stage stops
        return ans
