"""Model aliases against loopback OpenAI-compatible servers: resolution, keys, cache keys, limits (concurrency
per endpoint, rpm, tpm, shared across kernels), user prices and native structured output with detection."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fault_server import FaultServer, Gather, Reply, Status
from pydantic import BaseModel

import promptlab as pl
from promptlab.errors import ConfigError, MissingKeyError, UnknownModelError
from promptlab.llm.cache.keys import cache_key
from promptlab.llm.call.preflight import preflight, validate_model_name
from promptlab.llm.call.settings import Settings
from promptlab.llm.concurrency import limits
from promptlab.llm.providers import aliases as models

KEY = "sk-alias-secret-7731"


class Verdict(BaseModel):
    score: int


REFUSAL = "response_format json_schema is not supported"
VALIDATION_500 = (
    "1 validation error: {'loc': ('body', 'response_format', 'type'), "
    "'msg': \"Input should be 'text' or 'json_object'\"}"
)


def served(
    text: str = "ok",
    *,
    delay_s: float = 0.0,
    refuse_schema: bool = False,
    takes: tuple[str, ...] = (),
    refuse_status: int = 400,
) -> FaultServer:
    """A started loopback server for `openai/served-model` that answers `text` (1000 + 200 tokens) after
    `delay_s`; with `refuse_schema`, a request whose `response_format` type is not in `takes` gets
    `refuse_status` (a 500 reads as llama-cpp-python's validation error)."""
    reply = Reply(text, 1000, 200, delay_s=delay_s)

    def respond(body: dict[str, Any]) -> Reply | Status:
        kind = (body.get("response_format") or {}).get("type")
        if refuse_schema and kind is not None and kind not in takes:
            return Status(refuse_status, REFUSAL if refuse_status != 500 else VALIDATION_500)
        return reply

    return FaultServer(model="served-model", responder=respond).start()


@pytest.fixture
def server() -> Iterator[FaultServer]:
    s = served()
    yield s
    s.close()


# registry ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "non-empty"),
        ("openai/qwen", "provider prefix"),
        ("openai", "provider prefix"),
        ("fake", "provider prefix"),
        ("has space", "letters, digits"),
    ],
)
def test_bad_alias_names_are_refused(name: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        pl.register_model(name, model="openai/x", api_base="http://h/v1")


def test_bad_fields_name_the_alias_and_the_field() -> None:
    with pytest.raises(ConfigError, match=r"model alias 'judge': rpm: -5"):
        pl.register_model("judge", model="openai/x", rpm=-5)
    with pytest.raises(
        ConfigError,
        match=r"'judge': temperature: not a field of a model alias \(generation parameters go under `params`\)",
    ):
        pl.register_model("judge", model="openai/x", temperature=0.5)
    with pytest.raises(ConfigError, match=r"'judge': price.output_per_million"):
        pl.register_model("judge", model="openai/x", price={"input_per_million": 1})
    with pytest.raises(ConfigError, match=r"'judge': fields: Value error, an alias never holds an API key") as info:
        pl.register_model("judge", model="openai/x", params={"api_key": "sk-x"})
    assert "sk-x" not in str(info.value)
    assert models.get_alias("judge") is None


def test_register_get_and_unregister() -> None:
    alias = pl.register_model("judge", model="openai/qwen", api_base="http://gpu:8000/v1", rpm=60)
    assert models.get_alias("judge") is alias and "judge" in pl.registered_models()
    assert alias.spec() == {"model": "openai/qwen", "api_base": "http://gpu:8000/v1", "rpm": 60.0}
    pl.unregister_model("judge")
    assert models.get_alias("judge") is None


def test_unknown_names_list_the_aliases() -> None:
    pl.register_model("judge", model="openai/qwen", api_base="http://gpu:8000/v1")
    with pytest.raises(UnknownModelError, match=r"not a registered model alias \(judge\)"):
        validate_model_name("judgee")
    pl.register_model("broken", model="nosuchprovider/zzz")
    with pytest.raises(UnknownModelError, match="'broken'.*alias of 'nosuchprovider/zzz'"):
        validate_model_name("broken")


# the call path -----------------------------------------------------------------------------------------
def test_an_alias_call_goes_to_its_server_with_its_key(
    server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALIAS_TEST_KEY", KEY)
    pl.register_model(
        "judge", model="openai/served-model", api_base=server.url, api_key_env="ALIAS_TEST_KEY", params={"top_p": 0.5}
    )
    c = pl.complete("judge", "hello", cache=tmp_path)
    assert c.text == "ok" and c.model == "judge" and not c.cache_hit
    assert c.endpoint == f"litellm:openai@{server.url.split('/')[2]}"
    assert server.bodies[0]["model"] == "served-model" and server.bodies[0]["top_p"] == 0.5
    assert server.auth == [KEY]
    hit = pl.complete("judge", "hello", cache=tmp_path)
    assert hit.cache_hit and hit.model == "judge" and len(server.bodies) == 1
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes()


def test_a_missing_key_variable_is_named(server: FaultServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ALIAS_UNSET_KEY", raising=False)
    pl.register_model("judge", model="openai/served-model", api_base=server.url, api_key_env="ALIAS_UNSET_KEY")
    with pytest.raises(MissingKeyError, match="ALIAS_UNSET_KEY"):
        pl.complete("judge", "hello", cache=False)
    with pytest.raises(ConfigError, match="'judge': needs an API key: set ALIAS_UNSET_KEY"):
        preflight(["judge"])
    assert server.bodies == []


def test_without_a_key_variable_a_placeholder_goes_never_the_openai_key(
    server: FaultServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-openai-key")
    pl.register_model("box", model="openai/served-model", api_base=server.url)
    pl.complete("box", "hello", cache=False)
    assert server.auth == [models.PLACEHOLDER_KEY]


def test_cache_keys_follow_the_endpoint_not_the_key_or_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = served("from one"), served("from two")
    try:
        a = pl.complete("openai/served-model", "hi", api_base=one.url, api_key=KEY, cache=tmp_path)
        b = pl.complete("openai/served-model", "hi", api_base=two.url, api_key=KEY, cache=tmp_path)
        assert (a.text, b.text) == ("from one", "from two") and a.key != b.key and not b.cache_hit
        # another key and another path on the same host: the same endpoint, a hit
        again = pl.complete("openai/served-model", "hi", api_base=one.url + "/", api_key="sk-other", cache=tmp_path)
        assert again.cache_hit and again.text == "from one"
        # an alias of the same endpoint and model shares the record, under its own name
        pl.register_model("judge", model="openai/served-model", api_base=one.url)
        via = pl.complete("judge", "hi", cache=tmp_path)
        assert via.cache_hit and via.model == "judge" and via.key == a.key
    finally:
        one.close()
        two.close()


def test_calls_without_an_api_base_keep_their_keys(tmp_path: Path) -> None:
    m = pl.scripted("keys-stay", ["x"])
    c = pl.complete(m.name, "p", cache=tmp_path, max_tokens=7)
    old = cache_key(
        {
            "model": m.name,
            "messages": [{"role": "user", "content": "p"}],
            "params": {"temperature": 0.0, "max_tokens": 7},
            "schema": None,
            "sample": 0,
        }
    )
    assert c.key == old


def test_a_user_price_prices_a_served_model(server: FaultServer) -> None:
    plain = pl.complete("openai/served-model", "hi", api_base=server.url, api_key=KEY, cache=False)
    assert plain.cost_usd is None  # litellm does not know this model's price
    pl.register_model(
        "priced",
        model="openai/served-model",
        api_base=server.url,
        price={"input_per_million": 0.5, "output_per_million": 2.0},
    )
    c = pl.complete("priced", "hi", cache=False)
    assert c.cost_usd == pytest.approx((1000 * 0.5 + 200 * 2.0) / 1e6)


# limits ------------------------------------------------------------------------------------------------
async def _many(model: str, n: int, settings: Settings | None = None, **kw: Any) -> list[pl.Completion]:
    return list(
        await asyncio.gather(*(pl.acomplete(model, f"q{i}", cache=False, settings=settings, **kw) for i in range(n)))
    )


def test_limits_follow_each_calls_settings_not_the_first_call() -> None:
    server = served(delay_s=0.3)
    try:

        async def scenario() -> None:
            await pl.acomplete("openai/served-model", "first", api_base=server.url, api_key=KEY, cache=False)
            server.on_request = Gather(server, 64)  # the peak the limit allows, however busy the machine
            await _many("openai/served-model", 128, Settings(max_concurrency=64), api_base=server.url, api_key=KEY)

        asyncio.run(scenario())
        assert server.peak[""] == 64
    finally:
        server.close()


def test_an_aliases_limit_of_8_is_never_exceeded() -> None:
    server = served(delay_s=0.05)
    try:
        pl.register_model("narrow", model="openai/served-model", api_base=server.url, max_concurrency=8)
        server.on_request = Gather(server, 8)
        asyncio.run(_many("narrow", 48, Settings(max_concurrency=64)))
        assert server.peak[""] == 8
        server.peak.clear()  # the settings' override for the alias's name wins over its max_concurrency
        server.on_request = Gather(server, 3)
        asyncio.run(_many("narrow", 24, Settings(per_model_concurrency={"narrow": 3})))
        assert server.peak[""] == 3
    finally:
        server.close()


def test_the_limit_share_divides_concurrency_and_rates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(limits.SHARE_ENV, "4")
    assert (limits.shared_concurrency(16), limits.shared_concurrency(2), limits.shared_rate(600)) == (4, 1, 150.0)
    server = served(delay_s=0.05)
    try:
        pl.register_model("shared", model="openai/served-model", api_base=server.url, max_concurrency=16)
        server.on_request = Gather(server, 4)
        asyncio.run(_many("shared", 24))
        assert server.peak[""] == 4
    finally:
        server.close()
    monkeypatch.setenv(limits.SHARE_ENV, "two")
    with pytest.raises(ConfigError, match=limits.SHARE_ENV):
        limits.share()


def test_rpm_is_enforced_async_and_sync(server: FaultServer) -> None:
    pl.register_model("paced", model="openai/served-model", api_base=server.url, rpm=120)
    t0 = time.monotonic()
    asyncio.run(_many("paced", 6))
    took = time.monotonic() - t0
    # a bucket holds one second's worth (2 requests); the 4 others come 0.5 s apart: request k arrives no
    # sooner than 0.5 * (k - 1) s after the start (a busy machine only delays it; a gap between two delayed ones
    # may be shorter, so gaps are not what is checked)
    assert took >= 1.9, took
    after = [round(t - t0, 3) for t in server.times]
    assert all(after[k] >= 0.5 * (k - 1) - 0.05 for k in range(2, 6)), after
    pl.register_model("paced-sync", model="openai/served-model", api_base=server.url + "/", rpm=240)
    t0 = time.monotonic()
    for i in range(6):  # another rate on the same endpoint: its own bucket, 4 at once then 0.25 s apart
        pl.complete("paced-sync", f"s{i}", cache=False)
    assert time.monotonic() - t0 >= 0.45


def test_tpm_is_enforced_on_estimated_tokens(server: FaultServer) -> None:
    pl.register_model("tokens", model="openai/served-model", api_base=server.url, tpm=12_000)  # 200 tokens/s
    prompt = "x" * 40  # 10 tokens by chars/4, + max_tokens 90: 100 per request
    assert limits.estimate_tokens({"messages": [{"role": "user", "content": prompt}], "max_tokens": 90}) == 100

    async def scenario() -> None:
        await asyncio.gather(*(pl.acomplete("tokens", prompt, sample=i, max_tokens=90, cache=False) for i in range(6)))

    t0 = time.monotonic()
    asyncio.run(scenario())
    assert time.monotonic() - t0 >= 1.9


# structured output ------------------------------------------------------------------------------------
def test_native_schema_is_sent_to_a_server_that_takes_it() -> None:
    server = served('{"score": 7}')
    try:
        pl.register_model("takes", model="openai/served-model", api_base=server.url)  # detect
        c = pl.complete("takes", "rate", schema=Verdict, cache=False)
        assert c.parsed == Verdict(score=7) and c.attempts == 1
        assert server.bodies[0]["response_format"]["type"] == "json_schema"
        assert "JSON schema" not in json.dumps(server.bodies[0]["messages"])
        pl.register_model("told", model="openai/served-model", api_base=server.url, native_schema=False)
        pl.complete("told", "rate", schema=Verdict, cache=False)
        assert (
            "response_format" not in server.bodies[1] and "JSON schema" in server.bodies[1]["messages"][-1]["content"]
        )
    finally:
        server.close()


@pytest.mark.parametrize("use_async", [False, True])
def test_a_refused_schema_falls_back_to_the_prompt_once_per_endpoint(use_async: bool) -> None:
    server = served('{"score": 4}', refuse_schema=True)
    try:
        pl.register_model("refuses", model="openai/served-model", api_base=server.url)

        def call(prompt: str) -> pl.Completion:
            if use_async:
                return asyncio.run(pl.acomplete("refuses", prompt, schema=Verdict, cache=False))
            return pl.complete("refuses", prompt, schema=Verdict, cache=False)

        first = call("rate one")  # json_schema refused, then json_object refused, then the prompt
        assert first.parsed == Verdict(score=4) and first.attempts == 3
        assert [b.get("response_format", {}).get("type") for b in server.bodies] == ["json_schema", "json_object", None]
        assert models.schema_support(f"openai/served-model@openai@{server.url.split('/')[2]}") is False
        second = call("rate two")  # remembered for this endpoint: straight to the prompt
        assert second.parsed == Verdict(score=4) and second.attempts == 1 and len(server.bodies) == 4
        assert "JSON schema" in server.bodies[3]["messages"][-1]["content"]
        pl.register_model("insists", model="openai/served-model", api_base=server.url, native_schema=True)
        with pytest.raises(pl.ProviderError, match="response_format"):  # told native: no fallback
            pl.complete("insists", "rate", schema=Verdict, cache=False)
    finally:
        server.close()
        models.remember_schema_support(f"openai/served-model@openai@{server.url.split('/')[2]}", True)


def test_a_server_that_takes_only_json_object_gets_that_form() -> None:
    """llama-cpp-python's server answers a json_schema response_format with HTTP 500 (a validation error) and
    takes {type: json_object, schema}: detection finds that form, remembers it, and is never retried as a 5xx."""
    server = served('{"score": 6}', refuse_schema=True, takes=("json_object",), refuse_status=500)
    endpoint = f"openai/served-model@openai@{server.url.split('/')[2]}"
    try:
        pl.register_model("llamacpp", model="openai/served-model", api_base=server.url)
        first = pl.complete("llamacpp", "rate one", schema=Verdict, cache=False)
        assert first.parsed == Verdict(score=6) and first.attempts == 2
        assert [b["response_format"]["type"] for b in server.bodies] == ["json_schema", "json_object"]
        assert server.bodies[1]["response_format"]["schema"] == Verdict.model_json_schema()
        assert models.schema_support(endpoint) is True and models.schema_form(endpoint) == "json_object"
        second = pl.complete("llamacpp", "rate two", schema=Verdict, cache=False)  # straight to json_object
        assert second.attempts == 1 and server.bodies[2]["response_format"]["type"] == "json_object"
        assert "JSON schema" not in json.dumps(server.bodies[2]["messages"])

        class Failed(Exception):
            status_code = 500

        assert not models.refuses_schema(Failed("internal error"))  # a plain 5xx is retried, not a refusal
        assert not models.refuses_schema(Failed("response_format: model crashed"))
    finally:
        server.close()
        models.remember_schema_support(endpoint, True)


# experiment files and the command line -----------------------------------------------------------------
def _experiment(tmp_path: Path, models_section: dict[str, Any], **config: Any) -> dict[str, Any]:
    (tmp_path / "tasks.jsonl").write_text(
        json.dumps({"id": "a", "prompt": "Write a poem.", "goal": "A haiku."}) + "\n", encoding="utf-8"
    )
    return {
        "name": "aliases",
        "loops": ["p3ro"],
        "tasks": "tasks.jsonl",
        "models": models_section,
        "config": {"model": "writer", "max_tokens": 64, **config},
        "grid": {"max_iterations": [1, 2]},
    }


def test_an_experiments_models_are_registered_and_usable(tmp_path: Path) -> None:
    from promptlab.sweeps.experiment import Experiment, load_experiment

    data = _experiment(
        tmp_path,
        {"writer": {"model": "fake/auto", "max_concurrency": 2}, "critic": {"model": "fake/auto", "rpm": 600}},
        critic_model="critic",
    )
    path = tmp_path / "exp.yaml"
    import yaml

    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    exp = load_experiment(path)  # registers the aliases before the configs (which name them) are checked
    assert models.get_alias("writer") is not None and models.get_alias("critic").rpm == 600  # type: ignore[union-attr]
    assert "writer:" in exp.to_yaml() and "max_concurrency: 2" in exp.to_yaml()
    ids = [c.cell_id for c in exp.cells()]
    # limits and prices do not change cell ids; what an alias stands for does
    data["models"]["critic"]["rpm"] = 60
    assert [c.cell_id for c in Experiment.from_dict(data, tmp_path).cells()] == ids
    data["models"]["critic"]["model"] = "fake/other"
    pl.scripted("other", ["x"])
    assert [c.cell_id for c in Experiment.from_dict(data, tmp_path).cells()] != ids
    models.unregister_model("writer")  # a re-load (a papermill kernel) registers it again
    load_experiment(path)
    assert models.get_alias("writer") is not None


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"writer": {"model": "fake/auto", "rpm": 0}}, "models.writer.rpm: 0: Input should be greater than 0"),
        (
            {"writer": {"model": "fake/auto", "api_key": "sk-x"}},
            "models.writer: Value error, an alias never holds an API key",
        ),
        ({"openai/x": {"model": "fake/auto"}}, "models.openai/x: model alias 'openai/x': an alias name has no '/'"),
        ({"writer": {"model": "fake/auto", "api_key_env": "not a name"}}, "models.writer.api_key_env"),
        ({"writr": {"model": "fake/auto"}}, "not a registered model alias"),
    ],
)
def test_bad_models_sections_name_the_alias_and_field(tmp_path: Path, section: dict[str, Any], message: str) -> None:
    from promptlab.sweeps.experiment import Experiment

    with pytest.raises(ConfigError) as info:
        Experiment.from_dict(_experiment(tmp_path, section), tmp_path)
    assert message in str(info.value) and "sk-x" not in str(info.value)


def test_the_preflight_names_an_aliases_unset_key_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import yaml

    from promptlab.sweeps.experiment import load_experiment

    monkeypatch.delenv("NO_SUCH_SERVER_KEY", raising=False)
    data = _experiment(
        tmp_path,
        {"writer": {"model": "openai/qwen", "api_base": "http://127.0.0.1:9/v1", "api_key_env": "NO_SUCH_SERVER_KEY"}},
    )
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(ConfigError, match="'writer': needs an API key: set NO_SUCH_SERVER_KEY"):
        load_experiment(tmp_path / "exp.yaml")


def test_cli_max_concurrency(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    from promptlab.cli import main

    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(_experiment(tmp_path, {"writer": {"model": "fake/auto"}})), encoding="utf-8")
    for bad in ("writer", "writer=0", "=3", "writer=many"):
        assert main(["sweep", str(path), "--max-concurrency", bad, "--no-progress"]) == 2
        assert f"--max-concurrency {bad!r}: expected MODEL=N" in capsys.readouterr().err
    out = tmp_path / "results"
    assert (
        main(
            [
                "sweep",
                str(path),
                "--out",
                str(out),
                "--no-progress",
                "--max-concurrency",
                "writer=2",
                "--max-concurrency",
                "fake/auto=3",
            ]
        )
        == 0
    )
    assert "2 cells: 2 done, 0 failed" in capsys.readouterr().out
    assert (
        main(
            [
                "run",
                "p3ro",
                "--prompt",
                "hi",
                "--model",
                "fake/auto",
                "--quiet",
                "--max-concurrency",
                "fake/auto=1",
                "--set",
                "max_iterations=1",
            ]
        )
        == 0
    )
    assert main(["run", "p3ro", "--prompt", "hi", "--model", "fake/auto", "--max-concurrency", "x"]) == 2


def test_settings_reach_the_call_from_the_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    from promptlab import cli

    settings = cli._settings(["judge=32", "openai/gpt-4o-mini=8"])
    assert settings.per_model_concurrency == {"judge": 32, "openai/gpt-4o-mini": 8}
    assert cli._settings([]) is None


def test_the_servers_example_lists_its_cells_without_servers() -> None:
    from promptlab.sweeps.experiment import load_experiment

    root = Path(__file__).resolve().parents[2]
    exp = load_experiment(root / "experiments" / "servers-example.yaml", check_models=False)
    cells = exp.cells()
    assert [(c.params["generator_model"], c.params["critic_model"]) for c in cells] == [
        ("qwen", "llama"),
        ("llama", "qwen"),
    ]
    assert models.get_alias("qwen").api_key_env == "VLLM_KEY"  # type: ignore[union-attr]


def _wait_once() -> None:
    limits.rate_wait("forked-endpoint", 60, 6000, {"messages": [{"role": "user", "content": "hi"}]})


def test_a_forked_child_gets_its_own_rate_loop() -> None:
    import multiprocessing

    _wait_once()  # the parent's loop thread is running; a forked child has none
    child = multiprocessing.get_context("fork").Process(target=_wait_once)
    child.start()
    child.join(20)
    if child.is_alive():
        child.kill()
    assert child.exitcode == 0
