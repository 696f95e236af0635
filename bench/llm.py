"""Benchmark of the LLM resource against a loopback OpenAI-compatible stub with a fixed latency.

1. Cold vs warm: a stage-6-sized batch (claims x members x rating prompts) through ``score_claim``, first with
   an empty cache, then again with every answer in the cache. Target: warm <= 5 % of cold.
2. Per-call overhead: the same chat request sent straight to the stub with httpx (the baseline, measured in
   this run), through the member's client alone (OpenAIDirect, the openai SDK, which the resource uses for an
   OpenAI-compatible member), through a litellm Router for the same member (``llm.transport: litellm``), and
   through ``LLMResource.complete_json`` (the member's client plus cache lookup and write, ledger, limits,
   pydantic validation). Target: at most 5 ms more per call than the baseline; the split shows how much of it
   is the client's and how much the resource's own. Each path's CPU per call is printed too (process time; the
   in-process stub's share is alike in each).

    .venv/bin/python bench/llm.py [--claims 50] [--latency-ms 50] [--calls 200]
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dagster_project.resources.llm import _import_litellm

_import_litellm()  # offline cost map before anything else imports litellm

import httpx
import pydantic

from assets.ensemble.rounds import prefetch
from assets.ensemble.scoring import score_claim
from dagster_project.resources.llm import EnsembleMember, LLMResource
from dagster_project.simulation.openai_stub import OpenAIStub
from dagster_project.stage_settings import ClaimRules, ScoreSettings
from schemas.records import NormalizedClaim

ANSWER = json.dumps({"category": "positive", "certainty": "rather certain", "justification": "bench", "tags": []})


class Answer(pydantic.BaseModel):
    category: str
    certainty: str
    justification: str


def stub_with_latency(latency_s: float) -> OpenAIStub:
    def respond(mode, body):
        time.sleep(latency_s)
        return 200, ANSWER

    return OpenAIStub(respond)


def members(stub: OpenAIStub, n: int, max_parallel: int = 1) -> list[EnsembleMember]:
    # a model in litellm's bundled cost map, served by the stub, so the ledger prices answers as for a real provider
    return [EnsembleMember(name=f"m{i}", model="openai/gpt-4o-mini", api_base=stub.base("bench"), api_key_env="BENCH_KEY",
                           temperature=0.0, seed=i, max_parallel=max_parallel) for i in range(n)]


def claims(n: int) -> list[NormalizedClaim]:
    return [NormalizedClaim(claim_id=f"c{i}", review_id=f"r{i}", quarter="2025Q4", text=f"Claim number {i} is true.",
                            original_text=f"Claim number {i} is true.", normalization="llm", language="en",
                            claim_date=date(2025, 11, 1), review_url=f"https://example.org/{i}") for i in range(n)]


def run_batch(llm: LLMResource, batch: list[NormalizedClaim]) -> tuple[float, int]:
    """The batch as stage 6 runs it: ``parallel_claims`` claims at a time, then one pass in order."""
    scoring, claim_rules = ScoreSettings(), ClaimRules()
    start = time.perf_counter()
    work = prefetch(batch, lambda c: score_claim(c, "The article says so. " * 40, llm, scoring, claim_rules, None),
                    llm.parallel_claims)
    kept = sum(work(c)[0] is not None for c in batch)
    return time.perf_counter() - start, kept


def cold_warm(stub: OpenAIStub, folder: str, n_claims: int, n_members: int) -> dict:
    llm = LLMResource(members=members(stub, n_members), cache_path=os.path.join(folder, "coldwarm.sqlite"),
                      transport="auto")
    batch = claims(n_claims)
    llm.member_names()
    before = len(stub.requests)
    cold, kept = run_batch(llm, batch)
    calls_cold = len(stub.requests) - before
    warm, kept_warm = run_batch(llm, batch)
    calls_warm = len(stub.requests) - before - calls_cold
    assert kept == kept_warm == n_claims
    parallel = LLMResource(members=members(stub, n_members, max_parallel=4), parallel_claims=8, transport="auto",
                           cache_path=os.path.join(folder, "parallel.sqlite"))
    cold_parallel, kept_parallel = run_batch(parallel, batch)
    assert kept_parallel == n_claims
    return {"cold_s": cold, "warm_s": warm, "model_calls_cold": calls_cold, "model_calls_warm": calls_warm,
            "answers": llm.ledger_summary()["calls"] // 2, "cold_parallel_s": cold_parallel}


def overhead(stub: OpenAIStub, folder: str, n_calls: int) -> dict:
    """Median wall time per call of four paths, interleaved so that drift in the machine's load hits all alike:
    the request sent straight with httpx (the baseline), the member's client alone (OpenAIDirect: the one retry
    loop around the transport), a litellm Router for the member, and LLMResource.complete_json (cache lookup and
    write, ledger, limits, validation around that client)."""
    llm = LLMResource(members=members(stub, 1), cache_path=os.path.join(folder, f"overhead-{stub.port}.sqlite"),
                      transport="auto")
    schema = Answer.model_json_schema()
    sdk = llm._router(llm.member("m0"))  # the very client the resource calls
    routed = LLMResource(members=members(stub, 1), cache_path=os.path.join(folder, f"routed-{stub.port}.sqlite"),
                         transport="litellm")
    router = routed._router(routed.member("m0"))
    client = httpx.Client(base_url=stub.base("bench"), headers={"Authorization": "Bearer sk-bench"})
    fmt = {"type": "json_object", "schema": schema}
    body = {"model": "bench", "temperature": 0.0, "max_tokens": 384, "response_format": fmt}

    def direct(messages):
        r = client.post("/chat/completions", json={**body, "messages": messages})
        Answer.model_validate_json(r.json()["choices"][0]["message"]["content"])

    def client_alone(client_of_member):
        def call(messages):
            resp = client_of_member.completion(model="m0", messages=messages, temperature=0.0, seed=0,
                                               max_tokens=384, response_format=fmt)
            Answer.model_validate_json(resp.choices[0].message.content)
        return call

    def resource(messages):
        ans = llm.complete_json("m0", messages, schema, Answer, template_id="b", template_hash="h")
        assert ans.error is None and not ans.cache_hit

    paths = {"direct": direct, "sdk": client_alone(sdk), "router": client_alone(router), "resource": resource}
    times: dict[str, list[float]] = {name: [] for name in paths}
    cpu: dict[str, float] = dict.fromkeys(paths, 0.0)  # process CPU (the stub's thread included, alike for all)
    for i in range(-3, n_calls):  # three warm-up rounds (connection pools, lazy imports) are not timed
        for name, call in paths.items():
            messages = [{"role": "user", "content": f"claim {i} via {name}: rate it"}]
            t, c = time.perf_counter(), time.process_time()
            call(messages)
            if i >= 0:
                times[name].append(time.perf_counter() - t)
                cpu[name] += time.process_time() - c
    client.close()
    hits = []
    for i in range(n_calls):
        t = time.perf_counter()
        llm.complete_json("m0", [{"role": "user", "content": f"claim {i} via resource: rate it"}], schema, Answer,
                          template_id="b", template_hash="h")
        hits.append(time.perf_counter() - t)
    med = {name: 1000 * statistics.median(v) for name, v in times.items()}
    return {"direct_ms": med["direct"], "sdk_ms": med["sdk"], "router_ms": med["router"],
            "resource_ms": med["resource"], "cache_hit_ms": 1000 * statistics.median(hits),
            "overhead_ms": med["resource"] - med["direct"], "sdk_overhead_ms": med["sdk"] - med["direct"],
            "router_overhead_ms": med["router"] - med["direct"], "own_ms": med["resource"] - med["sdk"],
            "overhead_mean_ms": 1000 * (statistics.fmean(times["resource"]) - statistics.fmean(times["direct"])),
            **{f"{name}_cpu_ms": 1000 * c / n_calls for name, c in cpu.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=50, help="claims in the stage-6 batch")
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=50.0, help="the stub's fixed answer latency")
    parser.add_argument("--calls", type=int, default=200, help="calls for the overhead measurement")
    args = parser.parse_args()
    os.environ.setdefault("BENCH_KEY", "sk-bench")
    stub = stub_with_latency(args.latency_ms / 1000)
    try:
        with tempfile.TemporaryDirectory() as folder:
            cw = cold_warm(stub, folder, args.claims, args.members)
            oh = overhead(stub, folder, args.calls)
            idle_stub = stub_with_latency(0.0)
            try:  # the same paths with no wait: what the code costs without the CPU idling between calls
                oh0 = overhead(idle_stub, folder, args.calls)
            finally:
                idle_stub.close()
    finally:
        stub.close()
    ratio = cw["warm_s"] / cw["cold_s"]
    print(f"stub latency {args.latency_ms:.0f} ms; batch: {args.claims} claims x {args.members} members "
          f"(veracity + context coverage) = {cw['answers']} answers")
    print(f"cold  {cw['cold_s']:8.2f} s  ({cw['model_calls_cold']} model calls)")
    print(f"warm  {cw['warm_s']:8.2f} s  ({cw['model_calls_warm']} model calls)")
    print(f"warm / cold = {100 * ratio:.2f} %  (target <= 5 %: {'met' if ratio <= 0.05 else 'NOT met'})")
    print(f"cold with parallel_claims=8, max_parallel=4 per member: {cw['cold_parallel_s']:.2f} s "
          f"({cw['cold_s'] / cw['cold_parallel_s']:.1f}x faster than one claim at a time)")
    print(f"per call, median of {args.calls}: direct httpx {oh['direct_ms']:.2f} ms, the member's client (openai SDK) "
          f"alone {oh['sdk_ms']:.2f} ms, a litellm Router alone {oh['router_ms']:.2f} ms, through the resource "
          f"{oh['resource_ms']:.2f} ms, cache hit {oh['cache_hit_ms']:.2f} ms")
    for label, o in ((f"{args.latency_ms:.0f} ms stub", oh), ("0 ms stub", oh0)):
        print(f"overhead ({label}) = {o['overhead_ms']:.2f} ms per call (mean {o['overhead_mean_ms']:.2f} ms; target "
              f"<= 5 ms: {'met' if o['overhead_ms'] <= 5 else 'NOT met'}): the member's client "
              f"{o['sdk_overhead_ms']:.2f} ms, the resource's own work {o['own_ms']:.2f} ms; a litellm Router instead "
              f"of the client: {o['router_overhead_ms']:.2f} ms")
        print(f"CPU per call ({label}, the stub's own share included in each): direct httpx {o['direct_cpu_ms']:.2f} ms, "
              f"the member's client {o['sdk_cpu_ms']:.2f} ms, a litellm Router {o['router_cpu_ms']:.2f} ms, "
              f"through the resource {o['resource_cpu_ms']:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
