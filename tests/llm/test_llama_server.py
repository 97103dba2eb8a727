"""The embedded SmolLM2-135M served by llama-cpp-python's own OpenAI-compatible server (`python -m
llama_cpp.server`) on 127.0.0.1, reached through model aliases: structured output sent natively (detected,
told, or in the prompt), tokens, cost, the endpoint's identity, the cache, and a one-cell sweep whose
experiment file defines the alias.

llama-cpp-python's server refuses OpenAI's `{type: json_schema}` response_format (HTTP 500, a validation
error naming `response_format`) and takes `{type: json_object, schema}`, which it turns into a grammar: the
tests pin both what the server does and what promptlab makes of it. Every call runs at temperature 0.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel, Field

import promptlab as pl
from promptlab.errors import ParseError
from promptlab.llm.providers import aliases as models

pytestmark = [pytest.mark.local_model, pytest.mark.slow]  # llama-cpp-python's server, as a process

SERVED = "smollm2"
"""The model name the aliases send (the server serves one model and answers any name)."""
STARTUP_S = 90.0


class Rating(BaseModel):
    score: int = Field(ge=1, le=10)
    reason: str


PROMPT = "Rate the sentence 'The cat sat on the mat.' from 1 to 10 for clarity, with a short reason."


@dataclass
class LlamaServer:
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def post(self, body: dict[str, object]) -> tuple[int, dict[str, object]]:
        """POST a chat completion straight to the server: (HTTP status, JSON body)."""
        request = urllib.request.Request(
            f"{self.url}/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    try:
        import llama_cpp.server.app  # noqa: F401
    except ImportError as e:
        pytest.skip(
            f"llama_cpp.server cannot be imported ({e}): pip install fastapi uvicorn sse-starlette "
            "'starlette-context<0.4' pydantic-settings (the dev extra has them)"
        )
    from promptlab.llm.local.pool import resolve_model_path

    gguf = resolve_model_path("smollm2")
    port = _free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(gguf),
                "--model_alias",
                SERVED,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                "2048",
                "--seed",
                "0",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    running = LlamaServer(process, port, log)
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {process.returncode}:\n{log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{running.url}/models", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not answer /v1/models in {STARTUP_S:g}s:\n{log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield running
    finally:
        process.kill()
        process.wait(timeout=30)


@pytest.fixture(autouse=True)
def _clean_aliases() -> Iterator[None]:
    before = set(models.registered_models())
    yield
    for name in set(models.registered_models()) - before:
        models.unregister_model(name)


def _endpoint(server: LlamaServer, host: str = "127.0.0.1") -> str:
    """promptlab's per-endpoint memory key for the served model at this host."""
    return f"openai/{SERVED}@openai@{host}:{server.port}"


# what the server itself takes -----------------------------------------------------------------------------
def test_the_server_refuses_json_schema_and_takes_json_object_with_a_schema(server: LlamaServer) -> None:
    schema = Rating.model_json_schema()
    base = {"model": SERVED, "messages": [{"role": "user", "content": PROMPT}], "temperature": 0, "max_tokens": 60}
    status, body = server.post(
        {**base, "response_format": {"type": "json_schema", "json_schema": {"name": "Rating", "schema": schema}}}
    )
    assert status == 500 and "response_format" in json.dumps(body) and "validation error" in json.dumps(body)
    status, body = server.post({**base, "response_format": {"type": "json_object", "schema": schema}})
    assert status == 200
    Rating.model_validate_json(body["choices"][0]["message"]["content"])  # type: ignore[index]


# structured calls through an alias ------------------------------------------------------------------------
def test_detected_native_schema_parses_and_is_remembered(server: LlamaServer) -> None:
    endpoint = _endpoint(server)
    assert models.schema_support(endpoint) is None  # a fresh port: nothing learnt yet
    pl.register_model("served", model=f"openai/{SERVED}", api_base=server.url)  # native_schema=None: detect
    first = pl.complete("served", PROMPT, schema=Rating, max_tokens=80, cache=False)
    # json_schema refused (one request), then json_object with the schema: parsed on the grammar-bound reply
    assert isinstance(first.parsed, Rating) and first.attempts == 2
    assert first.finish_reason == "stop" and first.endpoint == f"litellm:openai@127.0.0.1:{server.port}"
    assert Rating.model_validate_json(first.text) == first.parsed  # the whole reply is the JSON object
    assert models.schema_support(endpoint) is True and models.schema_form(endpoint) == "json_object"
    second = pl.complete(
        "served", "Rate the sentence 'Dogs bark.' from 1 to 10.", schema=Rating, max_tokens=80, cache=False
    )
    assert isinstance(second.parsed, Rating) and second.attempts == 1  # straight to the remembered form


def test_native_schema_true_finds_the_form_the_server_takes(server: LlamaServer) -> None:
    endpoint = _endpoint(server, "localhost")  # another spelling: an endpoint nothing was learnt about
    assert models.schema_support(endpoint) is None
    pl.register_model(
        "native", model=f"openai/{SERVED}", api_base=f"http://localhost:{server.port}/v1", native_schema=True
    )
    c = pl.complete("native", PROMPT, schema=Rating, max_tokens=80, cache=False)
    assert isinstance(c.parsed, Rating) and c.attempts == 2
    assert Rating.model_validate_json(c.text) == c.parsed
    assert models.schema_form(endpoint) == "json_object"


def test_the_schema_in_the_prompt_is_not_followed_by_smollm2(server: LlamaServer) -> None:
    """native_schema=False: no grammar binds the reply, and the 135M model does not write the JSON object
    (the issue's ParseError), even after the re-asks."""
    pl.register_model("told", model=f"openai/{SERVED}", api_base=server.url, native_schema=False)
    with pytest.raises(ParseError) as info:
        pl.complete("told", PROMPT, schema=Rating, max_tokens=80, cache=False)
    e = info.value
    assert e.requests == 3 and e.output_tokens > 0 and len(e.attempts) == 3
    assert all("Rating" in f["error"] or "JSON" in f["error"] for f in e.attempts)


# plain calls: tokens, cost, endpoint, cache -------------------------------------------------------------
def test_tokens_cost_endpoint_and_cache(server: LlamaServer, tmp_path: Path) -> None:
    pl.register_model("plain", model=f"openai/{SERVED}", api_base=server.url)
    pl.register_model(
        "priced",
        model=f"openai/{SERVED}",
        api_base=server.url,
        price={"input_per_million": 1.0, "output_per_million": 2.0},
    )
    cache = tmp_path / "cache"
    c = pl.complete("plain", "Say hello.", max_tokens=16, cache=cache)
    assert c.input_tokens and c.input_tokens > 5 and 0 < (c.output_tokens or 0) <= 16
    assert c.cost_usd is None and not c.cache_hit  # litellm's price map does not know a served model
    assert c.endpoint == f"litellm:openai@127.0.0.1:{server.port}" and c.model == "plain"
    hit = pl.complete("plain", "Say hello.", max_tokens=16, cache=cache)
    assert hit.cache_hit and hit.key == c.key
    assert (hit.text, hit.input_tokens, hit.output_tokens, hit.endpoint) == (
        c.text,
        c.input_tokens,
        c.output_tokens,
        c.endpoint,
    )
    assert c.fingerprint is not None and hit.fingerprint == c.fingerprint  # a replay keeps what the reply rests on
    assert c.fingerprint["kind"] == "hosted" and c.fingerprint["model"] == c.response_model
    # a second request to the server is a fresh one: its prompt is the same, its greedy reply need not be (the
    # server reads the prompt from its cached prefix, in other chunks: docs/reproducibility.md), so its cost is
    # checked against its own token counts
    priced = pl.complete("priced", "Say hello.", max_tokens=16, cache=False)
    assert priced.input_tokens == c.input_tokens and not priced.cache_hit
    assert priced.cost_usd == pytest.approx((c.input_tokens * 1.0 + (priced.output_tokens or 0) * 2.0) / 1e6)


def test_one_model_name_at_two_endpoints_never_shares_a_cache_key(server: LlamaServer, tmp_path: Path) -> None:
    """The same server spelt 'localhost' is another endpoint to promptlab: its own cache key and identity;
    the api_base's path is not part of the identity."""
    pl.register_model("here", model=f"openai/{SERVED}", api_base=server.url)
    pl.register_model("there", model=f"openai/{SERVED}", api_base=f"http://localhost:{server.port}/v1")
    cache = tmp_path / "cache"
    a = pl.complete("here", "Say hi.", max_tokens=8, cache=cache)
    b = pl.complete("there", "Say hi.", max_tokens=8, cache=cache)
    assert a.key != b.key and not b.cache_hit and a.input_tokens == b.input_tokens  # a fresh request: same prompt
    assert b.endpoint == f"litellm:openai@localhost:{server.port}"
    pl.register_model("here-too", model=f"openai/{SERVED}", api_base=f"http://127.0.0.1:{server.port}/v1/")
    assert pl.complete("here-too", "Say hi.", max_tokens=8, cache=cache).cache_hit


# a sweep whose experiment file defines the alias ------------------------------------------------------------
def test_a_sweep_cell_against_the_server(server: LlamaServer, tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    experiment = {
        "name": "llama-server",
        "loops": ["creator_critic"],
        "tasks": str(repo / "data" / "demo_tasks.jsonl"),
        "limit": 1,
        "models": {"smol": {"model": f"openai/{SERVED}", "api_base": server.url, "max_concurrency": 2}},
        "config": {"model": "smol", "max_tokens": 120},
        "grid": {"max_iterations": [1]},
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(experiment), encoding="utf-8")
    from promptlab.sweeps.run import sweep

    result = sweep(path, tmp_path / "results", executor="inline", progress=False, cache=tmp_path / "cache")
    assert [c.status for c in result.cells] == ["ok"], [c.error for c in result.cells]
    res = pl.load(tmp_path / "results")
    runs = res.runs
    assert len(runs) == 1 and runs["generator_model"].tolist() == ["smol"] and runs["critic_model"].tolist() == ["smol"]
    assert int(runs["calls"].iloc[0]) >= 2 and int(runs["failed_calls"].iloc[0]) == 0
    assert int(runs["input_tokens"].iloc[0]) > 0 and runs["cost_usd"].isna().all()  # no price: unknown, not 0
    scores = res.trajectories["score"]
    assert len(scores) >= 1
    assert scores.notna().all() and ((scores >= 1) & (scores <= 10)).all()  # the critic's JSON, grammar-bound
