"""One model for every role of an experiment (`replace_models`): what a dry run (`model=fake/auto`) needs.

Setting `config.model` alone is not enough: `generator_model`, `critic_model`, `target_model`, `role_models`,
`critic_models`, the same fields under `loop_config` and `grid`, and the `pairings` all name models that win
over it. Every one of them is replaced. A simulated critic (`sim/...`) is kept: it makes no model call, and
the pairings that differ only by their critic stay distinct cells.
"""

from __future__ import annotations

from typing import Any

from ..llm.providers.resolved import resolve_model

MODEL_FIELDS = frozenset({"model", "generator_model", "critic_model", "target_model"})
"""Config fields that name one model."""
MODEL_LIST_FIELDS = frozenset({"critic_models"})
"""Config fields that name a list of models."""
MODEL_MAP_FIELDS = frozenset({"role_models"})
"""Config fields that map role names to models."""


def swap(value: Any, model: str) -> Any:
    """`model` in place of a model name (a simulated critic and None are kept)."""
    return value if value is None or not resolve_model(value).makes_calls else model


def swap_field(name: str, value: Any, model: str) -> Any:
    """A config field's value with every model it names replaced by `model` (other fields unchanged)."""
    if name in MODEL_FIELDS:
        return swap(value, model)
    if name in MODEL_LIST_FIELDS and isinstance(value, list):
        return [swap(v, model) for v in value]
    if name in MODEL_MAP_FIELDS and isinstance(value, dict):
        return {role: swap(v, model) for role, v in value.items()}
    return value


def replace_models(data: dict[str, Any], model: str) -> dict[str, Any]:
    """An experiment's fields (as `Experiment.model_dump(mode="json")` gives them) with every role's model
    replaced by `model`: config, loop_config, grid, pairings (pairings that become equal are kept once) and the
    reference judge."""
    out = dict(data)
    out["config"] = {k: swap_field(k, v, model) for k, v in data.get("config", {}).items()}
    out["config"]["model"] = model
    out["loop_config"] = {
        loop: {k: swap_field(k, v, model) for k, v in fields.items()}
        for loop, fields in data.get("loop_config", {}).items()
    }
    grid: dict[str, list[Any]] = {}
    for key, values in data.get("grid", {}).items():
        swapped = [swap_field(key, v, model) for v in values]
        grid[key] = [v for i, v in enumerate(swapped) if v not in swapped[:i]]  # a repeated value is an error
    out["grid"] = grid
    if data.get("pairings"):
        pairs: list[dict[str, str]] = []
        for pair in data["pairings"]:
            new = {"generator": swap(pair["generator"], model), "critic": swap(pair["critic"], model)}
            if new not in pairs:
                pairs.append(new)
        out["pairings"] = pairs
    if data.get("reference_judge"):
        out["reference_judge"] = swap(data["reference_judge"], model)
    return out


def models_of(cells: list[Any]) -> list[str]:
    """Every model the cells' configs name (sorted), simulated critics included."""
    names: set[str] = set()
    for cell in cells:
        for key, value in cell.config.items():
            if key in MODEL_FIELDS and isinstance(value, str):
                names.add(value)
            elif key in MODEL_LIST_FIELDS and isinstance(value, list):
                names.update(v for v in value if isinstance(v, str))
            elif key in MODEL_MAP_FIELDS and isinstance(value, dict):
                names.update(v for v in value.values() if isinstance(v, str))
    return sorted(names)


def preview(name: str, cells: list[Any], tasks: int, replicates: int) -> str:
    """What a sweep will run, in two lines: cells x tasks x replicates = runs, and the models it calls (an
    embedded llama.cpp model marked as the slow part)."""

    runs = len(cells) * tasks * replicates
    models = [f"{m} ({note})" if (note := resolve_model(m).note) else m for m in models_of(cells)]
    return (
        f"{name}: {len(cells)} cells x {tasks} tasks x {replicates} replicate(s) = {runs} runs\n"
        f"models: {', '.join(models)}"
    )


__all__ = [
    "MODEL_FIELDS",
    "MODEL_LIST_FIELDS",
    "MODEL_MAP_FIELDS",
    "models_of",
    "preview",
    "replace_models",
    "swap",
    "swap_field",
]
