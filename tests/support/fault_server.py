"""A loopback OpenAI-compatible server that replies, or fails, on a schedule and counts every request.

Use it as the pytest fixture `fault_server` (`from fault_server import fault_server_fixture  # noqa: F401` in a
test module makes it available) or directly from a script:

    with FaultServer(["429", "500", Reply('{"score": 7}')]) as server:
        pl.complete(server.model, "hi", api_base=server.url, api_key="sk-test")
        server.requests  # 3

Schedule items, taken one per request in order (after the schedule runs out, `default` is used):
  - `Reply(text, prompt_tokens, completion_tokens)` or a plain reply text (any str that is not a fault name);
  - "429", "500", "503": that HTTP status with an OpenAI-style error body;
  - "hang": accept the request and never answer (until the server closes);
  - "drop": close the connection without a reply.
A request with `"stream": true` gets its reply as server-sent events (text in two pieces, then the usage).
`responder(body)` (optional) picks the item of each request once the schedule runs out; `on_request(index,
client_address)` (optional) is called as each request arrives, before it is answered; `delivered[i]` says
whether request i's reply reached a client that was still connected (what a provider bills). `in_flight` and
`peak` count the requests being answered at once, by `group(body)` (optional; one group "" without it).
Only the standard library is used, so a benchmark can import this file without pytest.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Union

FAULTS = {"429": 429, "500": 500, "503": 503}
"""Fault names answered with an HTTP error status."""
SILENT = ("hang", "drop")
"""Fault names that never send a status line."""


@dataclass(frozen=True)
class Reply:
    """A successful chat completion."""

    text: str
    prompt_tokens: int = 11
    completion_tokens: int = 5
    delay_s: float = 0.0
    """Seconds to wait before answering (to hold calls in flight at the same time)."""


Item = Union[Reply, str]


def _body(reply: Reply, model: str) -> bytes:
    return json.dumps({
        "id": "chatcmpl-fault", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": reply.text}}],
        "usage": {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                  "total_tokens": reply.prompt_tokens + reply.completion_tokens},
    }).encode()


class FaultServer:
    """An OpenAI-compatible /v1/chat/completions on 127.0.0.1 that follows a schedule of replies and faults."""

    def __init__(self, schedule: Iterable[Item] = (), *, default: Item = "ok", model: str = "test-model",
                 responder: Callable[[dict[str, Any]], Item] | None = None,
                 on_request: Callable[[int, tuple[str, int]], None] | None = None,
                 group: Callable[[dict[str, Any]], str] | None = None) -> None:
        self.schedule: list[Item] = list(schedule)
        self.default = default
        self.responder = responder
        """Picks the item of a request from its body once the schedule runs out (instead of `default`)."""
        self.on_request = on_request
        """Called with (request index, client address) as each request arrives, before it is answered."""
        self.delivered: list[bool] = []
        """Per request: its successful reply was written to a client still connected (False: not, or a fault)."""
        self.requests = 0
        """Requests received on /v1/chat/completions (every HTTP request the client made)."""
        self.bodies: list[dict[str, Any]] = []
        """The JSON bodies received, in order."""
        self.served: list[str] = []
        """What each request got: 'ok', '429', 'hang', ..."""
        self.tokens_served = [0, 0]
        """Prompt and completion tokens of every successful reply sent (what a client was billed for)."""
        self.keys: set[str] = set()
        """The bearer tokens (api keys) the requests carried."""
        self.group = group
        """Names the group a request's body counts in, for `in_flight` and `peak` (None: one group "")."""
        self.in_flight: dict[str, int] = {}
        """Per group: requests received and not yet answered (or dropped)."""
        self.peak: dict[str, int] = {}
        """Per group: the most requests in flight at once."""
        self._model = model
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="fault-server", daemon=True)

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The api_base to give the client: http://127.0.0.1:<port>/v1."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model(self) -> str:
        """The litellm model name routed to this server (`openai/<model>` with api_base=url)."""
        return f"openai/{self._model}"

    def script(self, *items: Item) -> None:
        """Append items to the schedule."""
        with self._lock:
            self.schedule.extend(items)

    def start(self) -> FaultServer:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Release hung requests and stop serving."""
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _enter(self, body: dict[str, Any]) -> str:
        """Count a request in flight in its group; returns the group."""
        name = self.group(body) if self.group is not None else ""
        with self._lock:
            self.in_flight[name] = self.in_flight.get(name, 0) + 1
            self.peak[name] = max(self.peak.get(name, 0), self.in_flight[name])
        return name

    def _leave(self, name: str) -> None:
        with self._lock:
            self.in_flight[name] -= 1

    def _next(self, body: dict[str, Any], key: str) -> tuple[int, Item]:
        with self._lock:
            index = self.requests
            self.requests += 1
            self.bodies.append(body)
            self.delivered.append(False)
            self.keys.add(key)
            if self.schedule:
                item = self.schedule.pop(0)
            else:
                item = self.responder(body) if self.responder is not None else self.default
            self.served.append(item if isinstance(item, str) and (item in FAULTS or item in SILENT) else "ok")
            return index, item

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                index, item = server._next(body, self.headers.get("Authorization", "").removeprefix("Bearer "))
                name = server._enter(body)
                try:
                    self._answer(body, index, item)
                finally:
                    server._leave(name)

            def _answer(self, body: dict[str, Any], index: int, item: Item) -> None:
                if server.on_request is not None:
                    server.on_request(index, self.client_address)
                if item == "hang":
                    server._closing.wait(600)
                    self.close_connection = True
                    return
                if item == "drop":
                    self.close_connection = True
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return
                if isinstance(item, str) and item in FAULTS:
                    status = FAULTS[item]
                    self._send(status, {"error": {"message": f"injected fault {status}", "type": "server_error",
                                                  "code": status}})
                    return
                reply = item if isinstance(item, Reply) else Reply(item)
                if reply.delay_s:
                    server._closing.wait(reply.delay_s)
                model = str(body.get("model") or server._model)
                if not _peer_open(self.connection):
                    self.close_connection = True
                    return
                try:
                    if body.get("stream"):
                        self._stream(reply, model)
                    else:
                        self._raw(200, _body(reply, model))
                except OSError:
                    self.close_connection = True
                    return
                with server._lock:
                    server.delivered[index] = True
                    server.tokens_served[0] += reply.prompt_tokens
                    server.tokens_served[1] += reply.completion_tokens

            def _stream(self, reply: Reply, model: str) -> None:
                """Server-sent events: the text in two pieces, then the usage, then [DONE]."""
                half = len(reply.text) // 2
                base = {"id": "chatcmpl-fault", "object": "chat.completion.chunk", "created": int(time.time()),
                        "model": model}
                events = [
                    {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": reply.text[:half]},
                                          "finish_reason": None}]},
                    {**base, "choices": [{"index": 0, "delta": {"content": reply.text[half:]},
                                          "finish_reason": "stop"}]},
                    {**base, "choices": [], "usage": {
                        "prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                        "total_tokens": reply.prompt_tokens + reply.completion_tokens}},
                ]
                data = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
                raw = data.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                self._raw(status, json.dumps(payload).encode())

            def _raw(self, status: int, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if status == 429:
                    self.send_header("Retry-After", "0")
                self.end_headers()
                self.wfile.write(data)

        return Handler


def _peer_open(sock: socket.socket) -> bool:
    """Whether the client is still connected (it has not closed or reset the connection)."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def free_port() -> int:
    """A loopback port with nothing listening on it (for connection-refused tests)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


try:  # the fixture, when pytest is there (a benchmark script may import this file without it)
    import pytest

    @pytest.fixture(name="fault_server")
    def fault_server_fixture() -> Iterator[FaultServer]:
        """A started FaultServer, closed after the test; script it with `.script(...)`."""
        with FaultServer() as server:
            yield server
except ImportError:  # pragma: no cover
    pass
