"""The report on the command line: `promptlab report RESULTS_DIR`, and the summary table `promptlab sweep` prints.

`cli.py` adds the command (`add_report_command`) and prints the table after a sweep (`print_summary`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import PromptlabError


def add_report_command(sub: Any) -> None:
    """Add `report` to the `promptlab` command's subparsers."""
    rep = sub.add_parser("report", help="write charts and the summary table of a results dir")
    rep.add_argument("results_dir")
    rep.add_argument("--out", help="where the charts go (default: the results dir)")
    rep.add_argument(
        "--bias-budget",
        type=_non_negative,
        default=None,
        help="model calls per model critic for the bias probes' re-asks (cached; default 250, 0: none)",
    )
    rep.set_defaults(func=_report)


def _non_negative(raw: str) -> int:
    """A flag's whole number >= 0 (argparse names the flag and exits 2 on anything else)."""
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {raw!r}")
    return value


def print_summary(results_dir: Any) -> None:
    """Print a results directory's summary table (3 significant digits, as the report and notebooks show it)."""
    from pandas.api.types import is_numeric_dtype

    from ..results.store import load
    from .readable import number_text
    from .summary import summary_table

    table = summary_table(load(results_dir))
    if len(table):
        print(
            table.to_string(index=False, formatters={str(c): number_text for c in table if is_numeric_dtype(table[c])})
        )


def _report(args: argparse.Namespace) -> int:
    from .summary import report

    if not Path(args.results_dir).is_dir():
        raise PromptlabError(f"results dir not found: {args.results_dir}")
    if not (Path(args.results_dir) / "cells").is_dir():
        raise PromptlabError(
            f"{args.results_dir} is not a results dir: it has no cells/ folder (a sweep writes "
            "one; run `promptlab sweep EXPERIMENT --out DIR` first)"
        )
    budget = {} if args.bias_budget is None else {"bias_budget": args.bias_budget}
    paths = report(args.results_dir, args.out, **budget)
    print_summary(args.results_dir)
    for name, path in paths.items():
        print(f"{name}: {path}")
    for name, why in getattr(paths, "skipped", {}).items():
        print(f"{name}: not drawn ({why})")
    return 0


__all__ = ["add_report_command", "print_summary"]
