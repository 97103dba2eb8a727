"""The summary table as a notebook shows it: rounded and as wide as a notebook. `readable_table` keeps the columns a
reader compares configurations by (the parameters that vary, runs, accuracy and gain, the critic's final score,
iterations, stop reasons, tokens, cost, errors), rounds every number to 3 significant digits (never dropping a
whole-number digit: 36172.52381 reads 36173, -0.126984 reads -0.127), names the parameters every row shares in its
caption instead of a column each, and lets long text and headers wrap. `summary.csv` keeps the full values."""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from ..results.labels import model_names

if TYPE_CHECKING:
    import pandas as pd
    from pandas.io.formats.style import Styler

SHOWN = (
    "runs",
    "test_accuracy_mean",
    "gain_mean",
    "final_score_mean",
    "iterations_mean",
    "stop_reasons",
    "tokens_mean",
    "cost_usd_total",
    "n_errors",
)
"""The measured columns of `summary_table` a notebook shows (the others stay in summary.csv)."""

STATS = frozenset({*SHOWN, "final_score_n", "final_score_sd", "best_score_mean", "tokens_total", "runs_with_errors"})
"""Every measured column of `summary_table`; the rest are the configuration's parameters."""


def round_sig(value: Any, digits: int = 3) -> Any:
    """`value` rounded to `digits` significant digits, keeping every whole-number digit (36172.52381 -> 36173,
    -0.126984 -> -0.127, 1.5575683775676699 -> 1.56); a non-number or a missing value as it is."""
    if not isinstance(value, float) or not math.isfinite(value) or value == 0:
        return value
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return round(value, decimals) if decimals else float(round(value))


DASH = "–"
"""What a table shows for a missing value (NA, None, NaN)."""
ISO_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2})(:\d{2}(\.\d+)?)?([+-]\d{2}:?\d{2}|Z)?$")
"""A timestamp as the frames hold it (`finished_at`: ISO 8601), shown to the minute."""


def missing(value: Any) -> bool:
    """None, NA or NaN."""
    import pandas as pd

    return value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and math.isnan(value))


def number_text(value: Any) -> str:
    """A number as a table shows it: 3 significant digits, thousands separated (36172.52381 -> "36,173"); a dash
    when missing."""
    import numpy as np

    if missing(value):
        return DASH
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return str(value)
    if isinstance(value, numbers.Integral):  # a count: every digit, never an exponent (1234567 -> "1,234,567")
        return f"{int(value):,}"
    value = round_sig(float(value))
    if value.is_integer() and abs(value) >= 1000:
        return f"{value:,.0f}"
    return str(np.format_float_positional(value, trim="-"))  # 1.5e-05 -> "0.000015": no exponent


def cell_text(value: Any) -> str:
    """Any value as a table cell shows it: a number by `number_text`, a missing value as a dash, a timestamp to
    the minute ("2026-11-29 06:13", its UTC offset dropped), anything else as its text."""
    import datetime as dt

    if missing(value):
        return DASH
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return number_text(value)
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    text = str(value)
    found = ISO_TIME.match(text)
    return f"{found.group(1)} {found.group(2)}" if found else text


def readable_table(table: pd.DataFrame) -> Styler:
    """`summary_table`'s frame for a notebook: the parameters that differ between rows, then the `SHOWN` columns
    it has (cost only when some run has one), numbers at 3 significant digits, headers with spaces (so they
    wrap), long text wrapped, no index; the parameters every row shares are named in the caption."""

    params = [c for c in table.columns if c not in STATS]
    shared = [c for c in params if len(table) > 1 and table[c].nunique(dropna=False) == 1]
    if len(table) == 1:
        shared = list(params)
    varying = [c for c in params if c not in shared]
    shown = [c for c in SHOWN if c in table.columns]
    if "cost_usd_total" in shown and not (table["cost_usd_total"].fillna(0) > 0).any():
        shown.remove("cost_usd_total")
    view = table[varying + shown].rename(columns=lambda c: str(c).replace("_", " "))
    caption = "; ".join(f"{c} = {table[c].iloc[0]}" for c in shared) if len(table) else "no runs"
    numeric: list[Hashable] = [str(c).replace("_", " ") for c in shown if c != "stop_reasons"]
    text: list[Hashable] = [c for c in view.columns if c not in numeric]
    styled = (
        view.style.format(number_text, subset=numeric)
        .format(cell_text, subset=text)
        .hide(axis="index")
        .set_table_styles(
            [
                {"selector": "th, td", "props": "white-space: normal; max-width: 12em; overflow-wrap: anywhere;"},
                {"selector": "caption", "props": "caption-side: top; text-align: left;"},
            ]
        )
    )
    return styled.set_caption(f"All rows: {caption}") if shared else styled


def critics_named(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with its `critic_model` column as labels name critics (`results.labels.model_names`: `noisy sd 2`
    for `sim/noisy?sd=2&seed=0`, as 03's and 04's legends), headed `critic`; a frame without one as it is."""
    if "critic_model" not in frame.columns:
        return frame
    names = model_names(frame["critic_model"])
    shown = frame["critic_model"].map(lambda v: names.get(str(v), v) if not missing(v) else v)
    return frame.assign(critic_model=shown).rename(columns={"critic_model": "critic"})


def rounded(frame: pd.DataFrame) -> Styler:
    """Any frame a notebook shows (03's cells, 04's deltas and calibration, 06's budget table, 07's bias tables,
    ...): every cell by `cell_text` (numbers at 3 significant digits in one format, missing values as a dash,
    timestamps to the minute), headers and long text free to wrap, and the index hidden when it is only row
    numbers. The frame itself is unchanged."""
    import pandas as pd

    data = frame if frame.index.is_unique and frame.columns.is_unique else frame.reset_index(drop=True)
    styled = data.style.format(cell_text)
    if isinstance(data.index, pd.RangeIndex):
        styled = styled.hide(axis="index")
    return styled.set_table_styles(
        [{"selector": "th, td", "props": "white-space: normal; max-width: 14em; overflow-wrap: anywhere;"}]
    )


__all__ = [
    "DASH",
    "SHOWN",
    "cell_text",
    "critics_named",
    "missing",
    "number_text",
    "readable_table",
    "round_sig",
    "rounded",
]
