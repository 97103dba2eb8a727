"""A minimal OpenAI-compatible chat server for benchmarks: plain asyncio, HTTP/1.1 keep-alive, one process.

Run it as its own process (`python benchmarks/loopback.py PORT`) so that its CPU is never charged to the
client being measured. Every POST gets a valid `chat.completion` with usage after the latency of its model:
`<name>-lat<ms>` in the request's model answers after that many milliseconds (e.g. `bench-lat100`,
`bench-lat0`), any other model after `--latency` seconds. The reply's text is "A clearer prompt.", or
`--reply TEXT` (e.g. a JSON critique, which a structured call parses and a plain call takes as text), where
`{n}` stands for the request's number (so no two replies are the same).
`GET /stats` returns the requests served, the requests that asked for a stream (`"stream": true`) and the
peak number of requests in flight since the last `GET /stats` (and starts a new window).

`LoopbackServer` starts it as a child process on a free port (for the benchmark scripts).

Only the standard library is used: it must start fast and hold hundreds of connections cheaply (one
coroutine-free protocol object per connection, one timer per request).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

_LATENCY = re.compile(rb'"model"\s*:\s*"([^"]*?)-lat(\d+)"')
_MODEL = re.compile(rb'"model"\s*:\s*"([^"]*)"')
_STREAM = re.compile(rb'"stream"\s*:\s*true')
DEFAULT_REPLY = "A clearer prompt."


class Stats:
    """Requests in flight now, their peak in the current window, and requests served in it."""

    def __init__(self) -> None:
        self.active = 0
        self.peak = 0
        self.served = 0
        self.streamed = 0
        self.total = 0
        """Requests answered since the start (numbers the replies)."""

    def window(self) -> dict[str, int]:
        out = {"peak_in_flight": self.peak, "served": self.served, "streamed": self.streamed}
        self.peak, self.served, self.streamed = self.active, 0, 0
        return out


def _reply(model: str, n: int, text: str) -> bytes:
    return json.dumps(
        {
            "id": f"chatcmpl-bench-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "logprobs": None,
                    "message": {"role": "assistant", "content": text.replace("{n}", str(n))},
                }
            ],
            "usage": {"prompt_tokens": 20, "completion_tokens": 4, "total_tokens": 24},
        }
    ).encode()


def _response(status: str, body: bytes) -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: keep-alive\r\n\r\n"
    )
    return head.encode() + body


class Handler(asyncio.Protocol):
    """One connection: requests read one after another (clients here do not pipeline)."""

    def __init__(self, stats: Stats, default_latency: float, text: str = DEFAULT_REPLY) -> None:
        self.stats = stats
        self.default_latency = default_latency
        self.text = text
        self.buf = b""
        self.transport: Any = None
        self.busy = False

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self._next()

    def _next(self) -> None:
        if self.busy:
            return
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        head = self.buf[:end].decode("latin-1")
        length = 0
        for line in head.split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        if len(self.buf) < end + 4 + length:
            return
        body = self.buf[end + 4 : end + 4 + length]
        self.buf = self.buf[end + 4 + length :]
        method, path = head.split(" ", 2)[:2]
        if method == "GET" and path.startswith("/stats"):
            self.transport.write(_response("200 OK", json.dumps(self.stats.window()).encode()))
            return self._next()
        found = _LATENCY.search(body)
        latency = int(found.group(2)) / 1000 if found else self.default_latency
        name = _MODEL.search(body)
        model = name.group(1).decode() if name else "bench"
        self.busy = True
        self.stats.streamed += bool(_STREAM.search(body))
        self.stats.active += 1
        self.stats.peak = max(self.stats.peak, self.stats.active)
        asyncio.get_running_loop().call_later(latency, self._answer, model)

    def _answer(self, model: str) -> None:
        self.stats.active -= 1
        self.stats.served += 1
        self.stats.total += 1
        self.busy = False
        if not self.transport.is_closing():
            self.transport.write(_response("200 OK", _reply(model, self.stats.total, self.text)))
        self._next()


async def serve(port: int, latency: float, text: str = DEFAULT_REPLY) -> None:
    stats = Stats()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Handler(stats, latency, text), "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("port", type=int)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--reply", default=DEFAULT_REPLY, help="the text of every reply")
    args = ap.parse_args()
    asyncio.run(serve(args.port, args.latency, args.reply))


class LoopbackServer:
    """This server as a child process on a free port: `base` is its /v1 URL, `stats()` its `GET /stats`."""

    def __init__(self, reply: str = DEFAULT_REPLY) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__)), str(self.port), "--reply", reply])
        self.base = f"http://127.0.0.1:{self.port}/v1"
        deadline = time.time() + 30
        while True:
            try:
                self.stats()
                return
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)

    def stats(self) -> dict[str, int]:
        """The peak in flight, the requests served and those streamed since the last call."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=5) as r:
            return json.loads(r.read())  # type: ignore[no-any-return]

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


if __name__ == "__main__":
    main()
