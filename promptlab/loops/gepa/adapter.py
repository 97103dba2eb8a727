"""GEPA's two plug-ins on promptlab's call path: the adapter (`PromptAdapter`, GEPA's `GEPAAdapter` protocol) over
promptlab's grounded evaluation, and the reflection model (`ReflectionModel`, GEPA's `LanguageModel`).

Both run in GEPA's worker thread and do their work on the run's event loop through the `Bridge`, in the
`Recorder` (`promptlab.loops.gepa.record`): a candidate runs on dev examples through `measure_examples` (the
path of `evaluate_prompt`: the target model at temperature 0, the task's scorer, every call a step of the
current iteration, cached, retried, rate-limited, counted in the totals and the budget), and the reflection call
through `RunContext.completion`. GEPA's data instances are positions in the task's dev split.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gepa.core.adapter import EvaluationBatch, ProposalFn

from ...eval.evaluate import ExampleRecord
from ...eval.tasks import input_text
from .bridge import Bridge
from .config import COMPONENT

if TYPE_CHECKING:
    from .record import Recorder


def verdict(record: ExampleRecord) -> str:
    """The scorer's verdict on one reply, as the reflection model reads it."""
    if record.score is None:
        return f"No score: {record.error or 'the reply could not be scored'}."
    note = f" The scorer read: {record.detail}." if record.detail else ""
    if record.score >= 1.0:
        return f"Correct (score {record.score:g}).{note}"
    return f"Wrong (score {record.score:g}): the expected output is {target_text(record.target)}.{note}"


def target_text(target: Any) -> str:
    """An example's target as text."""
    return target if isinstance(target, str) else json.dumps(target, ensure_ascii=False)


class PromptAdapter:
    """GEPA's adapter: a candidate is `{"prompt": text}`, run on dev examples by the target model and scored by
    the task's scorer. A reply that got no score (a failed call or scorer) is missing in the run's record and
    0.0 for GEPA, whose scores must be numbers (the fallback GEPA's adapter protocol prescribes)."""

    propose_new_texts: ProposalFn | None = None
    """GEPA's own reflective proposer writes the new texts (its prompt template, its reply parsing)."""

    def __init__(self, bridge: Bridge, recorder: Recorder) -> None:
        self.bridge, self.recorder = bridge, recorder

    def evaluate(
        self, batch: list[int], candidate: dict[str, str], capture_traces: bool = False
    ) -> EvaluationBatch[dict[str, Any], str | None]:
        """Run `candidate` on the dev examples at positions `batch` (GEPA's `evaluate`)."""
        result = self.bridge.call(self.recorder.evaluate(candidate[COMPONENT], list(batch)))
        records = result.records
        return EvaluationBatch(
            outputs=[r.output for r in records],
            scores=[r.score if r.score is not None else 0.0 for r in records],
            trajectories=[r.model_dump(mode="json") for r in records] if capture_traces else None,
        )

    def make_reflective_dataset(
        self,
        candidate: dict[str, str],
        eval_batch: EvaluationBatch[dict[str, Any], str | None],
        components_to_update: list[str],
    ) -> Mapping[str, Sequence[Mapping[str, Any]]]:
        """Per example of the minibatch: its input, the reply, the expected output and the scorer's verdict."""
        rows = []
        for trace in eval_batch.trajectories or []:
            record = ExampleRecord.model_validate(trace)
            rows.append(
                {
                    "Inputs": input_text(record.input),
                    "Generated Outputs": record.output if record.output is not None else "(no reply)",
                    "Expected Output": target_text(record.target),
                    "Feedback": verdict(record),
                }
            )
        return {name: rows for name in components_to_update}


class ReflectionModel:
    """GEPA's reflection model: one call of the `reflector` role per reflection, through promptlab's call path.
    It exposes what its calls spent as GEPA's own LM does (`total_cost`, `total_tokens_in`, `total_tokens_out`,
    read by GEPA's `max_reflection_cost`), counting a cache hit with its original call's figures as promptlab's
    budget does, so a replay stops where the first run did; a call of unknown price makes `total_cost` infinite
    (an unknown cost counts against a cap)."""

    def __init__(self, bridge: Bridge, recorder: Recorder) -> None:
        self.bridge, self.recorder = bridge, recorder
        self.cost, self.unknown_cost = 0.0, False
        self.total_tokens_in = self.total_tokens_out = 0

    @property
    def total_cost(self) -> float:
        """USD spent on reflection so far (infinite once a call's price was unknown)."""
        return math.inf if self.unknown_cost else self.cost

    def __call__(self, prompt: str | list[dict[str, Any]]) -> str:
        text = prompt if isinstance(prompt, str) else "\n\n".join(str(m.get("content", "")) for m in prompt)
        c = self.bridge.call(self.recorder.reflect(text))
        self.total_tokens_in += c.input_tokens or 0
        self.total_tokens_out += c.output_tokens or 0
        if c.cost_usd is None:
            self.unknown_cost = True
        else:
            self.cost += c.cost_usd
        return c.text


__all__ = ["PromptAdapter", "ReflectionModel", "target_text", "verdict"]
