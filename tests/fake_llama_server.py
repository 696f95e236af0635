"""A stand-in for ``python -m llama_cpp.server`` that fails the way a broken build does (the first argument says how):

- ``sigill``: answers ``GET /v1/models``, then kills itself with SIGILL on the first completion, as a llama.cpp built
  for instructions the CPU lacks does;
- ``exit3``: prints an error and exits with code 3 before listening.

It takes the real server's arguments (``--port`` and the rest) after the mode.
"""

import argparse
import json
import os
import resource
import signal
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


def main() -> None:
    mode = sys.argv[1]
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    opts, _ = parser.parse_known_args(sys.argv[2:])
    print(f"fake llama server: mode {mode}, port {opts.port}", flush=True)
    if mode == "exit3":
        print("error: failed to load model (stand-in)", flush=True)
        sys.exit(3)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            data = json.dumps({"object": "list", "data": [{"id": "smollm2", "object": "model"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            print("llama_decode: first completion, executing an instruction this CPU lacks", flush=True)
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file from the test
            os.kill(os.getpid(), signal.SIGILL)

    HTTPServer(("127.0.0.1", opts.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
