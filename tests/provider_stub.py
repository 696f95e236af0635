"""A loopback stand-in for three providers' native APIs (OpenAI, Anthropic, Google AI Studio): it records every
request (path, headers, body) and answers in that provider's own response shape, so litellm's real translation
code runs on both sides of the HTTP boundary."""

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# answer(provider, body) -> the JSON object the model "says"
Answer = Callable[[str, dict], dict]


def provider_of(path: str) -> str:
    if ":generateContent" in path:
        return "gemini"
    if path.rstrip("/").endswith("/messages"):
        return "anthropic"
    if path.rstrip("/").endswith("/chat/completions"):
        return "openai"
    return "unknown"


def _reply(provider: str, body: dict, said: dict) -> dict:
    text = json.dumps(said)
    if provider == "openai":
        return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body.get("model", ""),
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}
    if provider == "anthropic":
        tools = body.get("tools") or []
        content = ([{"type": "tool_use", "id": "toolu_1", "name": tools[0]["name"], "input": said}] if tools
                   else [{"type": "text", "text": text}])
        return {"id": "msg_1", "type": "message", "role": "assistant", "model": body.get("model", ""),
                "content": content, "stop_reason": "tool_use" if tools else "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": 100, "output_tokens": 10}}
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP",
                            "index": 0}],
            "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110}}


class ProviderStub:
    """Serves every POST on 127.0.0.1; ``requests`` holds (provider, path, headers, body) in arrival order."""

    def __init__(self, answer: Answer):
        self.requests: list[tuple[str, str, dict, dict]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                provider = provider_of(self.path)
                stub.requests.append((provider, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                if provider == "unknown":
                    return self._send(404, {"error": {"message": f"no such endpoint {self.path}"}})
                self._send(200, _reply(provider, body, answer(provider, body)))

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

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def of(self, provider: str) -> list[tuple[str, dict, dict]]:
        return [(path, headers, body) for p, path, headers, body in self.requests if p == provider]

    def close(self) -> None:
        self.httpd.shutdown()
