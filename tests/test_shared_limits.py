"""Issue 52: a member's rpm, tpm and max_parallel, and the quarter's budget, hold across processes and machines
(``llm.shared_limits_url``, a real redis-server on loopback). Each test starts two separate processes, each with its
own LLMResource and its own model cache (as on two machines), against one loopback provider that counts what it
receives: the provider's own count is what must stay within the limits."""

import json
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from dagster_project.resources.llm import EnsembleMember, LLMResource
from dagster_project.resources.llm.shared_limits import SharedLimitsUnavailable
from dagster_project.simulation.openai_stub import OpenAIStub
from tests.ops_support import free_port, redis_server

ROOT = Path(__file__).resolve().parents[1]
PRICE = {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}
PER_CALL = 100 * 1e-6 + 20 * 2e-6  # the stub's usage: 100 prompt and 20 completion tokens an answer

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None and not Path("/usr/bin/redis-server").exists(),
                                reason="needs redis-server (apt-get install redis-server; .ci/run installs it)")

# one process of a run: its own resource and cache, n calls of one member, a line per answer (or per refusal)
WORKER = textwrap.dedent("""
    import json, sys
    from dagster_project.resources.llm import BudgetExceeded, EnsembleMember, LLMResource
    from tests.test_llm import CALL, MESSAGES
    spec = json.loads(sys.argv[1])
    member = EnsembleMember(name="paid", model="openai/paid-model", api_base=spec["api_base"], context_window=8192,
                            api_key_env="SHARED_STUB_KEY", **spec["member"])
    llm = LLMResource(members=[member], cache_path=spec["cache"], budget_usd=spec.get("budget"),
                      shared_limits_url=spec.get("shared", ""))
    llm.set_quarter("2025Q4")
    for n in range(spec["calls"]):
        try:
            answer = llm.complete_json("paid", [MESSAGES[0], {"role": "user", "content": f"{spec['name']} {n}"}],
                                       stage="scored_claims", **CALL)
        except BudgetExceeded as err:
            print("budget", err, flush=True)
            break
        print("answer", answer.error, flush=True)
""")


class CountingProvider:
    """The loopback provider: when each request arrived, and how many were in progress at most."""

    def __init__(self, delay_s: float = 0.0):
        self.arrivals: list[float] = []
        self.busy = self.most_busy = 0
        self._lock = threading.Lock()

        def answer(mode, body):
            with self._lock:
                self.arrivals.append(time.monotonic())
                self.busy += 1
                self.most_busy = max(self.most_busy, self.busy)
            time.sleep(delay_s)
            with self._lock:
                self.busy -= 1
            return 200, '{"category": "negative", "certainty": "certain", "justification": "stub"}'

        self.stub = OpenAIStub(answer)

    def close(self) -> None:
        self.stub.close()


@pytest.fixture()
def redis_url(tmp_path):
    with redis_server(tmp_path) as url:
        yield url


def _start(provider: CountingProvider, folder: Path, name: str, **spec) -> subprocess.Popen:
    spec = {"api_base": provider.stub.base("ok"), "cache": str(folder / f"{name}.sqlite"), "name": name, **spec}
    return subprocess.Popen([sys.executable, "-c", WORKER, json.dumps(spec)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={"SHARED_STUB_KEY": "sk-test", "PATH": "/usr/bin",
                                                                      "LITELLM_LOCAL_MODEL_COST_MAP": "True"})


def _two_runs(provider, folder, seconds: float, settle_after: int | None = None, **spec) -> list[str]:
    """Two processes at once; their output when both are done, or ``seconds`` after the start, or 8 s after the
    provider received ``settle_after`` requests (then they are stopped, waiting or not). The processes import the
    project first: seconds on a loaded machine, so the time counts from what the provider sees."""
    runs = [_start(provider, folder, name, **spec) for name in ("run-a", "run-b")]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(run.poll() is None for run in runs):
        if settle_after is not None and len(provider.arrivals) >= settle_after:
            deadline = min(deadline, provider.arrivals[settle_after - 1] + 8)
        time.sleep(0.1)
    for run in runs:
        run.kill()
    return [run.communicate()[0] for run in runs]


def test_two_processes_together_stay_within_one_members_rpm(redis_url, tmp_path):
    provider = CountingProvider()
    try:
        _two_runs(provider, tmp_path, 120, settle_after=3, member={"rpm": 3}, calls=3, shared=redis_url)
        # each process would send its 3 at once; together they may send 3 in the minute, and the other 3 wait
        assert len(provider.arrivals) == 3
        assert provider.arrivals[-1] - provider.arrivals[0] < 52  # the 8 s looked at lie within the minute
    finally:
        provider.close()


def test_without_shared_limits_each_process_takes_the_whole_rpm(tmp_path):
    """The failure the shared limits fix, measured: two processes send twice the member's rpm."""
    provider = CountingProvider()
    try:
        _two_runs(provider, tmp_path, 120, member={"rpm": 3}, calls=3)
        assert len(provider.arrivals) == 6
    finally:
        provider.close()


def test_max_parallel_holds_across_processes(redis_url, tmp_path):
    provider = CountingProvider(delay_s=0.4)
    try:
        outputs = _two_runs(provider, tmp_path, 60, member={"max_parallel": 1}, calls=4, shared=redis_url)
        assert [out.count("answer None") for out in outputs] == [4, 4], outputs
        assert provider.most_busy == 1  # one request of the member at a time, whichever process sends it
    finally:
        provider.close()


def test_two_runs_stop_together_at_the_budget(redis_url, tmp_path):
    provider = CountingProvider(delay_s=0.2)
    try:
        outputs = _two_runs(provider, tmp_path, 60, member=PRICE, calls=4, budget=3 * PER_CALL - 1e-6,
                            shared=redis_url)
        assert all("budget LLM budget reached: quarter 2025Q4" in out for out in outputs), outputs
        # three calls fit under the budget; a call already on its way in the other process may pass it, no more
        assert 3 <= len(provider.arrivals) <= 4
    finally:
        provider.close()


def test_a_dead_shared_limits_server_stops_the_call_naming_it(tmp_path):
    url = f"redis://:s3cret@127.0.0.1:{free_port()}/0"
    member = EnsembleMember(name="paid", model="openai/paid-model", api_base="http://127.0.0.1:9/v1",
                            context_window=8192, rpm=10)
    llm = LLMResource(members=[member], cache_path=str(tmp_path / "c.sqlite"), shared_limits_url=url)
    with pytest.raises(SharedLimitsUnavailable, match=r"llm.shared_limits_url redis://127\.0\.0\.1:\d+/0: cannot reach") as err:
        llm._limiter(member)
    assert "s3cret" not in str(err.value)
