"""People's judgments in MLflow, as its users record human feedback: one trace per judged item (its input and
texts), in the nested run of the loop run the item came from, with one assessment per judgment from a HUMAN source
(the person) and the critic's view from an LLM_JUDGE source.

Assessments are MLflow's feedback records (`mlflow.log_feedback`), logged here through `TracingClient` with the
export's own tracking URI, never the global one. Exporting again adds only the judgments not there yet (each carries
its key in `metadata['promptlab.judgment']`).
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import TYPE_CHECKING, Any

from ..people.items import LABELS, Item
from ..people.judged import critic_label, pair_label
from ..people.plan import read_plan
from ..people.storage import Judgment, read_judgments
from .mlflow_payload import RESULTS_TAG

if TYPE_CHECKING:
    from .mlflow_export import MlflowTarget

ITEM_TAG = "promptlab.item"
JUDGMENT_KEY = "promptlab.judgment"
PEOPLE = "people_preference"
"""The assessment name of a person's pairwise judgment (value: the side preferred) or rating ('people_rating')."""
CRITIC = "critic_preference"


def judgment_key(j: Judgment) -> str:
    """What tells two stored judgments apart (a person may judge an item twice: a repeat)."""
    return f"{j.person}|{j.item}|{j.position}|{j.time}|{j.value}"


def log_judgments(target: MlflowTarget) -> int:
    """Log every judgment of the target's results directory not logged yet; returns how many were logged."""
    from mlflow.tracing.client import TracingClient

    plan = read_plan(target.results)
    items = plan.by_id()
    judged: dict[str, list[Judgment]] = {}
    for j in read_judgments(target.results).judgments:
        if j.item in items:
            judged.setdefault(j.item, []).append(j)
    tracing = TracingClient(target.uri)
    traces = _traces(target)
    logged = 0
    for item_id, judgments in judged.items():
        item = items[item_id]
        trace_id, have = traces.get(item_id) or (_new_trace(target, item, tracing), set())
        if not have:
            view = _critic_value(item)
            if view is not None:
                tracing.log_assessment(trace_id, _feedback(CRITIC, view, "LLM_JUDGE", item.critic, {}))
        for j in judgments:
            if judgment_key(j) in have:
                continue
            value = _person_value(j)
            meta = {
                JUDGMENT_KEY: judgment_key(j),
                "shown": json.dumps(j.shown),
                "seconds": str(j.seconds),
                "position": str(j.position),
                "source": j.source,
            }
            name = PEOPLE if plan.kind == "pair" else "people_rating"
            tracing.log_assessment(trace_id, _feedback(name, value, "HUMAN", j.person, meta, j.comment or None))
            logged += 1
    return logged


def _feedback(name: str, value: Any, kind: str, source: str, meta: dict[str, str], why: str | None = None) -> Any:
    from mlflow.entities import AssessmentSource, Feedback

    return Feedback(name=name, value=value, source=AssessmentSource(kind, source), metadata=meta, rationale=why)


def _person_value(j: Judgment) -> str | int:
    """A pair's side preferred ('start', 'returned', 'tie', 'skip'), or a rating."""
    if isinstance(j.value, int):
        return j.value
    label, _ = pair_label(j.value, j.shown)
    return "skip" if label is None else LABELS[int(label)]


def _critic_value(item: Item) -> str | float | None:
    if item.kind == "rating":
        return next(iter(item.critic_scores.values()), None)
    label = critic_label(item.critic_scores.get("start"), item.critic_scores.get("returned"))
    return None if label is None else LABELS[int(label)]


def _new_trace(target: MlflowTarget, item: Item, tracing: Any) -> str:
    """A trace record for the item (no spans: its input and texts are the request and response previews), linked
    to the nested run of its loop run when that run is exported."""
    from mlflow.entities import TraceInfo, TraceLocation, TraceState

    nested = target.known.get(item.run_id)
    trace_id = "tr-" + hashlib.sha256(f"{target.results}|{item.id}".encode()).hexdigest()[:32]
    info = TraceInfo(
        trace_id=trace_id,
        trace_location=TraceLocation.from_experiment_id(target.experiment_id),
        request_time=int(time.time() * 1000),
        state=TraceState.OK,
        request_preview=json.dumps({"input": target.clean(item.input)}),
        response_preview=json.dumps({side: target.clean(text) for side, text in item.texts.items()}),
        trace_metadata={"mlflow.sourceRun": nested.run_id} if nested is not None else {},
        tags=target.clean({ITEM_TAG: item.id, RESULTS_TAG: str(target.results), "promptlab.run_id": item.run_id}),
    )
    return str(tracing.start_trace(info).trace_id)


def _traces(target: MlflowTarget) -> dict[str, tuple[str, set[str]]]:
    """Item id -> (trace id, the judgment keys its assessments hold) of the traces exported before."""
    found: dict[str, tuple[str, set[str]]] = {}
    token = None
    while True:
        page = target.client.search_traces(
            locations=[target.experiment_id], max_results=500, page_token=token, include_spans=False
        )
        for trace in page:
            info = trace.info
            if info.tags.get(RESULTS_TAG) != str(target.results) or ITEM_TAG not in info.tags:
                continue
            keys = {a.metadata.get(JUDGMENT_KEY) for a in info.assessments if a.metadata}
            found[info.tags[ITEM_TAG]] = (info.trace_id, {k for k in keys if k})
        token = page.token
        if not token:
            return found


__all__ = ["CRITIC", "ITEM_TAG", "JUDGMENT_KEY", "PEOPLE", "judgment_key", "log_judgments"]
