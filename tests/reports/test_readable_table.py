"""The summary table as notebooks 02 and 03 show it: rounded to 3 significant digits, only the columns a reader
compares by, the parameters every row shares in the caption, headers and long text free to wrap."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from promptlab.reports import readable_table
from promptlab.reports.readable import round_sig

ROOT = Path(__file__).resolve().parents[2]


def summary() -> pd.DataFrame:
    """Two configurations as `summary_table` gives them (one parameter varies, two are shared)."""
    return pd.DataFrame(
        {
            "loop": ["creator_critic", "creator_critic"],
            "generator_model": ["local/smollm2", "local/smollm2"],
            "finish_threshold": [7.0, 8.5],
            "runs": pd.array([3, 3], dtype="Int64"),
            "test_accuracy_mean": pd.array([0.15079365, 0.0], dtype="Float64"),
            "gain_mean": pd.array([-0.126984, pd.NA], dtype="Float64"),
            "final_score_n": pd.array([3, 3], dtype="Int64"),
            "final_score_mean": pd.array([1.5575683775676699, 2.3612], dtype="Float64"),
            "final_score_sd": pd.array([0.1, 0.2], dtype="Float64"),
            "best_score_mean": pd.array([2.0, 2.5], dtype="Float64"),
            "iterations_mean": pd.array([3.0, 2.6666667], dtype="Float64"),
            "stop_reasons": ["max_iterations: 2, threshold: 1", "max_iterations: 3"],
            "tokens_mean": pd.array([36172.52381, 412.0], dtype="Float64"),
            "tokens_total": pd.array([108517, 1236], dtype="Int64"),
            "cost_usd_total": pd.array([pd.NA, pd.NA], dtype="Float64"),
            "n_errors": pd.array([2, 0], dtype="Int64"),
            "runs_with_errors": pd.array([1, 0], dtype="Int64"),
        }
    )


def test_round_sig_keeps_three_significant_digits_and_every_whole_digit() -> None:
    assert round_sig(36172.52381) == 36173.0
    assert round_sig(-0.126984) == -0.127
    assert round_sig(1.5575683775676699) == 1.56
    assert round_sig(0.0) == 0.0 and round_sig(3) == 3 and round_sig("x") == "x"


def test_the_readable_table_is_rounded_and_keeps_only_the_columns_to_compare_by() -> None:
    styled = readable_table(summary())
    html = styled.to_html()
    assert "36,173" in html and "-0.127" in html and "1.56" in html and "0.151" in html and "2.67" in html
    assert "36172.5" not in html and "0.126984" not in html and "1.55756" not in html
    headers = list(styled.columns)
    assert headers == [
        "finish threshold",
        "runs",
        "test accuracy mean",
        "gain mean",
        "final score mean",
        "iterations mean",
        "stop reasons",
        "tokens mean",
        "n errors",
    ]  # shared parameters, spreads, totals and an all-unknown cost are left to summary.csv
    assert "All rows: loop = creator_critic; generator_model = local/smollm2" in html
    assert "white-space: normal" in html and "max-width: 12em" in html


def test_notebooks_02_and_03_show_the_readable_table() -> None:
    for name in ("02_sweep", "03_compare"):
        nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
        code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
        assert "display(readable_table(summary_table(results)))" in code.replace("reports.", "")


def test_the_reports_markdown_numbers_are_rounded_without_exponents() -> None:
    """summary.md's per-configuration table prints its numbers with `number_text`, as the notebooks do."""
    from promptlab.reports.readable import number_text

    assert [number_text(v) for v in (36172.52381, -0.126984, 0.0, 3, float("nan"), None)] == [
        "36,173",
        "-0.127",
        "0",
        "3",
        "–",
        "–",
    ]
    counts = [1234567, np.int64(1916), 1.5e-05, 2.5e-12, 639.0]  # counts keep every digit; no exponent anywhere
    assert [number_text(v) for v in counts] == ["1,234,567", "1,916", "0.000015", "0.0000000000025", "639"]


def test_any_result_frame_is_shown_rounded_with_its_text_as_it_is() -> None:
    from promptlab.reports import rounded

    frame = pd.DataFrame(
        {
            "config": ["loop=resample - loop=protegi", "loop=ape"],
            "estimate": pd.array([-0.126984, pd.NA], dtype="Float64"),
            "p_holm": [0.000123456, 1.0],
            "n": [12, 3],
            "significant": [True, False],
        }
    )
    html = rounded(frame).to_html()
    assert "-0.127" in html and "0.000123" in html and "loop=resample - loop=protegi" in html
    assert "0.126984" not in html and "0.000123456" not in html and "<NA>" not in html
    assert "True" in html and 'class="row_heading' not in html  # row numbers are hidden
    assert frame["estimate"].iloc[0] == -0.126984  # the frame itself keeps every digit


def test_every_cell_of_a_shown_frame_is_readable_and_numbers_share_one_format(tmp_path: Path) -> None:
    """03's cells table, and summary.md's table: NA as a dash, timestamps to the minute, numbers rounded, and every
    count with its thousands separated (summary.md printed "9,314" beside "37254")."""
    from factories import write_sweep

    from promptlab.reports import rounded
    from promptlab.reports.readable import DASH, cell_text
    from promptlab.reports.summary import report
    from promptlab.results import load

    assert [cell_text(v) for v in (pd.NA, None, 7.6037, 37254, np.int64(9314), "2026-11-29T06:13:03+00:00")] == [
        DASH,
        DASH,
        "7.6",
        "37,254",
        "9,314",
        "2026-11-29 06:13",
    ]
    cells = load(write_sweep(tmp_path / "r")).cells
    html = rounded(cells).to_html()
    assert "<NA>" not in html and "&lt;NA&gt;" not in html and DASH in html
    assert "T06:" not in html and "+00:00" not in html
    report(load(tmp_path / "r"))
    md = (tmp_path / "r" / "report" / "summary.md").read_text()
    table = md.split("## Per configuration", 1)[1].split("##", 1)[0]
    assert "| NA |" not in table and "nan" not in table
    numbers = [c.strip() for line in table.splitlines() if line.startswith("|") for c in line.split("|")]
    assert not [n for n in numbers if n.isdigit() and len(n) > 3], table  # 4+ digits always separated
