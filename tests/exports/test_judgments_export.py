"""People's judgments in the exports, read back with each library: in MLflow as HUMAN-sourced assessments on one
trace per judged item (MlflowClient), and in the Inspect logs as a second score on each judged sample
(`inspect_ai.log.read_eval_log`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from judging import write_open_ended_sweep

from promptlab.exports.inspect_log import export_inspect
from promptlab.exports.mlflow_export import default_tracking_uri, export_mlflow
from promptlab.people import add_judgments, make_plan, read_judgments, read_plan, write_plan
from promptlab.people.items import LABELS
from promptlab.people.judged import pair_label

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The open-ended sweep with a plan and 3 judgments of each of 6 items by two people (one comment)."""
    root = write_open_ended_sweep(tmp_path_factory.mktemp("judged") / "results")
    write_plan(root, make_plan(root, seed=2))
    items = read_plan(root).items[:6]
    rows = [{"item": i.id, "person": p, "value": v} for i in items for p, v in (("ann", "A"), ("bob", "B"))]
    rows[0]["comment"] = "the second one rambles"
    add_judgments(root, rows)
    add_judgments(root, [{"item": items[0].id, "person": "cy", "value": "tie"}])
    return root


def test_mlflow_holds_each_judgment_as_human_feedback_and_a_second_export_adds_none(
    results: Path, tmp_path: Path
) -> None:
    mlflow = pytest.importorskip("mlflow")
    copy = tmp_path / "results"
    shutil.copytree(results, copy)
    summary = export_mlflow(copy)
    assert summary.judgments == 13 and "13 judgment(s) logged" in str(summary)
    client = mlflow.MlflowClient(default_tracking_uri(copy))
    traces = client.search_traces(locations=[summary.experiment_id], max_results=100, include_spans=False)
    by_item = {t.info.tags["promptlab.item"]: t for t in traces}
    plan = read_plan(copy)
    assert len(by_item) == 6
    for j in read_judgments(copy).judgments:
        trace = by_item[j.item]
        human = [
            a for a in trace.info.assessments if a.source.source_type == "HUMAN" and a.source.source_id == j.person
        ]
        assert len(human) == 1
        label, _ = pair_label(j.value, j.shown)
        assert human[0].value == LABELS[int(label)]  # type: ignore[arg-type]
        assert human[0].name == "people_preference" and human[0].metadata["shown"] == str(j.shown).replace("'", '"')
        critic = [a for a in trace.info.assessments if a.source.source_type == "LLM_JUDGE"]
        assert len(critic) == 1 and critic[0].source.source_id == plan.item(j.item).critic
        assert trace.info.tags["promptlab.run_id"] == plan.item(j.item).run_id
        nested = client.get_run(trace.info.trace_metadata["mlflow.sourceRun"])
        assert nested.data.tags["promptlab.run_id"] == plan.item(j.item).run_id
    commented = [a for t in traces for a in t.info.assessments if a.rationale]
    assert [a.rationale for a in commented] == ["the second one rambles"]
    again = export_mlflow(copy)
    assert again.judgments == 0 and again.created == 0
    assert len(client.search_traces(locations=[summary.experiment_id], max_results=100, include_spans=False)) == 6


def test_inspect_logs_carry_the_peoples_judgments_as_a_second_score(results: Path, tmp_path: Path) -> None:
    log_mod = pytest.importorskip("inspect_ai.log")
    paths = export_inspect(results, tmp_path / "logs")
    plan = read_plan(results)
    judged = {j.item for j in read_judgments(results).judgments}
    runs = {plan.item(i).run_id: plan.item(i) for i in judged}
    seen = 0
    for path in paths:
        log = log_mod.read_eval_log(str(path))
        item = runs.get(log.eval.run_id)
        if item is None:
            assert all("people" not in (s.scores or {}) for s in log.samples or [])
            continue
        people = [s for s in log.samples or [] if "people" in (s.scores or {})]
        assert len(people) == 1
        score = people[0].scores["people"]
        mine = [j for j in read_judgments(results).judgments if j.item == item.id]
        expected = sum(
            1.0 if pair_label(j.value, j.shown)[0] == 2 else 0.5 if j.value == "tie" else 0.0 for j in mine
        ) / len(mine)
        assert score.value == pytest.approx(expected)
        assert score.metadata["judgments"] == len(mine) and score.metadata["item"] == item.id
        seen += 1
    assert seen == 6
