"""The kill-a-worker tests find the process that sent a request by both ends of its connection: Linux gives one
local port to several connections with different peers, so the client's port alone can name the wrong process; and
they answer a killed process's request once the server has seen its connection close, not once its main thread is
a zombie (its other threads, and its sockets, end later)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest
from executions import killed_and_seen, worker_owning

HOLD = """
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.connect(("127.0.0.1", int(sys.argv[2])))
print("connected", flush=True)
time.sleep(60)
"""


def listener() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


@pytest.mark.slow
def test_two_connections_from_one_local_port_name_the_process_talking_to_the_server(tmp_path: Path) -> None:
    script = tmp_path / "hold.py"
    script.write_text(HOLD, encoding="utf-8")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with listener() as scheduler, listener() as server:
        children = []
        try:
            for peer in (scheduler, server):  # the first child's connection has the same local port, another peer
                child = subprocess.Popen(
                    [sys.executable, str(script), str(port), str(peer.getsockname()[1])], stdout=subprocess.PIPE
                )
                children.append(child)
                assert child.stdout is not None and child.stdout.readline() == b"connected\n"
            assert worker_owning(("127.0.0.1", port), server.getsockname()[1]) == children[1].pid
            assert worker_owning(("127.0.0.1", port), scheduler.getsockname()[1]) == children[0].pid
        finally:
            for child in children:
                child.kill()
                child.wait()


THREADED = """
import socket, sys, threading, time
def spin():
    while True:
        pass
for _ in range(8):
    threading.Thread(target=spin, daemon=True).start()
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"x")  # sent once its threads run
time.sleep(60)
"""


@pytest.mark.slow
def test_a_killed_multithreaded_client_is_seen_closed_before_its_request_is_answered(tmp_path: Path) -> None:
    # with only its main thread a zombie, half of such connections were still open (102 of 200 beside CPU hogs)
    script = tmp_path / "threaded.py"
    script.write_text(THREADED, encoding="utf-8")
    with listener() as server:
        for _ in range(10):
            child = subprocess.Popen([sys.executable, str(script), str(server.getsockname()[1])])
            try:
                conn, client = server.accept()
                with conn:
                    assert conn.recv(1) == b"x"
                    child.kill()
                    seen = partial(killed_and_seen, child.pid, client, server.getsockname()[1])
                    deadline = time.monotonic() + 60  # a hang guard only
                    while not seen() and time.monotonic() < deadline:
                        pass  # polled without a pause: the first moment it holds is the one tested
                    assert seen()
                    assert conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""  # the client's end is closed
            finally:
                child.kill()
                child.wait()
