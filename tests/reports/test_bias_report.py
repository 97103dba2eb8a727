"""The critic-bias section of the report: a table per critic in summary.md under "Can the critic be trusted?",
biases.png, and a second report that makes no model call."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # this process only

import pandas as pd
from biased import PLANTED, write_biased_sweep
from matplotlib.figure import Figure

from promptlab.analysis.bias import bias_table
from promptlab.analysis.bias_asks import probe_frames
from promptlab.reports.bias_charts import plot_inflation, plot_length_bias
from promptlab.reports.summary import report
from promptlab.results.store import load

PNG = b"\x89PNG\r\n\x1a\n"


def test_report_has_a_bias_table_per_critic_and_a_second_report_is_free(tmp_path: Path) -> None:
    results_dir, model_critic = write_biased_sweep(tmp_path / "results", samples=2)
    logged = len(model_critic.requests)
    out = report(results_dir, bias_budget=10)
    assert len(model_critic.requests) - logged == 10  # the budget, spent once
    text = out["summary.md"].read_text()
    section = text.split("### 3. Can the critic be trusted?", 1)[1].split("###", 1)[0]
    for critic in ("fake/bias-critic", PLANTED, "sim/oracle"):
        table = section.split(f"**{critic}**", 1)[1].split("\n\n", 2)[1]
        assert [line.split(" | ")[0] for line in table.splitlines()[2:]] == [
            "| anchoring",
            "| inflation",
            "| length",
            "| order",
            "| padding",
        ]
    oracle = section.split("**sim/oracle**", 1)[1]
    assert oracle.count("Not enough data") == 5  # a critic without noise: intervals of width zero, no verdict
    assert "No evidence of bias" not in oracle
    # a simulated critic's table shows the size it was built with, and whether the CI covers it
    head = "| n | unit | detectable (80% power) | scores at 1 / 10 | finding |"
    assert f"| probe | estimate [99.4% CI] | from | planted (in the CI?) {head}" in oracle
    # where each interval came from, beside it
    assert "| length | +0.000 | logs | +0 (yes) |" not in oracle and "| length | +0.000 | logs | +0 |" in oracle
    assert "| padding | +0.000 | re-asks (simulated, averaged draws) | +0 |" in oracle

    biased = section.split(f"**{PLANTED}**", 1)[1].split("**", 1)[0]
    assert "| +0.6 (" in biased and "| +0.5 (" in biased  # order (first=0.6), anchoring (anchor=0.5)
    model = section.split("**fake/bias-critic**", 1)[1].split("**", 1)[0]
    assert f"| probe | estimate [99.4% CI] | from {head}" in model and "planted" not in model
    # the scripted judge always names the first shown: +1 with the score interval's width, from 2 pairs
    assert "| order | +1.000 [" in model and "| re-asks | 2 |" in model
    assert out["biases.png"].read_bytes().startswith(PNG)
    # the report returns the frames it wrote: summary.csv's table and the bias tables of summary.md
    assert out.table is not None and out.biases is not None and out.findings is not None
    assert len(out.table) == len(pd.read_csv(out["summary.csv"])) > 0
    assert set(out.biases["critic_model"]) == {"fake/bias-critic", PLANTED, "sim/oracle"}
    assert out.biases is out.findings.biases
    report(results_dir, bias_budget=10)
    assert len(model_critic.requests) - logged == 10  # every re-ask of the second report was a cache hit


def test_bias_charts_draw_the_probes_estimates(tmp_path: Path) -> None:
    results_dir, _ = write_biased_sweep(tmp_path / "results", samples=2)
    frames = probe_frames(load(results_dir), budget=0)
    table = bias_table(frames).set_index(["critic_model", "probe"])
    mine = frames["length"][frames["length"]["critic_model"] == PLANTED]
    ax = plot_inflation(mine, table.loc[(PLANTED, "inflation")].to_dict(), ax=Figure().add_subplot())
    est = table.loc[(PLANTED, "inflation")]
    assert ax.get_legend().get_texts()[0].get_text() == (
        f"inflation per step {est['estimate']:+.2f} [{est['ci_low']:+.2f}, {est['ci_high']:+.2f}]"
    )
    steps = mine.sort_values(["run_id", "iteration"]).groupby("run_id")["score"].diff().dropna()
    assert len(ax.collections[0].get_offsets()) == len(steps)
    empty = plot_length_bias(mine.assign(accuracy=range(len(mine))), ax=Figure().add_subplot())
    assert "no two candidates share a dev accuracy" in empty.texts[0].get_text()


def test_a_multi_line_error_stays_in_its_table_cell() -> None:
    from promptlab.reports.findings import bias_markdown
    from promptlab.reports.markdown import table_lines

    why = "the re-asks failed: ValidationError: 1 validation error for CreatorCriticConfig\nmodel\n  Unknown | model"
    skipped = pd.DataFrame({"critic_model": ["fake/gone"], "why": [why]})
    lines = bias_markdown(bias_table({"skipped": skipped}))
    rows = [line for line in lines if line.startswith("| ")][1:]  # the header's cells hold no pipe
    assert len(rows) == 3 and all(line.count(" | ") == 7 for line in rows), rows
    assert all("| NA | none: the re-asks failed | 0 |" in line for line in rows)
    assert "CreatorCriticConfig model Unknown \\| model |" in rows[0]
    assert table_lines(["a", "b"], [["x\r\ny", "p|q"]]) == ["| a | b |", "|---|---|", "| x y | p\\|q |"]


def test_the_ci_level_is_printed_as_it_is() -> None:
    from promptlab.reports.findings import bias_markdown
    from promptlab.reports.markdown import percent

    pairs = pd.DataFrame(
        {"pair": [0, 0, 1, 1, 2, 2], "swapped": [0, 1] * 3, "first_won": [True, False, True, True, False, True]}
    )
    padded = pd.DataFrame({"plain": [5.0, 6.0, 4.0], "padded": [6.5, 7.0, 5.0], "added_chars": [300, 300, 300]})
    table = bias_table({"order": pairs.assign(critic_model="m"), "padding": padded.assign(critic_model="m")})
    assert table["ci_level"].astype(float).tolist() == [0.985, 0.985]  # two probes: 1 - 0.03 / 2
    assert "| probe | estimate [98.5% CI] | from | n | unit | detectable" in "\n".join(bias_markdown(table))
    assert (percent(0.99), percent(1 - 0.05 / 3), percent(0.95)) == ("99%", "98.3333%", "95%")
