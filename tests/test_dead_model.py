"""A dead model stops the run fast and says why: the server's self-test, the circuit breaker, failed stages."""

import signal
import sys
import time
from pathlib import Path

import pydantic
import pytest

from dagster_project.resources import local_llm
from dagster_project.resources.llm import EnsembleMember, LLMResource, ModelUnavailable
from dagster_project.resources.local_llm import LocalModelServer, ServerDied, describe_exit
from dagster_project.simulation.openai_stub import serving
from tests.ops_support import fast_router_backoff, free_port

FAKE_SERVER = Path(__file__).with_name("fake_llama_server.py")
SCHEMA = {"type": "object", "properties": {"ok": {"type": "string", "enum": ["yes"]}}, "required": ["ok"]}


class Ok(pydantic.BaseModel):
    ok: str


CALL = {"schema": SCHEMA, "response_model": Ok, "template_id": "t", "template_hash": "h"}
MESSAGES = [{"role": "user", "content": "Say yes."}]


@pytest.fixture(autouse=True)
def _stub_key(monkeypatch):
    monkeypatch.setenv("VERITAS_TEST_STUB_KEY", "sk-test")


def _fake(mode: str, tmp_path: Path) -> LocalModelServer:
    return LocalModelServer(str(FAKE_SERVER), command=[sys.executable, str(FAKE_SERVER), mode],
                            log_path=str(tmp_path / f"{mode}.log"), startup_timeout_s=30)


# ---- the self-test at server start ------------------------------------------------------------------------------
def test_server_dying_by_sigill_on_its_first_completion_says_so(tmp_path):
    server = _fake("sigill", tmp_path)
    with pytest.raises(ServerDied) as caught:
        server.start()
    message = str(caught.value)
    assert "killed by SIGILL (exit 132)" in message
    assert "built for instructions this CPU does not allow; run `make llama-wheel`" in message
    assert "on its first completion (self-test)" in message
    assert "executing an instruction this CPU lacks" in message  # the log tail
    assert not server.running and server not in local_llm._LIVE


def test_server_exiting_while_starting_gives_its_code_and_log(tmp_path):
    server = _fake("exit3", tmp_path)
    with pytest.raises(ServerDied) as caught:
        server.start()
    assert "exited with code 3" in str(caught.value) and "while starting" in str(caught.value)
    assert "error: failed to load model (stand-in)" in str(caught.value)


def test_describe_exit_reads_popen_and_shell_statuses():
    assert describe_exit(-signal.SIGKILL).startswith("killed by SIGKILL (exit 137): killed from outside")
    assert describe_exit(132) == describe_exit(-4)  # a shell reports SIGILL as 132, Popen as -4
    assert describe_exit(1) == "exited with code 1 (see the log tail)"


def test_a_member_on_a_server_that_fails_its_self_test_stops_at_the_first_call(tmp_path, monkeypatch):
    """The embedded server failing its self-test is not a per-call matter: the first call raises, naming it."""
    monkeypatch.setattr(local_llm.LocalModelServer, "__init__", _patched_init(tmp_path))
    res = LLMResource(cache_path=str(tmp_path / "c.sqlite"),
                      members=[EnsembleMember(name="local-a", model="local/smollm2")])
    with pytest.raises(ModelUnavailable) as caught:
        res.complete_json("local-a", MESSAGES, stage="s", **CALL)
    assert "ensemble member 'local-a' (model local/smollm2" in str(caught.value)
    assert "killed by SIGILL" in str(caught.value)
    with pytest.raises(ModelUnavailable):  # and every later call, at once
        res.complete_json("local-a", MESSAGES, stage="s", **CALL)
    res.close()


def _patched_init(tmp_path):
    original = local_llm.LocalModelServer.__init__

    def init(self, model_path, **kw):
        original(self, str(FAKE_SERVER), command=[sys.executable, str(FAKE_SERVER), "sigill"],
                 log_path=str(tmp_path / "srv.log"))
    return init


# ---- the circuit breaker ---------------------------------------------------------------------------------------
def test_breaker_opens_after_consecutive_refused_connections_and_names_the_member(tmp_path):
    port = free_port()
    member = EnsembleMember(name="remote-x", model="openai/some-model", api_base=f"http://127.0.0.1:{port}/v1",
                            api_key_env="VERITAS_TEST_STUB_KEY")
    res = LLMResource(cache_path=str(tmp_path / "c.sqlite"), members=[member], breaker_failures=2, num_retries=0)
    first = res.complete_json("remote-x", MESSAGES, stage="s", **CALL)
    assert first.parsed is None and first.error.startswith("transport:")
    with pytest.raises(ModelUnavailable) as caught:
        res.complete_json("remote-x", [{"role": "user", "content": "again"}], stage="s", **CALL)
    message = str(caught.value)
    assert f"ensemble member 'remote-x' (model openai/some-model, endpoint http://127.0.0.1:{port}/v1)" in message
    assert "ConnectionRefusedError" in message and "2 call(s) in a row failed" in message
    t0 = time.monotonic()
    with pytest.raises(ModelUnavailable):
        res.complete_json("remote-x", [{"role": "user", "content": "third"}], stage="s", **CALL)
    assert time.monotonic() - t0 < 0.5  # open: no request, no retry
    summary = res.ledger_summary(stage="s")
    assert summary["calls"] == 2 and summary["transport_errors"] == 2  # the third call never started


def test_http_500_never_opens_the_breaker(tmp_path):
    """A live endpoint that answers 5xx is a per-call failure, retried by the Router, never a dead member."""
    with serving(lambda mode, body: (500, {"error": {"message": "overloaded"}})) as stub:
        member = EnsembleMember(name="busy", model="openai/stub-model", api_base=stub.base("busy"),
                                api_key_env="VERITAS_TEST_STUB_KEY")
        res = LLMResource(cache_path=str(tmp_path / "c.sqlite"), members=[member], breaker_failures=2, num_retries=1)
        with fast_router_backoff():
            answers = [res.complete_json("busy", [{"role": "user", "content": str(i)}], stage="s", **CALL)
                       for i in range(3)]
    assert [a.error.split(":")[0] for a in answers] == ["transport"] * 3
    assert stub.count("busy") == 6  # each call: the request and one retry
    with pytest.raises(ModelUnavailable) as caught:  # but a stage in which no call got an answer fails
        res.check_stage("s", "")
    assert "s: none of its 3 model calls got an answer; last: member 'busy'" in str(caught.value)
