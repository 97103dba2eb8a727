"""A sweep under a spending cap: the cells it cuts say so, no request is made past the cap, a re-run with
the same cap spends nothing, a higher cap resumes them (earlier calls replayed), on every executor path."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest
from experiment_files import topics, write_experiment
from fault_server import FaultServer, Reply

from promptlab.cli import main
from promptlab.errors import ConfigError
from promptlab.llm.providers.litellm_lazy import litellm
from promptlab.llm.providers.resolved import resolve_model
from promptlab.llm.spending.cap import SpendingCap, price_of
from promptlab.llm.spending.ledger import LEDGER_NAME
from promptlab.results.store import cell_status, load
from promptlab.sweeps.run import sweep

EACH = 0.0021
"""What gpt-4o-mini charges for the server's reply: 10,000 input tokens (0.0015) + 1,000 output (0.0006)."""
CAP = 0.0094
"""Room for 4 requests: after 4 (0.0084 spent) the next one's max_tokens alone (2000 x 0.6 USD/M) passes it."""


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> FaultServer:
    """gpt-4o-mini on a loopback server; every reply is a valid Grade, so the writer and the judge both read it."""
    with FaultServer(
        default=Reply('{"score": 7}', prompt_tokens=10_000, completion_tokens=1_000), model="gpt-4o-mini"
    ) as s:
        monkeypatch.setenv("OPENAI_API_BASE", s.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-cap")
        yield s


def experiment(tmp_path: Path, model: str = "openai/gpt-4o-mini", **over: Any) -> Path:
    """3 cells (styles) x 2 tasks x 1 iteration, a writer and a judge call per run: 7 requests, as every reply
    is the same text and so is every judge prompt (the first cell's first judge call answers all the others)."""
    return write_experiment(
        tmp_path,
        {
            "name": "capped",
            "loops": ["toy"],
            "config": {"model": model, "max_iterations": 1, "max_tokens": 2000},
            "grid": {"style": ["a", "b", "c"]},
            **over,
        },
        topics(2),
    )


def statuses(out: Path) -> list[str]:
    frame = load(out).cells
    return sorted(frame["status"].tolist())


def test_a_cap_cuts_cells_and_a_higher_cap_resumes_them(toy_dir: Path, server: FaultServer, tmp_path: Path) -> None:
    exp, out = experiment(tmp_path), tmp_path / "out"
    first = sweep(exp, out, workers=1, cell_concurrency=1, progress=False, max_cost=CAP)
    assert server.requests == 4  # no request once the next one would pass the cap
    assert (first.done, first.cut, first.failed) == (1, 2, 0)
    assert statuses(out) == ["cut", "cut", "ok"]
    spent = SpendingCap(out / LEDGER_NAME, CAP).spent()
    assert spent == pytest.approx(4 * EACH) and spent <= CAP
    assert first.spent_usd == pytest.approx(spent)
    cut = [c for c in first.cells if c.status == "cut"]
    status = cell_status(out, cut[0].cell_id)
    assert status is not None and status["status"] == "cut" and status["error"]["kind"] == "spending_cap"
    assert "cut by max_cost=0.0094" in status["error"]["message"]
    assert "2 cell(s) cut by max_cost=0.0094" in str(first)

    again = sweep(exp, out, workers=1, cell_concurrency=1, progress=False, max_cost=CAP)
    assert server.requests == 4 and (again.skipped, again.cut) == (1, 2)  # the same cap: nothing more spent
    assert SpendingCap(out / LEDGER_NAME, CAP).spent() == pytest.approx(spent)

    more = sweep(exp, out, workers=1, cell_concurrency=1, progress=False, max_cost=1.0)
    assert (more.skipped, more.done, more.cut, more.failed) == (1, 2, 0, 0)
    assert statuses(out) == ["ok", "ok", "ok"]
    assert server.requests == 7  # the cut cell's paid call was replayed from the cache, not made again
    bodies = [json.dumps(b["messages"]) for b in server.bodies]
    assert len(set(bodies)) == len(bodies)
    assert SpendingCap(out / LEDGER_NAME, 1.0).spent() == pytest.approx(7 * EACH)
    assert len(load(out).runs) == 6


def test_cells_cut_by_the_cap_show_what_they_paid_in_the_cells_frame(
    toy_dir: Path, server: FaultServer, tmp_path: Path
) -> None:
    """#21 item 19: the spend is in the frames, not only in spending.json; a cut cell's paid requests included."""
    exp, out = experiment(tmp_path), tmp_path / "out"
    sweep(exp, out, workers=1, cell_concurrency=1, progress=False, max_cost=CAP)
    cells = load(out).cells.set_index("status", append=True)
    by_status = cells.groupby(level="status")["spent_cost_usd"].sum()
    assert by_status["cut"] > 0  # the cut cells paid for requests before the cap stopped them
    assert cells["spent_cost_usd"].sum() == pytest.approx(
        SpendingCap(out / LEDGER_NAME, CAP).spent()
    )  # = spending.json
    assert cells["spent_tokens"].sum() == 4 * 11_000 and cells["spent_cost_usd"].notna().all()
    ok = load(out)
    assert ok.cells.loc[ok.cells["status"] == "ok", "spent_cost_usd"].sum() == pytest.approx(
        ok.runs["spent_cost_usd"].sum()
    )  # an ok cell's spend is its runs'


def test_the_experiment_files_max_cost_and_the_cap_staying_out_of_the_snapshot(
    toy_dir: Path, server: FaultServer, tmp_path: Path
) -> None:
    exp, out = experiment(tmp_path, max_cost=CAP), tmp_path / "out"
    result = sweep(exp, out, workers=1, cell_concurrency=1, progress=False)
    assert (result.cut, result.max_cost) == (2, CAP) and server.requests == 4
    assert "max_cost" not in (out / "experiment.yaml").read_text()  # the experiment's hash ignores the cap


def test_an_unpriced_model_under_a_cap_is_refused_before_any_call(
    toy_dir: Path, server: FaultServer, tmp_path: Path
) -> None:
    exp = experiment(tmp_path, model="openai/test-model")
    with pytest.raises(ConfigError, match=r"'openai/test-model'.*price.*without max_cost"):
        sweep(exp, tmp_path / "out", progress=False, max_cost=1.0)
    assert server.requests == 0 and not (tmp_path / "out").exists()
    with pytest.raises(ConfigError, match="max_cost"):
        sweep(experiment(tmp_path), tmp_path / "out", progress=False, max_cost=-1)


def test_cli_max_cost_end_to_end(
    toy_dir: Path, server: FaultServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exp, out = experiment(tmp_path), tmp_path / "out"
    args = ["sweep", str(exp), "--out", str(out), "--workers", "1", "--cell-concurrency", "1", "--no-progress"]
    assert main([*args, "--max-cost", str(CAP)]) == 3
    err = capsys.readouterr().err
    assert "2 cell(s) cut by max_cost=0.0094 USD" in err and "higher --max-cost" in err
    assert server.requests == 4
    assert main([*args, "--max-cost", "1"]) == 0
    assert server.requests == 7 and statuses(out) == ["ok", "ok", "ok"]
    assert main([*args, "--max-cost", "0"]) == 2
    assert "max_cost" in capsys.readouterr().err


async def _arun_swallowing(
    task: Any, config: Any = None, *, sample: int = 0, on_event: Any = None, cache: Any = None, settings: Any = None
) -> Any:
    """A loop that records nothing of a failed call and finishes anyway (as code that scores examples and goes
    on past an error does)."""
    from toyloop import ToyConfig

    from promptlab.loops.runtime.config import as_config, as_task
    from promptlab.loops.runtime.context import RunContext

    task, config = as_task(task), as_config(ToyConfig, config)
    ctx = RunContext("cap_swallow", task, config, sample=sample, on_event=on_event, cache=cache, settings=settings)
    it = ctx.new_iteration()
    try:
        await ctx.call("writer", "generate", f"Improve: {task.prompt}", iteration=it)
    except Exception:  # noqa: BLE001 -- the point of this loop
        pass
    return ctx.finish("max_iterations", task.prompt)


def test_a_refusal_the_loop_swallows_still_cuts_the_cell(toy_dir: Path, server: FaultServer, tmp_path: Path) -> None:
    """A cap reached inside code that goes on past an error (a grounded evaluation, a judge scorer) must not
    leave an ok cell: the cell knows that a call of its was refused."""
    from toyloop import ToyConfig

    from promptlab.loops.runtime.define import LoopSpec, register_loop

    register_loop(LoopSpec("cap_swallow", ToyConfig, _arun_swallowing, "swallows every error"))
    exp, out = experiment(tmp_path, loops=["cap_swallow"]), tmp_path / "out"
    result = sweep(exp, out, workers=1, cell_concurrency=1, progress=False, max_cost=0.0001)
    assert server.requests == 0 and result.cut == 3 and statuses(out) == ["cut", "cut", "cut"]


@pytest.mark.slow
def test_papermill_kernels_run_under_the_sweeps_cap(
    toy_dir: Path, server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(toy_dir), os.environ.get("PYTHONPATH", "")]))
    import nbformat
    from nbformat import v4

    from promptlab.sweeps.notebook import run_cell_notebook

    nb = run_cell_notebook()
    nb.cells.insert(2, v4.new_code_cell("import toyloop"))
    for i, c in enumerate(nb.cells):
        c["id"] = f"c{i}"
    template = tmp_path / "template.ipynb"
    nbformat.write(nb, template)
    exp, out = experiment(tmp_path), tmp_path / "out"
    result = sweep(
        exp, out, executor="papermill", workers=1, cell_concurrency=1, progress=False, max_cost=CAP, template=template
    )
    assert server.requests == 4 and (result.done, result.cut, result.failed) == (1, 2, 0)
    assert SpendingCap(out / LEDGER_NAME, CAP).spent() == pytest.approx(server.requests * EACH)
    assert "PROMPTLAB_MAX_COST" not in os.environ  # handed to the kernels only
    more = sweep(
        exp, out, executor="papermill", workers=1, cell_concurrency=1, progress=False, max_cost=1.0, template=template
    )
    assert more.cut == 0 and more.failed == 0 and server.requests == 7


@pytest.mark.slow
def test_a_dask_task_runs_under_the_sweeps_cap(
    toy_dir: Path, server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dask executor hands the cap to each task (a worker's environment may be another machine's); a
    LocalCluster worker imports the toy loop at start (dask's worker preload)."""
    dask = pytest.importorskip("dask")
    pytest.importorskip("distributed")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(toy_dir), os.environ.get("PYTHONPATH", "")]))
    exp, out = experiment(tmp_path), tmp_path / "out"
    with dask.config.set({"distributed.worker.preload": ["toyloop"]}):
        first = sweep(exp, out, executor="dask", workers=1, cell_concurrency=1, progress=False, max_cost=CAP)
        assert server.requests == 4 and (first.done, first.cut, first.failed) == (1, 2, 0), str(first)
        more = sweep(exp, out, executor="dask", workers=1, cell_concurrency=1, progress=False, max_cost=1.0)
    assert (more.done, more.cut, more.failed) == (2, 0, 0) and server.requests == 7
    assert SpendingCap(out / LEDGER_NAME, 1.0).spent() == pytest.approx(7 * EACH)


@pytest.mark.parametrize(
    "usage",
    [{"usage": False}, {"prompt_tokens": 0, "completion_tokens": 0}, {"prompt_tokens": -1_000_000}],
    ids=["no-usage", "zero-usage", "negative-usage"],
)
def test_no_usage_the_server_reports_switches_the_cap_off(
    toy_dir: Path, server: FaultServer, tmp_path: Path, usage: dict[str, Any]
) -> None:
    """#28 item 1: what the provider is paid (the tokens it was sent and sent back, at its prices) stays within
    the cap plus the calls in flight (one here), whatever usage the server reports; a second sweep spends nothing."""
    text = '{"score": 7, "note": "' + "lorem ipsum dolor " * 600 + '"}'
    server.default = Reply(text, **usage)
    exp = experiment(tmp_path, grid={"style": [f"s{i}" for i in range(6)]})
    out, cap = tmp_path / "out", 0.004
    first = sweep(exp, out, workers=1, cell_concurrency=1, progress=False, max_cost=cap)
    price = price_of(resolve_model("openai/gpt-4o-mini"))
    assert price is not None
    lm = litellm()
    costs = [
        lm.token_counter(model="gpt-4o-mini", messages=b["messages"]) * price.input
        + lm.token_counter(model="gpt-4o-mini", text=text) * price.output
        for b in server.bodies
    ]
    assert first.cut >= 1 and sum(costs) <= cap + max(costs) * 1.05
    led = SpendingCap(out / LEDGER_NAME, cap).ledger()
    assert led.estimated_requests == led.requests == server.requests
    assert led.spent_usd == pytest.approx(sum(costs), rel=0.05)
    requests = server.requests
    again = sweep(exp, out, workers=1, cell_concurrency=1, progress=False, max_cost=cap)
    assert again.cut == first.cut and server.requests == requests


def test_a_full_disk_under_the_ledger_stops_the_sweep_named_and_loses_no_paid_reply(
    toy_dir: Path,
    server: FaultServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """#28 item 3 under a cap: the ledger write meets a full disk (with no reserve left to give room): exit 4
    naming spending.json, no cell marked failed, and the replies paid so far were kept, so a resume replays them."""
    exp, out = experiment(tmp_path), tmp_path / "out"
    args = ["sweep", str(exp), "--out", str(out), "--workers", "1", "--cell-concurrency", "1", "--no-progress"]
    real = Path.write_bytes

    def full_for_the_ledger(self: Path, data: bytes) -> int:
        if self.name.startswith(f".{LEDGER_NAME}."):  # the ledger's and its reserve's temporary files
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", full_for_the_ledger)
    assert main([*args, "--max-cost", "1"]) == 4
    err = capsys.readouterr().err.strip()
    assert str(out / LEDGER_NAME) in err and "no space left" in err and "run the same sweep again" in err, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    # one call in flight (one worker, one run at a time): its reply paid, its charge refused by the full disk
    assert server.requests == 1 and not (out / LEDGER_NAME).exists()  # the ledger as it was: never written
    written = [json.loads(p.read_text())["status"] for p in out.glob("*/status.json")]
    assert "failed" not in written, written
    monkeypatch.setattr(Path, "write_bytes", real)
    assert main([*args, "--max-cost", "1"]) == 0
    assert statuses(out) == ["ok", "ok", "ok"]
    assert server.requests == 7  # the reply paid before the stop was replayed from the cache, not paid again
    # what the stop could not count: the one reply whose charge met the full disk (the calls in flight)
    assert SpendingCap(out / LEDGER_NAME, 1.0).spent() == pytest.approx(6 * EACH)
