"""LLM ensemble resource: litellm Router per member, embedded local model, durable SQLite cache and cost ledger."""

import atexit
import base64
import hashlib
import json
import os
import re
import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import dagster as dg
import pydantic
from pydantic import Field, PrivateAttr

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


class EnsembleMember(dg.Config):
    name: str
    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    temperature: float = 0.0
    seed: int | None = None
    max_tokens: int = 384
    rpm: int | None = None
    max_parallel: int = 1
    vision: bool = False
    input_cost_per_token: float | None = None
    output_cost_per_token: float | None = None
    # "json_object" (+schema) suits llama.cpp/litellm's schema translation; "json_schema" for strict OpenAI-style APIs
    json_mode: str = "json_object"

    @property
    def is_embedded(self) -> bool:
        return self.model.startswith(LOCAL_PREFIX) and self.api_base is None


class LLMAnswer(pydantic.BaseModel):
    member: str
    model: str
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
"""


class LLMResource(dg.ConfigurableResource):
    """An ensemble of chat models answering JSON against a schema, with a shared durable cache and a ledger."""

    members: list[EnsembleMember] = Field(default_factory=default_members)
    cache_path: str = ".veritas/llm_cache.sqlite"
    local_n_threads: int = 2
    num_retries: int = 2
    timeout_s: float = 120

    _lock: Any = PrivateAttr(default=None)
    _server: Any = PrivateAttr(default=None)
    _routers: Any = PrivateAttr(default=None)
    _semaphores: Any = PrivateAttr(default=None)
    _db_ready: bool = PrivateAttr(default=False)
    _run_id: str = PrivateAttr(default="")

    # ---- lifecycle -------------------------------------------------------------------------
    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._run_id = getattr(context, "run_id", None) or ""

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        self.close()

    def close(self) -> None:
        """Stop the embedded server if this resource started it (safe to call repeatedly)."""
        server, self._server = self._server, None
        if server is not None:
            server.stop()
        self._routers = {}

    def _state_lock(self) -> threading.Lock:
        # pydantic private defaults must be picklable/copyable, so the lock is made on first use
        if self._lock is None:
            self._lock = threading.RLock()
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
        """The ensemble as recorded in release manifests: who rated, with which model and sampling."""
        return [{"name": m.name, "model": m.model, "temperature": m.temperature, "seed": m.seed} for m in self.members]

    def local_server(self) -> LocalModelServer:
        """The one embedded llama.cpp server shared by every local member, started on first need."""
        with self._state_lock():
            if self._server is None or not self._server.running:
                log = Path(self.cache_path).parent / "llama_server.log"  # kept beside the cache for post-mortems
                log.parent.mkdir(parents=True, exist_ok=True)
                server = LocalModelServer(smollm2_gguf_path(), n_threads=self.local_n_threads, log_path=str(log))
                server.start()
                atexit.register(server.stop)  # backstop if close()/teardown never runs
                self._server = server
            return self._server

    def _router(self, m: EnsembleMember):
        """One litellm Router per member: it is the only retry/cooldown/rpm loop around the transport."""
        with self._state_lock():
            if self._routers is None:
                self._routers = {}
            router = self._routers.get(m.name)
            if router is not None:
                return router
            litellm = _import_litellm()
            params: dict[str, Any] = {"model": m.model, "timeout": self.timeout_s}
            if m.is_embedded:
                params.update(model="openai/" + m.model[len(LOCAL_PREFIX):], api_base=self.local_server().api_base,
                              api_key=_LOCAL_API_KEY)
            elif m.model.startswith(LOCAL_PREFIX):
                params.update(model="openai/" + m.model[len(LOCAL_PREFIX):], api_base=m.api_base,
                              api_key=_LOCAL_API_KEY)
            else:
                if m.api_base:
                    params["api_base"] = m.api_base
            if m.api_key_env:
                params["api_key"] = os.environ.get(m.api_key_env) or ""
            if m.rpm:
                params["rpm"] = m.rpm
            router = litellm.Router(
                model_list=[{"model_name": m.name, "litellm_params": params}],
                num_retries=self.num_retries,
                timeout=self.timeout_s,
            )
            self._routers[m.name] = router
            return router

    def _semaphore(self, m: EnsembleMember) -> threading.Semaphore:
        with self._state_lock():
            if self._semaphores is None:
                self._semaphores = {}
            sem = self._semaphores.get(m.name)
            if sem is None:
                sem = self._semaphores[m.name] = threading.Semaphore(max(1, m.max_parallel))
            return sem

    # ---- storage ---------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        path = Path(self.cache_path)
        if not self._db_ready:
            path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=30, isolation_level=None)
        conn.execute("PRAGMA busy_timeout=30000")
        if not self._db_ready:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA_SQL)
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

    def _cache_get(self, key: str) -> tuple[str, dict] | None:
        with closing(self._connect()) as conn:
            row = conn.execute("SELECT raw, parsed_json FROM llm_cache WHERE key=?", (key,)).fetchone()
        return (row[0], json.loads(row[1])) if row else None

    def _cache_put(self, key: str, m: EnsembleMember, template_id: str, template_hash: str, raw: str,
                   reasoning: str | None, parsed: dict, pt: int, ct: int, cost: float) -> None:
        with closing(self._connect()) as conn:
            conn.execute(
                "INSERT OR REPLACE INTO llm_cache VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (key, m.model, m.name, template_id, template_hash, raw, reasoning, canonical_json(parsed),
                 pt, ct, cost, time.time()),
            )

    def _ledger_add(self, *, stage: str, template_id: str, key: str, attempts: int, ans: LLMAnswer) -> None:
        with closing(self._connect()) as conn:
            conn.execute(
                "INSERT INTO llm_ledger (ts, run_id, stage, member, model, template_id, cache_key, attempts,"
                " prompt_tokens, completion_tokens, cost_usd, latency_s, cache_hit, error)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (time.time(), self._run_id, stage, ans.member, ans.model, template_id, key, attempts,
                 ans.prompt_tokens, ans.completion_tokens, ans.cost_usd, ans.latency_s, int(ans.cache_hit), ans.error),
            )

    def ledger_summary(self, stage: str | None = None, run_id: str | None = None) -> dict:
        """Totals over the ledger, optionally for one stage and/or run, plus a per-member breakdown."""
        where, args = [], []
        if stage is not None:
            where.append("stage=?"); args.append(stage)
        if run_id is not None:
            where.append("run_id=?"); args.append(run_id)
        clause = (" WHERE " + " AND ".join(where)) if where else ""
        cols = ("COUNT(*), COALESCE(SUM(cache_hit),0), COALESCE(SUM(prompt_tokens),0),"
                " COALESCE(SUM(completion_tokens),0), COALESCE(SUM(cost_usd),0),"
                " COALESCE(SUM(error IS NOT NULL),0), COALESCE(SUM(latency_s),0)")

        def pack(r) -> dict:
            calls, hits = int(r[0]), int(r[1])
            return {"calls": calls, "cache_hits": hits, "hit_rate": (hits / calls) if calls else 0.0,
                    "prompt_tokens": int(r[2]), "completion_tokens": int(r[3]), "cost_usd": float(r[4]),
                    "errors": int(r[5]), "latency_s": float(r[6])}

        with closing(self._connect()) as conn:
            total = pack(conn.execute(f"SELECT {cols} FROM llm_ledger{clause}", args).fetchone())
            rows = conn.execute(f"SELECT member, {cols} FROM llm_ledger{clause} GROUP BY member", args).fetchall()
        total["by_member"] = {r[0]: pack(r[1:]) for r in rows}
        return total

    # ---- calls -----------------------------------------------------------------------------
    def _cost(self, m: EnsembleMember, response: Any, pt: int, ct: int) -> float:
        if m.input_cost_per_token is not None or m.output_cost_per_token is not None:
            return pt * (m.input_cost_per_token or 0.0) + ct * (m.output_cost_per_token or 0.0)
        if m.model.startswith(LOCAL_PREFIX):
            return 0.0
        try:
            return float(_import_litellm().completion_cost(completion_response=response, model=m.model) or 0.0)
        except Exception:
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
        sent = messages if m.vision else strip_images(messages)
        key = self.cache_key(m, sent, schema, template_id, template_hash, list(media_hashes))

        hit = self._cache_get(key)
        if hit is not None:
            ans = LLMAnswer(member=m.name, model=m.model, parsed=hit[1], raw=hit[0], error=None, cache_hit=True,
                            prompt_tokens=0, completion_tokens=0, cost_usd=0.0, latency_s=time.monotonic() - t0)
            self._ledger_add(stage=stage, template_id=template_id, key=key, attempts=0, ans=ans)
            return ans

        convo = list(sent)
        pt = ct = 0
        cost = 0.0
        raw = ""
        error: str | None = None
        parsed: dict | None = None
        attempts = 0
        try:
            router = self._router(m)
        except Exception as e:  # e.g. the embedded server failed to start
            router, error = None, f"transport: {type(e).__name__}: {e}"
        while router is not None and attempts < max(1, parse_attempts):
            attempts += 1
            try:
                with self._semaphore(m):
                    resp = router.completion(
                        model=m.name, messages=convo, temperature=m.temperature, seed=m.seed,
                        max_tokens=m.max_tokens, response_format=self._response_format(m, schema),
                    )
            except Exception as e:  # the Router already retried; anything left is the provider's failure
                error = f"transport: {type(e).__name__}: {str(e)[:500]}"
                break
            usage = getattr(resp, "usage", None)
            p = int(getattr(usage, "prompt_tokens", 0) or 0)
            c = int(getattr(usage, "completion_tokens", 0) or 0)
            pt, ct = pt + p, ct + c
            cost += self._cost(m, resp, p, c)
            msg = resp.choices[0].message
            raw = msg.content or ""
            reasoning = getattr(msg, "reasoning_content", None)
            refusal = getattr(msg, "refusal", None)
            try:
                if refusal:
                    raise ValueError(f"refusal: {refusal}")
                obj = parse_json_text(raw)
                parsed = response_model.model_validate(obj).model_dump(mode="json")
                error = None
                self._cache_put(key, m, template_id, template_hash, raw, reasoning, parsed, pt, ct, cost)
                break
            except (ValueError, pydantic.ValidationError) as e:  # JSONDecodeError is a ValueError
                error = f"invalid_output: {type(e).__name__}: {str(e)[:300]}"
                convo = convo + [
                    {"role": "assistant", "content": raw},
                    {"role": "user", "content": "That answer was rejected (" + str(e)[:200].replace("\n", " ")
                     + "). Reply again with only one JSON object that matches the schema exactly."},
                ]

        ans = LLMAnswer(member=m.name, model=m.model, parsed=parsed if error is None else None, raw=raw, error=error,
                        cache_hit=False, prompt_tokens=pt, completion_tokens=ct, cost_usd=cost,
                        latency_s=time.monotonic() - t0)
        self._ledger_add(stage=stage, template_id=template_id, key=key, attempts=attempts, ans=ans)
        return ans
