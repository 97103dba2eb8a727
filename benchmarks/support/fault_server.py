"""The loopback OpenAI-compatible server of the tests: it replies, or fails, on a schedule and counts every request.

Use it as the pytest fixture `fault_server` (`from fault_server import fault_server_fixture  # noqa: F401` in a
test module makes it available) or directly from a script:

    with FaultServer(["429", "500", Reply('{"score": 7}')]) as server:
        pl.complete(server.model, "hi", api_base=server.url, api_key="sk-test")
        server.requests  # 3

Schedule items, taken one per request in order (after the schedule runs out, `default` is used):
  - `Reply(text, prompt_tokens, completion_tokens, ...)` or a plain reply text (any str that is not a fault name):
    a chat completion; a request with `"stream": true` gets it as server-sent events (the text in `pieces`
    pieces, a finish reason, the usage, then `[DONE]`);
  - `Status(code, message, retry_after=...)`, or "429", "500", "503": that HTTP status with an OpenAI-style error
    body ("429" says `Retry-After: 0`);
  - `Raw(body, status, content_type, headers)`: exactly that response;
  - a fault name (`BROKEN`, each answered by `Handler.fault_<name>`):
    "hang" (accept the request and never answer, until the server closes), "drop" (close the connection without
    a reply), "html" (a 200 text/html page), "truncated" (a 200 JSON body cut in half), "badutf8" (a 200 JSON
    body with bytes that are not UTF-8), "notchat" (a 200 JSON object that is not a chat completion), "cut" (a
    stream that closes after one piece with no finish reason and no [DONE]; a plain reply that closes halfway
    through its declared length), "drip" (the reply sent one byte every `drip_s` seconds), "big" (a valid reply
    of `big_bytes` bytes), "plain" (a plain JSON reply even when the request asked for a stream).
`responder(body)` (optional) picks the item of each request once the schedule runs out; `on_request(index,
client_address)` (optional) is called as each request arrives, before it is answered; `delivered[i]` says
whether request i's reply reached a client that was still connected (what a provider bills). `in_flight` and
`peak` count the requests being answered at once, by `group(body)` (optional; one group "" without it).
Only the standard library is used, so a benchmark can import this file without pytest.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Union

FAULTS = {"429": 429, "500": 500, "503": 503}
"""Fault names answered with an HTTP error status."""
BROKEN = ("hang", "drop", "html", "truncated", "badutf8", "notchat", "cut", "drip", "big", "plain")
"""Fault names answered by `Handler.fault_<name>`: no reply, or a reply that is not one."""
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
    model: str | None = None
    """The model the reply reports (None: the model of the request)."""
    finish_reason: str = "stop"
    logprobs: list[dict[str, Any]] | None = None
    """The choice's `logprobs.content` (OpenAI's shape), if any."""
    usage: bool = True
    """Whether the reply reports its usage (False: no `usage` at all)."""
    pieces: int = 2
    """How many pieces a streamed reply's text comes in."""


@dataclass(frozen=True)
class Status:
    """An HTTP error status with an OpenAI-style error body."""

    code: int
    message: str = ""
    retry_after: str | None = None
    """The Retry-After header, if any."""


@dataclass(frozen=True)
class Raw:
    """A response sent exactly as given."""

    body: bytes | str | dict[str, Any]
    status: int = 200
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


Item = Union[Reply, Status, Raw, str]


def completion(reply: Reply, model: str) -> dict[str, Any]:
    """The chat completion (OpenAI's JSON) of a Reply."""
    choice: dict[str, Any] = {
        "index": 0,
        "finish_reason": reply.finish_reason,
        "message": {"role": "assistant", "content": reply.text},
    }
    if reply.logprobs is not None:
        choice["logprobs"] = {"content": reply.logprobs}
    body: dict[str, Any] = {
        "id": "chatcmpl-fault",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model or model,
        "choices": [choice],
    }
    if reply.usage:
        body["usage"] = {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        }
    return body


def events(reply: Reply, model: str) -> list[dict[str, Any]]:
    """The server-sent events of a streamed Reply: its pieces, the last with the finish reason, then the usage."""
    base = {
        "id": "chatcmpl-fault",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": reply.model or model,
    }
    n = max(1, reply.pieces)
    size = -(-len(reply.text) // n) if reply.text else 0
    parts = [reply.text[i * size : (i + 1) * size] for i in range(n)] if size else [""] * n
    out = [
        {
            **base,
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": part, **({"role": "assistant"} if i == 0 else {})},
                    "finish_reason": reply.finish_reason if i == n - 1 else None,
                }
            ],
        }
        for i, part in enumerate(parts)
    ]
    if reply.usage:
        out.append(
            {
                **base,
                "choices": [],
                "usage": {
                    "prompt_tokens": reply.prompt_tokens,
                    "completion_tokens": reply.completion_tokens,
                    "total_tokens": reply.prompt_tokens + reply.completion_tokens,
                },
            }
        )
    return out


def sse(chunks: list[dict[str, Any]], done: bool = True) -> bytes:
    """Events as an event-stream body (with the closing [DONE] unless `done` is False)."""
    return ("".join(f"data: {json.dumps(e)}\n\n" for e in chunks) + ("data: [DONE]\n\n" if done else "")).encode()


class _Served(ThreadingHTTPServer):
    request_queue_size = 512  # many connections at once (the default backlog of 5 would drop some)
    daemon_threads = True
    fault: FaultServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet about clients that went away (a refused reply, a cancelled request); loud about the rest."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class FaultServer:
    """An OpenAI-compatible /v1/chat/completions on 127.0.0.1 that follows a schedule of replies and faults."""

    def __init__(
        self,
        schedule: Iterable[Item] = (),
        *,
        default: Item = "ok",
        model: str = "test-model",
        responder: Callable[[dict[str, Any]], Item] | None = None,
        on_request: Callable[[int, tuple[str, int]], None] | None = None,
        group: Callable[[dict[str, Any]], str] | None = None,
        drip_s: float = 0.2,
        big_bytes: int = 9 * 2**20,
    ) -> None:
        self.schedule: list[Item] = list(schedule)
        self.default = default
        self.responder = responder
        """Picks the item of a request from its body once the schedule runs out (instead of `default`)."""
        self.on_request = on_request
        """Called with (request index, client address) as each request arrives, before it is answered."""
        self.drip_s = drip_s
        """Seconds between the bytes of a "drip" reply."""
        self.big_bytes = big_bytes
        """The size of a "big" reply's text."""
        self.delivered: list[bool] = []
        """Per request: its successful reply was written to a client still connected (False: not, or a fault)."""
        self.requests = 0
        """Requests received on /v1/chat/completions (every HTTP request the client made)."""
        self.bodies: list[dict[str, Any]] = []
        """The JSON bodies received, in order."""
        self.headers: list[dict[str, str]] = []
        """The headers of each request (names in lower case), in order."""
        self.times: list[float] = []
        """When each request arrived (time.monotonic), in order."""
        self.served: list[str] = []
        """What each request got: 'ok', '429', 'hang', 'raw', ..."""
        self.tokens_served = [0, 0]
        """Prompt and completion tokens of every successful reply sent (what a client was billed for)."""
        self.keys: set[str] = set()
        """The bearer tokens (api keys) the requests carried."""
        self.auth: list[str] = []
        """The bearer token of each request, in order."""
        self.group = group
        """Names the group a request's body counts in, for `in_flight` and `peak` (None: one group "")."""
        self.in_flight: dict[str, int] = {}
        """Per group: requests received and not yet answered (or dropped)."""
        self.peak: dict[str, int] = {}
        """Per group: the most requests in flight at once."""
        self._model = model
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._httpd = _Served(("127.0.0.1", 0), Handler)
        self._httpd.fault = self
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
    def host(self) -> str:
        """127.0.0.1:<port>, as errors and endpoint identities name the server."""
        return f"127.0.0.1:{self.port}"

    @property
    def model(self) -> str:
        """The litellm model name routed to this server (`openai/<model>` with api_base=url)."""
        return f"openai/{self._model}"

    @property
    def streamed(self) -> int:
        """Requests that asked for a stream (`"stream": true`)."""
        return sum(bool(b.get("stream")) for b in self.bodies)

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

    def enter(self, body: dict[str, Any]) -> str:
        """Count a request in flight in its group; returns the group."""
        name = self.group(body) if self.group is not None else ""
        with self._lock:
            self.in_flight[name] = self.in_flight.get(name, 0) + 1
            self.peak[name] = max(self.peak.get(name, 0), self.in_flight[name])
        return name

    def leave(self, name: str) -> None:
        with self._lock:
            self.in_flight[name] -= 1

    def next(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Item]:
        """Record a request and take its item."""
        key = headers.get("authorization", "").removeprefix("Bearer ")
        with self._lock:
            index = self.requests
            self.requests += 1
            self.bodies.append(body)
            self.headers.append(headers)
            self.times.append(time.monotonic())
            self.delivered.append(False)
            self.keys.add(key)
            self.auth.append(key)
            if self.schedule:
                item = self.schedule.pop(0)
            else:
                item = self.responder(body) if self.responder is not None else self.default
            self.served.append(_name(item))
            return index, item

    def billed(self, index: int, reply: Reply) -> None:
        """Count a reply that reached a connected client."""
        with self._lock:
            self.delivered[index] = True
            if isinstance(reply.prompt_tokens, int) and isinstance(reply.completion_tokens, int):  # a test's bad usage
                self.tokens_served[0] += reply.prompt_tokens  # is not counted
                self.tokens_served[1] += reply.completion_tokens


def _name(item: Item) -> str:
    if isinstance(item, Status):
        return str(item.code)
    if isinstance(item, Raw):
        return "raw"
    if isinstance(item, str) and (item in FAULTS or item in BROKEN):
        return item
    return "ok"


class Handler(BaseHTTPRequestHandler):
    """Answers one request with its scheduled item."""

    protocol_version = "HTTP/1.1"
    server: _Served

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    @property
    def fault(self) -> FaultServer:
        return self.server.fault

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self.send(404, json.dumps({"error": {"message": f"no route {self.path}", "type": "not_found"}}).encode())
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        index, item = self.fault.next(body, {k.lower(): v for k, v in self.headers.items()})
        name = self.fault.enter(body)
        try:
            if self.fault.on_request is not None:
                self.fault.on_request(index, self.client_address)
            self.answer(body, index, item)
        except OSError:
            self.close_connection = True
        finally:
            self.fault.leave(name)

    def answer(self, body: dict[str, Any], index: int, item: Item) -> None:
        if isinstance(item, str) and item in FAULTS:
            item = Status(FAULTS[item], retry_after="0" if item == "429" else None)
        if isinstance(item, Status):
            message = item.message or f"injected fault {item.code}"
            headers = {"Retry-After": item.retry_after} if item.retry_after is not None else {}
            self.send(
                item.code,
                json.dumps({"error": {"message": message, "type": "server_error", "code": item.code}}).encode(),
                headers=headers,
            )
        elif isinstance(item, Raw):
            data = (
                item.body
                if isinstance(item.body, bytes)
                else (item.body.encode() if isinstance(item.body, str) else json.dumps(item.body).encode())
            )
            self.send(item.status, data, item.content_type, item.headers)
        elif isinstance(item, str) and item in BROKEN:
            getattr(self, f"fault_{item}")(body)
        else:
            self.reply(body, index, item if isinstance(item, Reply) else Reply(item))

    def reply(self, body: dict[str, Any], index: int, reply: Reply, *, plain: bool = False) -> None:
        if reply.delay_s:
            self.fault._closing.wait(reply.delay_s)
        if not _peer_open(self.connection):
            self.close_connection = True
            return
        if body.get("stream") and not plain:
            self.send(200, sse(events(reply, self.model_of(body))), "text/event-stream")
        else:
            self.send(200, json.dumps(completion(reply, self.model_of(body))).encode())
        self.fault.billed(index, reply)

    def model_of(self, body: dict[str, Any]) -> str:
        return str(body.get("model") or self.fault._model)

    def ok_body(self, body: dict[str, Any], reply: Reply) -> tuple[bytes, str]:
        """The body and content type of a successful reply to this request."""
        if body.get("stream"):
            return sse(events(reply, self.model_of(body))), "text/event-stream"
        return json.dumps(completion(reply, self.model_of(body))).encode(), "application/json"

    def send(
        self,
        status: int,
        data: bytes,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
        *,
        length: int | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data) if length is None else length))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    # the faults ---------------------------------------------------------------------------------------
    def fault_hang(self, body: dict[str, Any]) -> None:
        self.fault._closing.wait(600)
        self.close_connection = True

    def fault_drop(self, body: dict[str, Any]) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def fault_html(self, body: dict[str, Any]) -> None:
        self.send(200, b"<html><body><h1>Welcome to nginx!</h1></body></html>", "text/html")

    def fault_truncated(self, body: dict[str, Any]) -> None:
        data, kind = self.ok_body(body, Reply("a reply cut short"))
        self.send(200, data[: len(data) // 2], kind)

    def fault_badutf8(self, body: dict[str, Any]) -> None:
        data, kind = self.ok_body(body, Reply("BAD", pieces=1))
        self.send(200, data.replace(b"BAD", b"\xff\xfe\xfd"), kind)

    def fault_notchat(self, body: dict[str, Any]) -> None:
        self.send(200, json.dumps({"object": "list", "data": [{"id": "not-a-completion"}]}).encode())

    def fault_cut(self, body: dict[str, Any]) -> None:
        if body.get("stream"):
            first = events(Reply("the first piece and then nothing"), self.model_of(body))[:1]
            self.send(200, sse(first, done=False), "text/event-stream")
        else:
            data, kind = self.ok_body(body, Reply("a reply that never ends"))
            self.send(200, data[: len(data) // 2], kind, length=len(data))
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def fault_drip(self, body: dict[str, Any]) -> None:
        data, kind = self.ok_body(body, Reply("a slow reply " * 40))
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.flush()
        for i in range(len(data)):
            if self.fault._closing.wait(self.fault.drip_s):
                break
            self.wfile.write(data[i : i + 1])
            self.wfile.flush()
        self.close_connection = True

    def fault_big(self, body: dict[str, Any]) -> None:
        data, kind = self.ok_body(body, Reply("x" * self.fault.big_bytes))
        self.send(200, data, kind)

    def fault_plain(self, body: dict[str, Any]) -> None:
        self.send(
            200, json.dumps(completion(Reply("a plain reply to a streamed request"), self.model_of(body))).encode()
        )


class Gather:
    """An `on_request` hook that holds each request of a group until `n` of that group are in flight at once, then
    holds none of it: a test of a concurrency limit then sees the peak the limit allows however slowly a busy
    machine sends the requests (a reply's delay only makes that likely), and a limit passed still shows as a
    higher peak. A group that never gathers `n` is let go after `timeout_s` (a hang guard), its lower peak shown.

        server.on_request = Gather(server, 8)                           # one group
        server.on_request = Gather(server, {"100": 2, "101": 2})        # per `group(body)` of the server
    """

    def __init__(self, server: FaultServer, n: int | dict[str, int], timeout_s: float = 60.0) -> None:
        self.server = server
        self.wanted = n if isinstance(n, dict) else {"": n}
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._arrived: dict[str, int] = {}
        self._gathered = {name: threading.Event() for name in self.wanted}

    def __call__(self, index: int, client_address: tuple[str, int]) -> None:
        body = self.server.bodies[index]
        name = self.server.group(body) if self.server.group is not None else ""
        gathered = self._gathered.get(name)
        if gathered is None:  # a group the test did not name: not held
            return
        with self._lock:
            self._arrived[name] = self._arrived.get(name, 0) + 1
            if self._arrived[name] >= self.wanted[name]:
                gathered.set()
        gathered.wait(self.timeout_s)


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
