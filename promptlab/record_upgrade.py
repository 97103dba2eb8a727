"""Records written by an older promptlab, read as this one writes them (`Run` applies `upgrade_run` on load).

Roles, each once (issue 53): a Creator/Critic run with one critic used to record it twice, as `critic[1]` (its
judge, step role and `Run.models` key) and as `critic` (a copy in `Run.models`); a run with several critics also
kept `critic` as their models joined by ", ". A run's models are now its roles, each once: one critic is
`critic`, several are `critic[1]`, `critic[2]`, ... and no joined entry. An old record is upgraded when it is read
(the file on disk is left as it was), so a results directory written before reads, exports and shows as a new one.
"""

from __future__ import annotations

from typing import Any

OLD_ONE_CRITIC = "critic[1]"
"""The judge name an old one-critic run gave its only critic."""


def upgrade_run(data: Any) -> Any:
    """A run's JSON data (a dict, as read from runs.jsonl) with its roles each once; anything else as it is."""
    if not isinstance(data, dict):
        return data
    models = data.get("models")
    if not isinstance(models, dict) or OLD_ONE_CRITIC not in models:
        return data
    if "critic[2]" in models:  # several critics: only the joined `critic` entry goes
        data["models"] = {k: v for k, v in models.items() if k != "critic"}
        return data
    data["models"] = {("critic" if k == OLD_ONE_CRITIC else k): v for k, v in models.items() if k != "critic"}
    _rename_judge(data)
    return data


def _rename_judge(data: dict[str, Any]) -> None:
    """`critic[1]` -> `critic` wherever a one-critic run named its critic: scores, steps, errors and info."""
    for it in _dicts(data.get("iterations")):
        _rename_scores(it.get("scores"))
        _rename_steps(it.get("steps"))
    _rename_scores(data.get("final_scores"))
    for part in ("setup", "final"):
        _rename_steps(data.get(part))
    for error in _dicts(data.get("errors")):
        _rename(error, "role")
    info = data.get("info")
    if isinstance(info, dict):
        for critic in _dicts(info.get("critics")):
            _rename(critic, "judge")
        per = info.get("per_critic")
        if isinstance(per, dict):
            info["per_critic"] = {("critic" if k == OLD_ONE_CRITIC else k): v for k, v in per.items()}


def _rename_scores(scores: Any) -> None:
    for score in _dicts(scores):
        _rename(score, "judge")


def _rename_steps(steps: Any) -> None:
    for step in _dicts(steps):
        _rename(step, "role")
        error = step.get("error")
        if isinstance(error, dict):
            _rename(error, "role")


def _rename(item: dict[str, Any], key: str) -> None:
    if item.get(key) == OLD_ONE_CRITIC:
        item[key] = "critic"


def _dicts(items: Any) -> list[dict[str, Any]]:
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


__all__ = ["OLD_ONE_CRITIC", "upgrade_run"]
