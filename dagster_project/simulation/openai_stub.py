"""A loopback stand-in for an OpenAI-compatible provider, at the HTTP boundary only: the simulated panel answers through
it, and the tests script their own replies with it (their reply helpers are in tests/ops_support.py)."""

import json
import socket
import threading
from collections.abc import Callable
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# responder(mode, request body) -> (HTTP status, assistant content or error payload[, extra headers[, overrides]])
# A 200 content may also be a dict: the whole assistant message (e.g. {"content": None, "refusal": "..."}).
# overrides replace fields of the completion body (e.g. "model", "usage").
Responder = Callable[[str, dict], tuple]


class OpenAIStub:
    """Serves POST /<mode>/v1/chat/completions on 127.0.0.1; every request is recorded."""

    def __init__(self, responder: Responder, record: bool = True):
        self.requests: list[tuple[str, dict]] = []  # kept only when record is set (a long run counts elsewhere)
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real providers do (every reply has a Content-Length)
            disable_nagle_algorithm = True  # headers and body go in two writes: no 40 ms delayed-ACK stall

            def log_message(self, *args):  # keep pytest output clean
                pass

            def handle(self):
                try:
                    super().handle()
                except (ConnectionResetError, BrokenPipeError):  # a client that died mid-connection (kill -9)
                    self.close_connection = True

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                mode = self.path.strip("/").split("/")[0]
                if record:
                    stub.requests.append((mode, body))
                status, content, *extra = responder(mode, body)
                headers = extra[0] if extra else {}
                overrides = extra[1] if len(extra) > 1 else {}
                if status != 200:
                    return self._send(status, content, headers)
                message = {"role": "assistant", **(content if isinstance(content, dict) else {"content": content})}
                delivered = self._send(200, {
                    "id": "chatcmpl-stub", "object": "chat.completion", "created": 0, "model": "stub-model",
                    "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
                    **overrides,
                }, headers)
                settle = getattr(responder, "settle", None)  # a responder that counts only what reached the client
                if settle is not None:
                    settle(delivered)

            def _client_gone(self) -> bool:
                """The client closed its end while the answer was made (it timed out, or its process died)."""
                try:
                    return self.connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
                except BlockingIOError:  # open, nothing to read: still waiting for the answer
                    return False
                except OSError:
                    return True

            def _send(self, code, obj, headers=None) -> bool:
                """Whether the answer went out; one for a client that already hung up is dropped, as a server's is."""
                if self._client_gone():
                    self.close_connection = True
                    return False
                data = json.dumps(obj).encode()
                self.send_response(code)
                for name, value in (headers or {}).items():
                    self.send_header(name, str(value))
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                try:
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up first (its timeout): no traceback
                    self.close_connection = True
                    return False
                return True

        class Server(ThreadingHTTPServer):
            request_queue_size = 256  # a burst of parallel clients must not overflow the listen backlog

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def base(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.port}/{mode}/v1"

    def count(self, mode: str) -> int:
        return sum(1 for m, _ in self.requests if m == mode)

    def close(self) -> None:
        self.httpd.shutdown()


@contextmanager
def serving(responder: Responder):
    """An OpenAIStub for the length of a with block (module fixtures yield from it)."""
    stub = OpenAIStub(responder)
    try:
        yield stub
    finally:
        stub.close()
