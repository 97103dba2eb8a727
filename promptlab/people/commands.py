"""Judgments on the command line: `promptlab judgments plan|import|reference|summary RESULTS_DIR`.

    promptlab judgments plan results/people                   # draw the plan: judgments/plan.json and plan.csv
    promptlab judgments import results/people lab.csv         # item,person,value[,seconds,comment]
    promptlab judgments reference results/people              # the experiment's reference_judge judges every pair
    promptlab judgments summary results/people                # the agreement table and a verdict per critic

`cli.py` adds these (`add_judgments_command`).
"""

from __future__ import annotations

import argparse
from typing import Any


def add_judgments_command(sub: Any) -> None:
    """Add `judgments plan`, `import`, `reference` and `summary` to the `promptlab` command's subparsers."""
    j = sub.add_parser(
        "judgments", help="people's judgments of a results dir: plan, import, reference, summary (docs/people.md)"
    )
    actions = j.add_subparsers(dest="action", required=True)
    p = actions.add_parser("plan", help="draw what people judge, in which order (RESULTS/judgments/plan.json)")
    p.add_argument("results_dir")
    p.add_argument("--kind", choices=["pair", "rating"], default="pair", help="pair (A/B/tie) or rating (1-10)")
    p.add_argument("--seed", type=int, default=0, help="seed of every draw (default 0)")
    p.add_argument("--items", type=int, help="at most this many items, kept stratified (default: all)")
    p.add_argument("--repeat-every", type=int, default=10, help="one slot in N is an unannounced repeat (0: none)")
    p.add_argument("--per-run", type=int, default=1, help="inputs per run (grounded runs: test examples)")
    p.add_argument("--replace", action="store_true", help="replace a stored plan (refused if it drops a judged item)")
    p.set_defaults(func=_plan)
    i = actions.add_parser("import", help="store judgments made elsewhere: a CSV of item,person,value")
    i.add_argument("results_dir")
    i.add_argument("csv")
    i.set_defaults(func=_import)
    r = actions.add_parser("reference", help="a fixed reference judge judges every planned pair, blind")
    r.add_argument("results_dir")
    r.add_argument("--model", help="the judge (default: the experiment file's reference_judge)")
    r.add_argument("--seed", type=int, default=0, help="seed of the order each pair is shown in (default 0)")
    r.set_defaults(func=_reference)
    s = actions.add_parser("summary", help="each critic against the people, the ceiling, the repeats, the verdicts")
    s.add_argument("results_dir")
    s.add_argument("--boot", type=int, default=2000, help="bootstrap draws behind each interval (default 2000)")
    s.set_defaults(func=_summary)


def _plan(args: argparse.Namespace) -> int:
    from .plan import make_plan, plan_path, read_plan, write_plan, write_plan_csv

    if plan_path(args.results_dir).is_file() and not args.replace:
        plan = read_plan(args.results_dir)
        print(f"{plan_path(args.results_dir)}: a plan is stored ({len(plan.items)} items); --replace draws a new one")
        return 0
    plan = make_plan(
        args.results_dir,
        kind=args.kind,
        seed=args.seed,
        limit=args.items,
        repeat_every=args.repeat_every,
        per_run=args.per_run,
    )
    path = write_plan(args.results_dir, plan)
    sheet = write_plan_csv(args.results_dir, plan)
    strata = {(i.critic, i.pairing) for i in plan.items}
    print(
        f"{path}: {len(plan.items)} {plan.kind} items in {len(plan.slots)} slots "
        f"({sum(s.repeat for s in plan.slots)} repeats), {len(strata)} critic x pairing strata"
    )
    print(f"{sheet}: the items for an annotation tool (A and B as a CSV's values mean)")
    for why, n in plan.left_out.items():
        print(f"  {n} run(s) left out: {why}")
    return 0


def _import(args: argparse.Namespace) -> int:
    from .imports import import_csv

    n = import_csv(args.results_dir, args.csv)
    print(f"{n} judgment(s) stored in {args.results_dir}/judgments")
    return 0


def _reference(args: argparse.Namespace) -> int:
    import sys

    from .reference import ReferenceJudgment, run_reference

    count = 0

    def progress(record: ReferenceJudgment) -> None:  # one line per judgment stored, on stderr
        nonlocal count
        count += 1
        said = record.value or f"missing ({(record.error or '')[:60]})"
        print(f"  {count}: {record.item} {said}", file=sys.stderr, flush=True)

    done = run_reference(args.results_dir, args.model, seed=args.seed, on_item=progress)
    print(
        f"{done.path}: {done.judged} item(s) judged by {done.judge} now, {len(done.missing)} missing, "
        f"{done.already} judged before"
    )
    for record in done.missing[:5]:
        print(f"  missing {record.item}: {record.error}")
    if len(done.missing) > 5:
        print(f"  ... and {len(done.missing) - 5} more (each record holds its error)")
    return 0


def _summary(args: argparse.Namespace) -> int:
    from .summary import people_findings
    from .text import findings_text

    print(findings_text(people_findings(args.results_dir, n_boot=args.boot)))
    return 0


__all__ = ["add_judgments_command"]
