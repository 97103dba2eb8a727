"""The kill-a-worker tests find the process that sent a request by both ends of its connection: Linux gives one
local port to several connections with different peers, so the client's port alone can name the wrong process."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from executions import worker_owning

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
