"""#51 item 7: a call's deadline counts from the call. The process's one-time import of litellm (seconds; 15 s on a
loaded machine, so a 3 s deadline took 10-18 s) is never inside a call's clock: `warm_up` spends it before the first
call starts (a sweep cell's config check does), and `acomplete` spends it in a worker thread before its checks,
never holding the event loop that the other calls' deadlines run on. Checked by order of events in a fresh process,
never by a clock."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from fault_server import FaultServer, Reply

PROBE = """
import asyncio, sys, traceback
importing = []  # the stack that started litellm's import
def hook(event, args):
    if event == "import" and str(args[0]).split(".")[0] == "litellm" and not importing:
        importing.append([f.name for f in traceback.extract_stack()])
sys.addaudithook(hook)
import promptlab as pl
from promptlab.llm.providers import litellm_lazy
assert "litellm" not in sys.modules
URL, MODEL = {url!r}, {model!r}
"""

WARMED = """
from promptlab.llm import warm_up
assert not warm_up(["fake/auto", "local/smollm2"]) and "litellm" not in sys.modules  # in-process: nothing to do
assert warm_up([MODEL]) and importing and not warm_up([MODEL])
print(pl.complete(MODEL, "hi", api_base=URL, api_key="sk-first", cache=False).text, "imported in:", importing[0][-3])
"""

ASYNC = """
ticks = []  # (import started, import finished) seen by each tick of a heartbeat on the event loop
async def main():
    async def beat():
        while True:
            ticks.append((bool(importing), litellm_lazy.litellm_loaded()))
            await asyncio.sleep(0)
    hb = asyncio.create_task(beat())
    await asyncio.sleep(0)
    done = await pl.acomplete(MODEL, "hi", api_base=URL, api_key="sk-first", cache=False)
    hb.cancel()
    return done
print(asyncio.run(main()).text, "loop ran during the import:", (True, False) in ticks)
"""


def probe(server: FaultServer, body: str) -> str:
    code = textwrap.dedent(PROBE.format(url=server.url, model=server.model)) + textwrap.dedent(body)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()[-1]


@pytest.fixture
def server() -> FaultServer:
    with FaultServer(default=Reply('{"score": 7, "reason": "ok", "prompt": "Rain."}'), model="gpt-4o-mini") as s:
        yield s


def test_warm_up_spends_the_import_before_the_first_call(server: FaultServer) -> None:
    assert probe(server, WARMED) == '{"score": 7, "reason": "ok", "prompt": "Rain."} imported in: warm_up'


def test_acomplete_imports_litellm_off_the_event_loop(server: FaultServer) -> None:
    assert probe(server, ASYNC).endswith("loop ran during the import: True")
