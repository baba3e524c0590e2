"""A local stand-in for an OpenAI-compatible chat endpoint, for adapter tests (no network).

    with StubChatServer(["reply 1", 429, {"tool_calls": [...]}]) as server:
        agent = OpenAIChatAgent(base_url=server.base_url, model="stub")
        ...
    server.requests  # the JSON bodies received, in order
    server.headers   # their headers

Each POST to ``/v1/chat/completions`` gets the next scripted reply; when the replies run
out it gets ``default`` (503 unless given).  A reply is:

``str``
    the assistant message's ``content`` (finish_reason "stop", usage 1 + 1 tokens);
``int``
    that HTTP status with an OpenAI-style error body;
``callable``
    called with the request's JSON body; its return value is the reply (any form here);
``dict``
    a full description, every key optional:

    ``content`` (str or None), ``tool_calls`` (a list of ``{"name", "arguments", "id"}``:
    arguments a dict (sent as JSON text) or the exact text to send; ``id`` defaults to
    ``call_<request>_<i>``, ``"id": None`` sends none; an item holding ``function`` is sent
    as it is), ``refusal`` (str), ``finish_reason`` (default "stop", or "tool_calls" when
    there are tool calls), ``usage`` (dict; None sends no usage; default 1 prompt + 1
    completion token), ``message`` (the whole message object, sent as it is), ``delay``
    (seconds before answering), ``status`` (an HTTP status: with ``raw`` that body, else an
    error body), ``headers`` (extra response headers, e.g. ``{"Retry-After": "0"}``),
    ``raw`` (str or bytes: the body sent verbatim, e.g. garbage), ``endless`` (True: a
    body that never ends, 64 KiB chunks every ``chunk_delay`` seconds, until the client
    hangs up).
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEFAULT_USAGE = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}


def tool_call(name, arguments=None, id=None) -> dict:
    """A scripted tool call (``arguments`` a dict, or the exact text to send)."""
    return {"name": name, "arguments": {} if arguments is None else arguments, "id": id}


class StubChatServer:
    def __init__(self, replies, default=503):
        self.replies = list(replies)
        self.default = default
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
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
                        parsed = json.loads(body)
                    except ValueError:
                        parsed = {"_unparseable": body.decode("utf-8", "replace")}
                    stub.requests.append(parsed)
                    n = len(stub.requests)
                    reply = stub.replies.pop(0) if stub.replies else stub.default
                while callable(reply):
                    reply = reply(parsed)
                try:
                    if self.path.rstrip("/") != "/v1/chat/completions":
                        self._send(404, {"error": {"message": f"no route {self.path}"}})
                    else:
                        self._answer(reply, n)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client hung up (as it must on an endless body)

            def _answer(self, reply, n):
                if isinstance(reply, int):
                    self._send(reply, {"error": {"message": f"stub status {reply}"}})
                    return
                if isinstance(reply, str):
                    reply = {"content": reply}
                spec = dict(reply)
                if spec.get("delay"):
                    time.sleep(spec["delay"])
                extra = spec.get("headers") or {}
                if spec.get("endless"):
                    self.send_response(spec.get("status", 200))
                    self.send_header("Content-Type", "application/json")
                    for key, value in extra.items():
                        self.send_header(key, str(value))
                    self.end_headers()
                    self.wfile.write(b'{"choices": [{"message": {"content": "')
                    chunk = b"a" * 65536
                    while not stub._stopping.is_set():
                        self.wfile.write(chunk)
                        self.wfile.flush()
                        if spec.get("chunk_delay"):
                            time.sleep(spec["chunk_delay"])
                    return
                if "raw" in spec:
                    raw = spec["raw"] if isinstance(spec["raw"], bytes) else str(spec["raw"]).encode()
                    self._send_bytes(spec.get("status", 200), raw, extra)
                    return
                if "status" in spec and spec["status"] != 200:
                    self._send(spec["status"], {"error": {"message": spec.get("error", f"stub status {spec['status']}")}},
                               extra)
                    return
                message = spec.get("message")
                if message is None:
                    message = {"role": "assistant", "content": spec.get("content")}
                    calls = []
                    for i, call in enumerate(spec.get("tool_calls") or ()):
                        if "function" in call:
                            calls.append(call)
                            continue
                        args = call.get("arguments", {})
                        item = {"type": "function",
                                "function": {"name": call.get("name"),
                                             "arguments": args if isinstance(args, str) else json.dumps(args)}}
                        if "id" not in call or call["id"] is not None:
                            item["id"] = call.get("id") or f"call_{n}_{i}"
                        calls.append(item)
                    if calls:
                        message["tool_calls"] = calls
                    if spec.get("refusal") is not None:
                        message["refusal"] = spec["refusal"]
                finish = spec.get("finish_reason", "tool_calls" if message.get("tool_calls") else "stop")
                payload = {"id": f"stub-{n}", "object": "chat.completion", "model": "stub",
                           "choices": [{"index": 0, "finish_reason": finish, "message": message}]}
                usage = spec.get("usage", DEFAULT_USAGE)
                if usage is not None:
                    payload["usage"] = usage
                self._send(200, payload, extra)

            def _send(self, status, payload, extra=None):
                self._send_bytes(status, json.dumps(payload).encode(), extra or {})

            def _send_bytes(self, status, data, extra):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in extra.items():
                    self.send_header(key, str(value))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self._stopping.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
