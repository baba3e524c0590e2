"""A local stand-in for an OpenAI-compatible chat endpoint, for adapter tests (no network).

    with StubChatServer(["reply 1", "reply 2"]) as server:
        agent = OpenAIChatAgent(base_url=server.base_url, model="stub")
        ...
    server.requests  # the JSON bodies received, in order
    server.headers   # their headers

Each POST to ``/v1/chat/completions`` gets the next canned reply as
``choices[0].message.content``.  A reply given as an int is sent as that HTTP
error status instead.  When the replies run out the server answers 503.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class StubChatServer:
    def __init__(self, replies):
        self.replies = list(replies)
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                with stub._lock:
                    stub.paths.append(self.path)
                    stub.headers.append(dict(self.headers))
                    try:
                        stub.requests.append(json.loads(body))
                    except ValueError:
                        stub.requests.append({"_unparseable": body.decode("utf-8", "replace")})
                    reply = stub.replies.pop(0) if stub.replies else 503
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                elif isinstance(reply, int):
                    self._send(reply, {"error": {"message": f"stub status {reply}"}})
                else:
                    self._send(200, {
                        "id": f"stub-{len(stub.requests)}", "object": "chat.completion", "model": "stub",
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": reply}}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    })

            def _send(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
