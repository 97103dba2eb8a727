"""Experiment files: which loops, tasks, base config, grid, model pairings and replicates to run.

More in docs/sweeps.md, section "promptlab.sweeps.experiment".
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from ..errors import ConfigError, PromptlabError
from ..eval.tasks import read_tasks
from ..llm.providers.aliases import ModelSpec, register_spec
from ..reading import bounded, excerpt, load_yaml, read_text
from ..record import Task
from .cells import Cell, cell_id, preflight_cells, task_fingerprint
from .models import replace_models

Scalar = bool | int | float | str | None
"""A grid value: a JSON scalar."""
RESERVED_PARAMS = frozenset({"loop"})


MAX_CELLS = 100_000
"""Most cells an experiment may expand to (counted before any is built; a real sweep has tens to thousands)."""
MAX_REPLICATES = 10_000
"""Most replicates (samples per task and cell) an experiment may ask for."""
MAX_RUNS = 1_000_000
"""Most runs per task an experiment may ask for: cells x replicates (counted before any is built), so a grid
within MAX_CELLS and replicates within MAX_REPLICATES cannot multiply past what either cap means (10^3 x 10^4)."""


class Pairing(BaseModel):
    """One generator/critic model pair of a sweep."""

    model_config = ConfigDict(extra="forbid")

    generator: str
    """Model for the proposing roles (becomes the cell's `generator_model`)."""
    critic: str
    """Model for the judging roles (becomes the cell's `critic_model`)."""


class Experiment(BaseModel):
    """A sweep definition, as read from an experiment YAML file."""

    model_config = ConfigDict(extra="forbid")

    version: int = 1
    """Experiment file format version."""
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    """Short name (letters, digits, `_.-`); the default results dir is results/<name>."""
    description: str = ""
    """What the experiment is for."""
    loops: list[str] = Field(min_length=1)
    """Loop names to run (each must be registered)."""
    tasks: str
    """Path of the JSONL task file (relative to the experiment file's directory, then the CWD)."""
    task_ids: list[str] | None = None
    """Only these task ids, in this order (None: all)."""
    limit: int | None = Field(None, ge=1)
    """Only the first N tasks (after `task_ids`)."""
    config: dict[str, Any] = Field(default_factory=dict)
    """Base config fields given to every loop."""
    loop_config: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Per-loop config fields, applied over `config`."""
    grid: dict[str, list[Scalar]] = Field(default_factory=dict)
    """Config field -> values to sweep; the cells cover the product."""
    pairings: list[Pairing] | None = None
    """Generator/critic model pairs crossed with the grid (None: the config's models)."""
    replicates: int = Field(1, ge=1, le=MAX_REPLICATES)
    """Samples per task and cell (sample indices 0..n-1), at most MAX_REPLICATES."""
    max_cost: float | None = Field(None, gt=0, allow_inf_nan=False)
    """A cap in USD on what the sweep's model calls pay in its results dir, over every run and resume (None:
    no cap); cells cut by it are re-run by a sweep with a higher cap. Not part of the cells' identity."""
    models: dict[str, ModelSpec] = Field(default_factory=dict)
    """Model aliases by name (see `promptlab.llm.providers.aliases`), registered when the experiment is loaded."""
    reference_judge: str | None = Field(None, min_length=1)
    """A fixed model that judges every pairing's outputs blind, with one prompt, against people's judgments
    (`promptlab judgments reference`; docs/people.md). Not part of the cells' identity: the sweep never calls it."""

    _base_dir: Path | None = PrivateAttr(default=None)

    # construction --------------------------------------------------------------------------------
    @classmethod
    def from_dict(
        cls, data: dict[str, Any], base_dir: str | Path | None = None, *, source: str = "experiment"
    ) -> Experiment:
        """Validate an experiment given as a dict; `base_dir` resolves a relative task path."""
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: an experiment is a mapping of fields, got {type(data).__name__}")
        try:
            exp = cls.model_validate(data)
        except ValidationError as e:
            raise ConfigError(f"{source}: " + "; ".join(describe_error(err) for err in e.errors())) from None
        exp._base_dir = Path(base_dir).resolve() if base_dir is not None else None
        exp.register_models(source)
        exp.check_reference_judge()
        exp.check()
        return exp

    def with_config(self, **fields: Any) -> Experiment:
        """A copy whose base `config` has `fields` set (validated like a file)."""
        data = self.model_dump(mode="json")
        data["config"] = {**data["config"], **fields}
        return Experiment.from_dict(data, self._base_dir)

    def with_models(self, model: str) -> Experiment:
        """A copy in which `model` plays every role: config, loop_config, grid and pairings (a dry run with
        "fake/auto" makes no local-model call); simulated critics are kept (`promptlab.sweeps.models`)."""
        return Experiment.from_dict(replace_models(self.model_dump(mode="json"), model), self._base_dir)

    @property
    def base_dir(self) -> Path | None:
        """Directory a relative task path is resolved against first (the experiment file's)."""
        return self._base_dir

    def register_models(self, source: str = "experiment") -> None:
        """Register the `models:` aliases (errors name the alias)."""
        for name, spec in self.models.items():
            try:
                register_spec(name, spec)
            except ConfigError as e:
                raise ConfigError(f"{source}: models.{name}: {e}") from None

    # validation ----------------------------------------------------------------------------------
    def check_reference_judge(self) -> None:
        """The reference judge names a model that makes calls (`check_judge_model`); its API key is checked when
        it is run, not here (the sweep never calls it)."""
        if self.reference_judge is not None:
            check_judge_model(self.reference_judge, "reference_judge")

    def check(self) -> None:
        """Check names against the loops' config fields, grid values, and the task file; the number of cells
        against MAX_CELLS (counted, not built)."""
        from ..loops.registry import get_loop

        count = len(self.loops) * len(self.pairings or [None]) * math.prod(len(v) for v in self.grid.values())
        if count > MAX_CELLS:
            raise ConfigError(
                f"grid: {len(self.loops)} loop(s) x {len(self.pairings or [None])} pairing(s) x the grid's product "
                f"make {count:,} cells, over the limit of {MAX_CELLS:,}; sweep a smaller grid (or several)"
            )
        if count * self.replicates > MAX_RUNS:
            raise ConfigError(
                f"replicates: {count:,} cell(s) x {self.replicates:,} replicate(s) make {count * self.replicates:,} "
                f"runs per task, over the limit of {MAX_RUNS:,}; sweep a smaller grid or fewer replicates (or several)"
            )

        specs = {name: get_loop(name) for name in self.loops}
        for loop in self.loop_config:
            if loop not in specs:
                raise ConfigError(f"loop_config.{loop}: {loop!r} is not one of this experiment's loops {self.loops}")
        for name, spec in specs.items():
            fields = spec.config_cls.model_fields
            for key in self.config:
                if key not in fields:
                    raise ConfigError(
                        f"config.{key}: not a config field of loop {name} (put fields of one "
                        f"loop under loop_config.<loop>); its fields: {', '.join(fields)}"
                    )
            for key in self.loop_config.get(name, {}):
                if key not in fields:
                    raise ConfigError(
                        f"loop_config.{name}.{key}: not a config field of loop {name}; its fields: {', '.join(fields)}"
                    )
            for key in self.grid:
                if key in RESERVED_PARAMS:
                    raise ConfigError(f"grid.{key}: {key!r} is reserved; list loops under `loops`")
                if key in _frame_columns():
                    raise ConfigError(
                        f"grid.{key}: the name is a column of the results frames, so it cannot be a cell parameter"
                    )
                if key not in fields:
                    raise ConfigError(f"grid.{key}: not a config field of loop {name}; its fields: {', '.join(fields)}")
            self._build(name, {}, "config")
        for key, values in self.grid.items():
            if not values:
                raise ConfigError(f"grid.{key}: needs at least one value")
            if self.pairings and key in ("generator_model", "critic_model"):
                raise ConfigError(f"grid.{key}: also set by `pairings`; use one or the other")
            for name in specs:
                seen: dict[str, int] = {}
                for i, value in enumerate(values):
                    cfg = self._build(name, {key: value}, f"grid.{key}[{i}]", field=key, value=value)
                    norm = json.dumps(cfg[key], sort_keys=True)
                    if norm in seen:
                        raise ConfigError(f"grid.{key}[{i}]: {value!r} repeats grid.{key}[{seen[norm]}]")
                    seen[norm] = i
        for i, pair in enumerate(self.pairings or []):
            for name in specs:
                self._build(name, {"generator_model": pair.generator, "critic_model": pair.critic}, f"pairings[{i}]")
        self.load_tasks()

    def _build(
        self, loop: str, extra: dict[str, Any], where: str, *, field: str | None = None, value: Any = None
    ) -> dict[str, Any]:
        """Validate `config` + `loop_config[loop]` + `extra` with the loop's config class; JSON dump."""
        from ..loops.registry import get_loop

        cls = get_loop(loop).config_cls
        data = {**self.config, **self.loop_config.get(loop, {}), **extra}
        try:
            return cls.model_validate(data).model_dump(mode="json")
        except ValidationError as e:
            problems = []
            for err in e.errors():
                name = err["loc"][0] if err["loc"] else None
                if field is not None and name == field:
                    bounds = _bounds(cls.model_fields[field].metadata)
                    if err["type"] in _BOUND_ERRORS and bounds:
                        raise ConfigError(f"{where}: {value!r} is not within {bounds} for loop {loop}") from None
                    raise ConfigError(f"{where}: {value!r} is not valid for loop {loop}: {err['msg']}") from None
                if where == "config":
                    raise ConfigError(f"config.{describe_error(err)} (loop {loop})") from None
                problems.append(describe_error(err))
            raise ConfigError(f"{where}: invalid for loop {loop}: {'; '.join(problems)}") from None
        except ConfigError as e:
            raise ConfigError(f"{where}: {e} (loop {loop})") from None
        except ValueError as e:  # an unknown model name raised by a validator
            raise ConfigError(f"{where}: {e} (loop {loop})") from None

    # tasks ---------------------------------------------------------------------------------------
    def tasks_path(self) -> Path:
        """The task file: relative to the experiment file's directory first, then the CWD."""
        raw = Path(self.tasks).expanduser()
        tried = [raw] if raw.is_absolute() else [d / raw for d in (self._base_dir, Path.cwd()) if d is not None]
        for path in tried:
            if path.exists():  # a FIFO or a device there is refused by name when it is read (read_text)
                return path.resolve()
        raise ConfigError(f"tasks: no task file {self.tasks!r}; tried {', '.join(str(p) for p in tried)}")

    def load_tasks(self) -> list[Task]:
        """The selected tasks (`task_ids`, then `limit`, applied)."""
        path = self.tasks_path()
        tasks = read_tasks(path)
        if self.task_ids is not None:
            by_id = {t.id: t for t in tasks}
            unknown = [t for t in self.task_ids if t not in by_id]
            if unknown:
                raise ConfigError(f"task_ids: {unknown} not in {path}; its ids: {', '.join(by_id)}")
            tasks = [by_id[t] for t in self.task_ids]
        if self.limit is not None:
            tasks = tasks[: self.limit]
        if not tasks:
            raise ConfigError(f"tasks: no task selected from {path}")
        return tasks

    # expansion -----------------------------------------------------------------------------------
    def cells(self, tasks: list[Task] | None = None) -> list[Cell]:
        """Every cell, in deterministic order: loops x pairings x grid product."""
        tasks = self.load_tasks() if tasks is None else tasks
        fingerprint = task_fingerprint(tasks)
        identities = {name: spec.identity() for name, spec in sorted(self.models.items())}
        keys = list(self.grid)
        pairs: list[Pairing | None] = list(self.pairings) if self.pairings else [None]
        out: list[Cell] = []
        for loop in self.loops:
            base = self._build(loop, {}, "config")
            given = {**self.config, **self.loop_config.get(loop, {})}
            base_id = {k: base[k] for k in sorted(given)}
            for pair in pairs:
                for combo in itertools.product(*(self.grid[k] for k in keys)):
                    extra: dict[str, Any] = {}
                    if pair is not None:
                        extra.update(generator_model=pair.generator, critic_model=pair.critic)
                    extra.update(zip(keys, combo, strict=True))
                    where = f"cell {json.dumps({'loop': loop, **extra})}"
                    full = self._build(loop, extra, where)
                    params: dict[str, Any] = {"loop": loop, **{k: full[k] for k in extra}}
                    config = {**given, **{k: full[k] for k in extra}}
                    cid = cell_id(params, base_id, fingerprint, self.replicates, identities)
                    out.append(Cell(cell_id=cid, loop=loop, params=params, config=config))
        return out

    def find_cell(self, cell_id: str = "", params: dict[str, Any] | None = None) -> Cell:
        """The cell with this id (or, without an id, these params); the error lists the known ids."""
        cells = self.cells()
        for c in cells:
            if cell_id and c.cell_id == cell_id:
                if params is not None and c.params != params:
                    raise ConfigError(f"cell {cell_id}: params {params} differ from the experiment's {c.params}")
                return c
            if not cell_id and params is not None and c.params == params:
                return c
        what = f"id {cell_id!r}" if cell_id else f"params {params}"
        raise ConfigError(
            f"experiment {self.name!r} has no cell with {what}; its cells: {', '.join(c.cell_id for c in cells)}"
        )

    def to_yaml(self) -> str:
        """The experiment as YAML (fields at their defaults left out)."""
        import yaml

        data = self.model_dump(mode="json", exclude_defaults=True)
        data = {"name": self.name, **data}
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def load_experiment(path: str | Path, *, check_models: bool = True) -> Experiment:
    """Read and validate an experiment YAML file (errors name the file and the field).

    With `check_models` (the default) every cell is preflighted too (`preflight_cells`): a missing API key
    or local model file, or a loop config a task refuses (score_source 'grounded' on a task without examples,
    score_mode 'expected' with a critic without log-probabilities), raises ConfigError before anything runs."""
    p = Path(path).expanduser()
    if not p.exists():
        raise ConfigError(f"experiment file not found: {p}")  # anything else there is refused by read_text
    data = load_yaml(read_text(p, "experiment file"), str(p))  # UTF-8 and a bounded YAML, or an error naming p
    try:
        exp = Experiment.from_dict(data, p.resolve().parent, source=str(p))
        if check_models:
            tasks = exp.load_tasks()
            preflight_cells(exp.cells(tasks), tasks, priced=exp.max_cost is not None)
        return exp
    except ConfigError as e:
        msg = str(e)
        raise ConfigError(msg if msg.startswith(str(p)) else f"{p}: {msg}") from None


def check_judge_model(model: str, where: str) -> None:
    """ConfigError naming `where` unless `model` is a model name a registered provider (or an alias) serves and
    that makes calls (a simulated critic judges no text)."""
    from ..llm.call.preflight import validate_model_name
    from ..llm.providers.resolved import resolve_model

    try:
        validate_model_name(model)
    except PromptlabError as e:
        raise ConfigError(f"{where}: {model!r}: {e}") from None
    provider = resolve_model(model).provider
    if not provider.makes_calls:
        why = provider.call_refusal or "makes no model call"
        raise ConfigError(f"{where}: {model!r} {why}; name a model that judges texts")


def _frame_columns() -> frozenset[str]:
    """Result frame column names a grid parameter must not shadow (the config columns may)."""
    from ..results.columns import CELL_COLUMNS, CONFIG_COLUMNS, RUN_COLUMNS, TRAJECTORY_COLUMNS

    names = set(TRAJECTORY_COLUMNS) | set(RUN_COLUMNS) | set(CELL_COLUMNS)
    return frozenset(names - CONFIG_COLUMNS)


_BOUND_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal"})


def _bounds(metadata: list[Any]) -> str:
    """ "1-10" from a field's ge/le (gt/lt) constraints, or "" when it has not both."""
    low = high = None
    for m in metadata:
        low = getattr(m, "ge", None) if getattr(m, "ge", None) is not None else low
        low = getattr(m, "gt", None) if getattr(m, "gt", None) is not None else low
        high = getattr(m, "le", None) if getattr(m, "le", None) is not None else high
        high = getattr(m, "lt", None) if getattr(m, "lt", None) is not None else high
    return f"{low}-{high}" if low is not None and high is not None else ""


def describe_error(err: Any) -> str:
    """One pydantic error as "field.path[i]: value: message"."""
    loc = ""
    for part in err.get("loc", ()):
        loc += f"[{part}]" if isinstance(part, int) else (f".{part}" if loc else str(part))
    value = err.get("input")
    quoted = excerpt(value) if isinstance(value, str | bytes) else bounded(repr(value), 120)
    shown = "" if err.get("type") == "missing" or isinstance(value, dict) else f" {quoted}:"
    return f"{loc or 'experiment'}:{shown} {bounded(str(err.get('msg', 'invalid')), 300)}"


__all__ = ["Experiment", "Pairing", "check_judge_model", "describe_error", "load_experiment"]
