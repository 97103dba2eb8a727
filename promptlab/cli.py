"""The `promptlab` command: run one loop, sweep an experiment, report on results, manage the cache.

More in docs/sweeps.md, section "promptlab.cli".
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from .errors import CacheUnavailableError, PromptlabError, ResultsDiskFull
from .exports.commands import add_export_command, add_mlflow_flag, live_logging
from .people.commands import add_judgments_command
from .reading import bounded
from .reports.commands import add_report_command, print_summary
from .ui.notes import notes_on_stderr

MAX_ERROR_CHARS = 4000
"""The most an error message prints (every problem of an experiment fits; no quoted input makes it longer)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C would be: the command stops as on an interrupt (running writes finish)."""


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `promptlab` command; returns the exit status (143 after SIGTERM, 130 after Ctrl-C)."""
    parser = _parser()
    args = parser.parse_args(argv)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if main_thread else None
    try:
        with notes_on_stderr():
            return int(args.func(args))
    except Terminated:
        print("promptlab: terminated (SIGTERM); what finished is kept: run it again to resume", file=sys.stderr)
        return 143
    except ValidationError as e:
        said = [_describe(err) for err in e.errors()[:5]]
        return _fail("; ".join(said) + (f"; and {e.error_count() - 5} more error(s)" if e.error_count() > 5 else ""))
    except ResultsDiskFull as e:  # not "refused before it started" (2): the sweep ran and can resume
        print(f"promptlab: error: {e}", file=sys.stderr)
        return 4
    except (PromptlabError, ValueError, OSError) as e:
        return _fail(str(e).strip() or type(e).__name__)
    except KeyboardInterrupt:
        print("promptlab: interrupted", file=sys.stderr)
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _fail(message: str) -> int:
    """Print the message (its later lines indented under the first; at most `MAX_ERROR_CHARS`, whatever input it
    quotes) and return exit status 2."""
    first, *rest = bounded(message, MAX_ERROR_CHARS).splitlines() or [""]
    print("\n".join([f"promptlab: error: {first}", *(f"  {line}" for line in rest)]), file=sys.stderr)
    return 2


def _describe(err: Any) -> str:
    from .sweeps.experiment import describe_error as describe

    return describe(err)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="promptlab", description="Experiments on iterative prompt refinement loops.")
    sub = p.add_subparsers(dest="command", required=True)
    _add_sweep_command(sub)
    _add_run_command(sub)
    add_report_command(sub)
    _add_cache_command(sub)
    add_export_command(sub)
    add_judgments_command(sub)
    return p


def _add_sweep_command(sub: Any) -> None:
    s = sub.add_parser("sweep", help="run an experiment's cells (finished cells are skipped)")
    s.add_argument("experiment", help="experiment YAML file")
    s.add_argument("--workers", type=_at_least_one, default=2, help="cells at once (default 2)")
    s.add_argument(
        "--executor",
        default="inline",
        help="inline (this process), papermill (a kernel per cell) or dask (tasks on a cluster)",
    )
    s.add_argument("--scheduler", help="dask executor: the scheduler address (default: a LocalCluster of --workers)")
    s.add_argument("--out", help="results dir (default results/<experiment name>)")
    s.add_argument(
        "--cache",
        help="call cache: a dir or redis://host:port/db (default $PROMPTLAB_CACHE, else "
        "$PROMPTLAB_CACHE_DIR or ./.promptlab/cache)",
    )
    s.add_argument("--list", action="store_true", help="list the cells and their ids, run nothing")
    s.add_argument(
        "--model",
        help="play every role with this model (simulated critics kept), e.g. fake/auto for a dry run; "
        "results default to results/<experiment name>-<model>",
    )
    s.add_argument(
        "--cell-concurrency",
        type=_at_least_one,
        help="runs at once inside a cell (default: as many as the most limited of the cell's models takes "
        "calls at once: its --max-concurrency or alias max_concurrency, else 4; a local model at most "
        "PROMPTLAB_LOCAL_INSTANCES)",
    )
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument(
        "--max-cost",
        type=float,
        metavar="USD",
        help="stop new paid model calls once the results dir's spending would pass USD (overrides the "
        "experiment's max_cost); the cells cut are resumed by a sweep with a higher cap",
    )
    _concurrency_flag(s)
    add_mlflow_flag(s)
    s.set_defaults(func=_sweep)


def _add_run_command(sub: Any) -> None:
    r = sub.add_parser("run", help="run one loop on one prompt, with a live event log")
    r.add_argument(
        "loop",
        help="loop name (p3ro, creator_critic, pes, pcee; opro, ape, protegi and resample need a "
        "task with examples: run them in a sweep)",
    )
    r.add_argument("--prompt", required=True, help="the prompt (or request) to work on")
    r.add_argument("--goal", default="", help="what a better result achieves")
    r.add_argument("--model", help="model for every role")
    r.add_argument("--generator", help="model for the proposing roles")
    r.add_argument("--critic", help="model for the judging roles")
    r.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a config field (repeatable); values are read as YAML scalars",
    )
    r.add_argument("--cache", help="call cache: a dir or redis://host:port/db")
    r.add_argument("--quiet", action="store_true", help="no live event log")
    _concurrency_flag(r)
    r.set_defaults(func=_run)


def _add_cache_command(sub: Any) -> None:
    c = sub.add_parser("cache", help="call cache: stats, clear, or verify every entry")
    c.add_argument("action", choices=["stats", "clear", "verify"])
    c.add_argument(
        "--dir",
        help="cache dir or redis://host:port/db (default $PROMPTLAB_CACHE, else "
        "$PROMPTLAB_CACHE_DIR or ./.promptlab/cache)",
    )
    c.add_argument("--fix", action="store_true", help="verify: remove the entries that fail")
    c.set_defaults(func=_cache)


def _at_least_one(raw: str) -> int:
    """A flag's whole number >= 1 (argparse names the flag and exits 2 on anything else)."""
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {raw!r}")
    return value


def _concurrency_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--max-concurrency",
        action="append",
        default=[],
        metavar="MODEL=N",
        help="calls in flight at once for MODEL (a model name or alias; repeatable); overrides an "
        "alias's max_concurrency",
    )


def _settings(items: list[str]) -> Any:
    """Call settings with the `--max-concurrency MODEL=N` overrides, or None when none is given."""
    if not items:
        return None
    from .llm.call.settings import Settings

    limits: dict[str, int] = {}
    for item in items:
        model, sep, raw = item.rpartition("=")
        try:
            n = int(raw)
        except ValueError:
            n = 0
        if not sep or not model.strip() or n < 1:
            raise PromptlabError(f"--max-concurrency {item!r}: expected MODEL=N with N a whole number >= 1")
        limits[model.strip()] = n
    return Settings(per_model_concurrency=limits)


def _sweep(args: argparse.Namespace) -> int:
    from .sweeps.experiment import load_experiment
    from .sweeps.run import sweep

    exp = load_experiment(args.experiment, check_models=not (args.list or args.model))
    if args.model:
        exp = exp.with_models(args.model)
        args.out = f"results/{exp.name}-{args.model.replace('/', '-')}" if args.out is None else args.out
    if args.list:
        for cell in exp.cells():
            print(cell.cell_id, " ".join(f"{k}={v}" for k, v in cell.params.items()))
        return 0
    settings = _settings(args.max_concurrency)
    args.out = f"results/{exp.name}" if args.out is None else args.out  # '' is refused by sweep, not defaulted
    with live_logging(args.mlflow, args.out) as on_cell:
        result = sweep(
            exp,
            args.out,
            executor=args.executor,
            workers=args.workers,
            cache=args.cache,
            progress=not args.no_progress,
            cell_concurrency=args.cell_concurrency,
            settings=settings,
            scheduler=args.scheduler,
            max_cost=args.max_cost,
            on_cell=on_cell,
        )
    print(result)
    print_summary(result.out_dir)
    if result.cut:
        print(
            f"promptlab: {result.cut} cell(s) cut by max_cost={result.max_cost:g} USD "
            f"({result.spent_usd or 0.0:.6g} USD paid in {result.out_dir}); run again with a higher "
            "--max-cost to resume them",
            file=sys.stderr,
        )
    return 1 if result.failed else 3 if result.cut else 0


def _run(args: argparse.Namespace) -> int:
    from .events import PrintLog
    from .llm.cache.location import open_cache
    from .loops.registry import get_loop, run_loop
    from .record import Task
    from .sweeps.cells import config_models

    spec = get_loop(args.loop)
    settings = _settings(args.max_concurrency)
    fields: dict[str, Any] = {}
    for name, value in (("model", args.model), ("generator_model", args.generator), ("critic_model", args.critic)):
        if value:
            fields[name] = value
    for item in args.set:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise PromptlabError(f"--set {item!r}: expected FIELD=VALUE")
        if key.strip() not in spec.config_cls.model_fields:
            raise PromptlabError(
                f"--set {key.strip()}: not a config field of loop {args.loop}; its fields: "
                f"{', '.join(spec.config_cls.model_fields)}"
            )
        fields[key.strip()] = _scalar(raw)
    config = spec.config_cls.model_validate(fields)
    if settings is not None:  # a concurrency override for a model the run never calls is a typo, not a no-op
        settings.check_models(config_models(config), "--max-concurrency")
    task = Task(id="cli", prompt=args.prompt, goal=args.goal)
    cache = open_cache(args.cache, origin="--cache")  # a bad or unreachable cache fails here, before any call
    try:
        run = run_loop(
            args.loop, task, config, on_event=None if args.quiet else PrintLog(), cache=cache, settings=settings
        )
    except CacheUnavailableError as e:  # it started (calls were paid): not "refused before it started" (2)
        print(f"promptlab: run incomplete: {e}", file=sys.stderr)
        return 1
    print("\n=== final output ===")
    print(run.final_output if run.final_output is not None else "(none)")
    print("\n=== run ===")
    print(f"loop {run.loop}  run {run.run_id}  stop reason: {run.stop_reason}")
    for it in run.iterations:
        scores = ", ".join(f"{s.criterion}={'missing' if s.score is None else s.score}" for s in it.scores)
        print(f"  iteration {it.index}: average {it.average}  decision {it.decision}  [{scores}]")
    print(f"best iteration {run.best_iteration} (score {run.best_score})")
    print(totals_text(run.totals))
    if run.errors:
        print(f"{len(run.errors)} error(s) recorded; first: {run.errors[0].kind}: {run.errors[0].message}")
    if run.incomplete:
        cause = next(e for e in run.errors if e.infrastructure)
        print(
            f"promptlab: run incomplete: an infrastructure failure stopped it ({cause.role}: {cause.kind}: "
            f"{cause.message}); its results are not a finished run",
            file=sys.stderr,
        )
        return 1
    return 0


def totals_text(t: Any) -> str:
    """A run's totals (`promptlab.record.Totals`) in one line; an unknown price reads "cost unknown"."""
    cost = "cost unknown" if t.cost_usd is None else f"cost {t.cost_usd:.6g} USD"
    return (
        f"totals: {t.calls} calls ({t.cache_hits} cached, {t.failed_calls} failed), {t.input_tokens} input + "
        f"{t.output_tokens} output tokens, {cost}, {t.wall_time_s:.2f} s"
    )


def _scalar(raw: str) -> Any:
    from .reading import NotYamlError, load_yaml

    try:
        value = load_yaml(raw, "--set")  # bounded: an alias bomb is refused, not expanded
    except NotYamlError:
        return raw
    return raw if value is None and raw.strip() not in ("null", "~", "") else value


def _cache(args: argparse.Namespace) -> int:
    from .llm.cache.location import open_cache

    cache = open_cache(args.dir, origin="--dir")  # a corrupt database is copied aside here, with a warning
    if args.action == "stats":
        stats = cache.stats()
        print(f"cache {stats['location']}: {stats['entries']} entries, {stats['bytes']} bytes")
        for name in stats["corrupt_aside"]:
            print(f"  corrupt database copied aside: {name}")
    elif args.action == "clear":
        print(f"cleared {cache.clear()} entries from {cache.location}")
    else:
        report = cache.verify(fix=args.fix)
        for aside in report.moved_aside:  # found corrupt on opening (or while verifying): what was there is lost
            print(
                f"cache {cache.location}: the database was corrupt and was copied aside as {aside}; "
                "its entries are gone, the cache starts empty"
            )
        print(
            f"cache {cache.location}: {report.entries} entries, {report.ok} ok, {len(report.problems)} bad; "
            f"database integrity: {report.database}"
        )
        for key, problem in report.problems.items():
            print(f"  {key[:16]}: {problem}{' (removed)' if args.fix else ''}")
        return 0 if report.healthy else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
