"""The reference judge (issue #49, item 4): one fixed model, named in the experiment file, judges every planned pair
blind through the real call path (scripted models), its judgments stored apart from people's and resumable; the
report ranks the pairings by it and measures it against the people like a critic.

The planted truth: one pairing's generator (WRITER) writes prompts whose answers are GOOD, the other's returned
prompts make the target echo the rewriting instruction (worse than its start). A judge and people who see that
quality rank the WRITER pairing first; a contrary judge ranks it last and agrees less with the people."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from judging import CRITICS, ROOT, WRITER, better_side, write_open_ended_sweep

import promptlab
from promptlab.cli import main
from promptlab.errors import ConfigError, PromptlabWarning
from promptlab.people import add_judgments, make_plan, people_findings, read_judgments, read_plan, write_plan
from promptlab.people.reference import REFERENCE_PROMPT, read_reference, reference_path, run_reference
from promptlab.people.storage import Judgment
from promptlab.people.text import NOTHING_RANKS, findings_markdown
from promptlab.people.verdicts import AS_OFTEN, LESS
from promptlab.sweeps.experiment import Experiment

SHOWN = re.compile(r"Text A:\n<<<\n(.*?)\n>>>\n\nText B:\n<<<\n(.*?)\n>>>", re.S)
WRITER_PAIRING = f"{WRITER} / {CRITICS[1]}"
AUTO_PAIRING = f"fake/auto / {CRITICS[0]}"


def _texts(messages: list[dict[str, Any]]) -> tuple[str, str]:
    found = SHOWN.search(messages[-1]["content"])
    assert found is not None, messages[-1]["content"][:200]
    return found.group(1), found.group(2)


def _judge(contrary: bool = False) -> Any:
    """A scripted judge that prefers the text of higher planted quality (the lower one when `contrary`)."""

    def respond(messages: list[dict[str, Any]]) -> str:
        first, second = _texts(messages)
        side = better_side({"start": second, "returned": first} if contrary else {"start": first, "returned": second})
        better = {"returned": "B", "start": "A", "tie": "tie"}[side]
        return json.dumps({"better": better, "reason": "planted"})

    return respond


def _register_judges() -> None:
    promptlab.scripted("ref-truth", respond=_judge())
    promptlab.scripted("ref-contrary", respond=_judge(contrary=True))
    promptlab.scripted("ref-broken", respond=lambda messages: "I would pick the first one, it reads better.")


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _register_judges()
    results = tmp_path_factory.mktemp("reference") / "results"
    return write_open_ended_sweep(results, writers=("fake/auto", WRITER), reference_judge="fake/ref-truth")


@pytest.fixture
def results(sweep_dir: Path, tmp_path: Path) -> Path:
    _register_judges()
    copy = tmp_path / "results"
    shutil.copytree(sweep_dir, copy)
    write_plan(copy, make_plan(copy, seed=3, repeat_every=0))
    return copy


def _people(results: Path) -> int:
    """ann and bob judge by the planted quality; bob says the other side on every fifth item."""
    rows = []
    for k, item in enumerate(read_plan(results).items):
        for person in ("ann", "bob"):
            side = better_side(item.texts)
            if person == "bob" and k % 5 == 0:
                side = {"start": "returned", "returned": "start", "tie": "start"}[side]
            value = "tie" if side == "tie" else "A" if item.order[0] == side else "B"
            rows.append(Judgment(item=item.id, person=person, value=value, shown=item.order, source="code"))
    return add_judgments(results, rows)


def test_the_planted_judge_ranks_the_pairings_and_agrees_with_the_people(results: Path) -> None:
    assert _people(results) == 48
    done = run_reference(results)  # the experiment file's reference_judge
    assert (done.judge, done.judged, done.missing, done.already) == ("fake/ref-truth", 24, [], 0)
    assert done.path == results / "judgments" / "reference" / "judge.jsonl"
    assert run_reference(results, "fake/ref-contrary").judged == 24
    found = people_findings(results, n_boot=300)
    ranked = {
        (r["judge"], r["pairing"]): (r["rank"], r["returned_share"], r["items"])
        for r in found.reference.to_dict("records")
    }
    assert ranked[("fake/ref-truth", WRITER_PAIRING)] == (1, 1.0, 12)
    assert ranked[("fake/ref-truth", AUTO_PAIRING)] == (2, 0.0, 12)
    assert ranked[("fake/ref-contrary", AUTO_PAIRING)][:2] == (1, 1.0)
    people_rank = dict(zip(found.refinement["pairing"], found.refinement["rank"], strict=True))
    assert people_rank == {WRITER_PAIRING: 1, AUTO_PAIRING: 2}
    verdicts = dict(zip(found.verdicts["critic"], found.verdicts["verdict"], strict=True))
    assert verdicts["fake/ref-truth (reference judge)"] == AS_OFTEN
    assert verdicts["fake/ref-contrary (reference judge)"] == LESS
    kappa = {(r["critic"], r["comparison"]): r["corrected"] for r in found.agreement.to_dict("records")}
    truth, contrary = "fake/ref-truth (reference judge)", "fake/ref-contrary (reference judge)"
    # the planted judge is ann exactly, so it agrees with the people more than bob agrees with ann
    assert kappa[truth, "critic vs people"] > kappa[truth, "people vs people"] > 0.5
    assert kappa[contrary, "critic vs people"] < 0
    assert {j.person for j in read_judgments(results).judgments} == {"ann", "bob"}


def test_the_judge_is_blind_and_the_order_is_drawn_and_recorded(results: Path) -> None:
    judge = promptlab.scripted("ref-truth", respond=_judge())
    run_reference(results, "fake/ref-truth")
    records = read_reference(results).judgments
    called = [r for r in records if not r.cache_hit]  # two runs can give the same pair: the cache answers the second
    assert len(records) == 24 and len(judge.prompts) == len(called) > 12
    for text in judge.prompts:
        assert not any(word in text for word in ("critic", "pairing", "creator", "people", "returned", "start"))
    assert {tuple(r.shown) for r in records} == {("start", "returned"), ("returned", "start")}
    plan = read_plan(results)
    for record, text in zip(called, judge.prompts, strict=True):  # one prompt for every pairing: input, two texts
        item = plan.item(record.item)
        first, second = (item.texts[side] for side in record.shown)
        assert text == REFERENCE_PROMPT.format(input=item.input, first=first, second=second)


def test_an_unparseable_reply_is_missing_with_its_error_never_a_value(results: Path) -> None:
    done = run_reference(results, "fake/ref-broken")
    assert done.judged == 0 and len(done.missing) == 24
    records = read_reference(results).judgments
    assert all(r.value is None and r.error and r.error.startswith("ParseError: fake/ref-broken") for r in records)
    found = people_findings(results, n_boot=100)
    assert found.reference.empty and found.reference_missing == {"fake/ref-broken": 24}
    text = "\n".join(findings_markdown(found))
    assert NOTHING_RANKS in text and "- fake/ref-broken left 24 planned item(s) missing, judged none." in text


def test_a_killed_run_resumes_and_a_missing_item_is_asked_again(results: Path) -> None:
    promptlab.scripted("ref-flaky", [RuntimeError("server down")], respond=_judge())
    stored: list[str] = []

    def kill_after_five(record: Any) -> None:
        stored.append(record.item)
        if len(stored) == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_reference(results, "fake/ref-flaky", on_item=kill_after_five)
    first = read_reference(results).judgments
    assert [r.item for r in first] == stored  # every judgment made before the kill is stored
    assert first[0].value is None and "ProviderError: fake/ref-flaky" in str(first[0].error)
    assert "server down" in str(first[0].error) and all(r.value is not None for r in first[1:])
    lines = reference_path(results).read_text().splitlines()
    lines[1] = lines[1].replace('"value":"', '"value":"maybe-')  # a damaged line costs that line
    reference_path(results).write_text("\n".join(lines) + "\n")
    with pytest.warns(PromptlabWarning, match=r"reference/judge.jsonl:2: not a reference judgment"):
        done = run_reference(results, "fake/ref-flaky")
    assert (done.already, done.judged, done.missing) == (3, 21, [])  # the missing and the damaged asked again
    latest = read_reference(results, warn=False).latest("fake/ref-flaky")
    assert set(latest) == {i.id for i in read_plan(results).items}
    assert all(r.value is not None for r in latest.values())


def test_the_command_runs_the_experiments_judge_and_the_report_ranks_by_it(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["judgments", "reference", str(results)]) == 0
    out = capsys.readouterr().out
    assert "24 item(s) judged by fake/ref-truth now, 0 missing, 0 judged before" in out
    assert main(["judgments", "reference", str(results)]) == 0
    assert "0 item(s) judged by fake/ref-truth now, 0 missing, 24 judged before" in capsys.readouterr().out
    assert main(["judgments", "reference", str(results), "--model", "fake/ref-broken"]) == 0
    said = capsys.readouterr()
    assert "0 item(s) judged by fake/ref-broken now, 24 missing, 0 judged before" in said.out
    assert "  missing i" in said.out and ": ParseError: fake/ref-broken gave no valid ReferenceVerdict" in said.out
    assert "  24: i" in said.err  # one progress line per judgment stored
    assert main(["report", str(results), "--bias-budget", "0"]) == 0
    section = (results / "report" / "summary.md").read_text().split("## People and the critic", 1)[1]
    assert "Pairings ranked by the reference judge fake/ref-truth" in section
    assert f"| 1 | {WRITER_PAIRING} | 12 | 1.000 [1.000, 1.000] |" in section
    assert "- fake/ref-broken left 24 planned item(s) missing, judged none." in section  # named, ranks nothing
    assert "Pairings ranked by the reference judge fake/ref-broken" not in section
    assert "measured against people once people judge" in section
    _people(results)
    assert main(["report", str(results), "--bias-budget", "0"]) == 0
    section = (results / "report" / "summary.md").read_text().split("## People and the critic", 1)[1]
    assert "| fake/ref-truth (reference judge) | critic vs people | 24 | 48 |" in section
    assert "- **fake/ref-truth (reference judge)**: agrees with people as often" in section


def test_the_command_refuses_by_name_before_any_call(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (results / "experiment.yaml").read_text().replace("reference_judge: fake/ref-truth\n", "")
    (results / "experiment.yaml").write_text(text)
    assert main(["judgments", "reference", str(results)]) == 2
    assert "no reference judge: name one with `reference_judge: <model>`" in capsys.readouterr().err
    assert main(["judgments", "reference", str(results), "--model", "sim/oracle"]) == 2
    assert "reference judge: 'sim/oracle' is a simulated critic" in capsys.readouterr().err
    write_plan(results, make_plan(results, kind="rating"))
    assert main(["judgments", "reference", str(results), "--model", "fake/ref-truth"]) == 2
    assert "the reference judge compares pairs" in capsys.readouterr().err
    assert not reference_path(results).exists()


def test_the_experiment_field_is_checked_at_load() -> None:
    promptlab.scripted("dry-run")
    base = {"name": "x", "loops": ["creator_critic"], "tasks": str(ROOT / "data" / "prompt_tasks.jsonl")}
    base["config"] = {"model": "fake/auto"}
    with pytest.raises(ConfigError, match=r"reference_judge: 'fake/nobody': Unknown model"):
        Experiment.from_dict({**base, "reference_judge": "fake/nobody"})
    with pytest.raises(ConfigError, match=r"reference_judge: 'sim/oracle' is a simulated critic"):
        Experiment.from_dict({**base, "reference_judge": "sim/oracle"})
    exp = Experiment.from_dict({**base, "reference_judge": "fake/auto"})
    assert "reference_judge: fake/auto" in exp.to_yaml()
    assert Experiment.from_dict({**base}).cells() == exp.cells()  # not part of the cells' identity
    assert exp.with_models("fake/dry-run").reference_judge == "fake/dry-run"  # a dry run calls no other model


def test_an_item_the_critic_has_no_view_of_is_left_out_of_its_agreement(results: Path) -> None:
    plan = read_plan(results)
    blind = next(i for i in plan.items if i.critic == CRITICS[0])
    blind.critic_scores["start"] = None  # e.g. a run whose starting prompt the critic never scored
    write_plan(results, plan)
    _people(results)
    run_reference(results)
    found = people_findings(results, n_boot=100)
    rows = found.agreement[found.agreement["comparison"] == "critic vs people"]
    items = dict(zip(rows["critic"], rows["items"], strict=True))
    assert items == {CRITICS[0]: 11, CRITICS[1]: 12, "fake/ref-truth (reference judge)": 24}


def test_a_judge_named_by_an_alias_of_the_experiment_file_resolves(results: Path) -> None:
    text = (results / "experiment.yaml").read_text().replace("reference_judge: fake/ref-truth\n", "")
    (results / "experiment.yaml").write_text(text + "models:\n  house-judge: {model: fake/ref-truth}\n")
    assert run_reference(results, "house-judge").judged == 24  # the alias, registered from the results' file
    (results / "experiment.yaml").write_text(text + "reference_judge: fake/nobody\n")
    with pytest.raises(ConfigError, match=r"experiment.yaml: reference_judge: 'fake/nobody': Unknown model"):
        run_reference(results)
