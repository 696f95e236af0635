"""``LLMResource``, the Dagster resource that asks the ensemble for JSON answers: its configuration and private state,
its lifecycle (quarter label, embedded server, closing), member lookups, and ``complete_json`` (cache, budget, the
request with its re-asks, cost, ledger). The rest of its methods come from the mixins of this package: transport,
circuit breaker, slots, hedging, cache and ledger."""

import atexit
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Literal

import dagster as dg
import pydantic
from pydantic import Field, PrivateAttr

from dagster_project.resources.llm.answers import LLMAnswer
from dagster_project.resources.llm.breaker import BreakerMixin
from dagster_project.resources.llm.cache import CacheMixin
from dagster_project.resources.llm.errors import RefusalError
from dagster_project.resources.llm.hedging import HedgingMixin
from dagster_project.resources.llm.ledger import LedgerMixin, _quarter_label
from dagster_project.resources.llm.members import (
    LOCAL_PREFIX,
    EnsembleMember,
    default_members,
)
from dagster_project.resources.llm.messages import parse_json_text, strip_images
from dagster_project.resources.llm.refusals import error_refusal, response_refusal, text_refusal
from dagster_project.resources.llm.slots import SlotsMixin
from dagster_project.resources.llm.transport import TransportMixin, _import_litellm
from dagster_project.resources.local_llm import LocalModelServer, smollm2_gguf_path


class LLMResource(TransportMixin, BreakerMixin, SlotsMixin, HedgingMixin, CacheMixin, LedgerMixin,
                  dg.ConfigurableResource):
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
    # A Redis URL (redis://host:port/db) whose server keeps each member's rpm, tpm and max_parallel and the quarter's
    # budget_usd for every process and machine that names it: two runs at once, or Celery workers on several machines,
    # then stay within one member's limits together. Empty: each process keeps its own (N processes: N times the rpm).
    shared_limits_url: str = ""

    _lock: Any = PrivateAttr(default_factory=threading.RLock)  # made per instance, also for copies
    _server: Any = PrivateAttr(default=None)
    _routers: Any = PrivateAttr(default=None)
    _semaphores: Any = PrivateAttr(default=None)
    _held: Any = PrivateAttr(default=None)  # (run, stage, member) -> [seconds a slot was held, first taken, given back]
    _limiters: Any = PrivateAttr(default=None)
    _shared: Any = PrivateAttr(default=None)  # the shared-limits server's client (shared_limits_url)
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
                refused = error_refusal(e)
                if refused:  # the provider's content policy refused the prompt: the model's answer, not a fault
                    error = f"refusal: {type(e).__name__}: {refused[:300]}"
                    outputs.append((attempts, time.time(), "", None, refused, error))
                    break  # the same prompt would be refused again
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
            refusal = response_refusal(resp) or None  # the provider's signal, whatever the text says
            try:
                if refusal:
                    raise RefusalError(refusal)
                obj = parse_json_text(raw)
                parsed = response_model.model_validate(obj).model_dump(mode="json")
                error = None
                outputs.append((attempts, time.time(), raw, reasoning, refusal, None))
                cache_row = self._cache_row(key, answered, template_id, template_hash, raw, reasoning, parsed, pt, ct,
                                            cost)
                break
            except (ValueError, pydantic.ValidationError) as e:  # JSONDecodeError is a ValueError
                refusal = refusal or text_refusal(raw) or None  # plain text counts only when it is not the JSON asked
                why = e if isinstance(e, RefusalError) or not refusal else RefusalError(refusal)
                error = f"{'refusal' if refusal else 'invalid_output'}: {type(why).__name__}: {str(why)[:300]}"
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
