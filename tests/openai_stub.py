"""A loopback stand-in for an OpenAI-compatible provider: the test double sits at the HTTP boundary only."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

# responder(mode, request body) -> (HTTP status, assistant content or error payload)
Responder = Callable[[str, dict], tuple[int, "str | dict"]]


class OpenAIStub:
    """Serves POST /<mode>/v1/chat/completions on 127.0.0.1; every request is recorded."""

    def __init__(self, responder: Responder):
        self.requests: list[tuple[str, dict]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                mode = self.path.strip("/").split("/")[0]
                stub.requests.append((mode, body))
                status, content = responder(mode, body)
                if status != 200:
                    return self._send(status, content)
                self._send(200, {
                    "id": "chatcmpl-stub", "object": "chat.completion", "created": 0, "model": "stub-model",
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
                })

            def _send(self, code, obj):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def base(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.port}/{mode}/v1"

    def count(self, mode: str) -> int:
        return sum(1 for m, _ in self.requests if m == mode)

    def close(self) -> None:
        self.httpd.shutdown()
