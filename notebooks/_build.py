"""Writes the notebooks in this folder from the cell sources below (no outputs, no execution counts).

    python notebooks/_build.py

Edit the sources here, not the .ipynb files, so that notebook changes stay reviewable. Each notebook
has a cell tagged `parameters` so papermill can inject values (`-p model fake/auto`), and runs top to
bottom under papermill with model "fake/auto" (tests) and "local/smollm2" (demo).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat import v4

HERE = Path(__file__).resolve().parent

ROOT_CELL = '''from pathlib import Path

from promptlab.ui.notebook import notebook_setup

# Work from the project root, wherever Jupyter started (relative paths and the call cache .promptlab/cache are
# the project's), and show promptlab's errors as their message, without a traceback (%tb prints it).
ROOT = notebook_setup()


def here(path):
    """A path relative to the project root (absolute paths are kept)."""
    return Path(path) if Path(path).is_absolute() else ROOT / path'''

RESULTS_ROOT_CELL = ROOT_CELL.replace(
    "ROOT = notebook_setup()",
    "# With no finished cell in results_dir yet (a fresh clone), stop here with one line saying what to run first.\n"
    "ROOT = notebook_setup(results=results_dir)",
)
"""The setup cell of a notebook that reads `results_dir` (03-06)."""


def notebook(*cells: tuple[str, str]) -> nbformat.NotebookNode:
    """A notebook from (kind, source) pairs; kind is "md", "code" or "parameters"."""
    nb = v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for kind, source in cells:
        if kind == "md":
            nb.cells.append(v4.new_markdown_cell(source))
        else:
            cell = v4.new_code_cell(source)
            if kind == "parameters":
                cell.metadata["tags"] = ["parameters"]
            nb.cells.append(cell)
    return stable_ids(nb)


def stable_ids(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Number the cell ids (nbformat draws random ones, which would change on every build)."""
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i}"
    return nb


EXPLORE = notebook(
    (
        "md",
        (
            "# Explore one loop\n\nPick a loop, a task and the models, set the finish threshold and the "
            "iteration cap, and press **Run** (**Stop**, or Kernel ▸ Interrupt, ends the run at once, keeping "
            "what it recorded; its best prompt is then measured on the test examples only when you press "
            "**Measure best prompt on test**). The log follows the run, one line per step; afterwards the critic's score and the dev "
            "accuracy per iteration, and the final prompt beside the original, appear below. The logic lives "
            "in `promptlab.ui.explorer`.\n\n"
            "The default tasks (`data/grounded_tasks.jsonl`) carry labelled examples, so every candidate's dev "
            "accuracy is measured: every loop runs on them, and the accuracy says whether a rewrite helped. "
            "`local/smollm2` is SmolLM2-135M, embedded so that everything runs offline: it is there to check "
            "the plumbing, not to improve prompts. The default run (P³RO on `sentiment`, 3 iterations) "
            "shows what it can show: the starting prompt's dev accuracy (its iteration 0 in the chart), rewrites "
            "that lose the `{input}` slot and fall near 0, and a critic whose expected (G-Eval) score does not "
            "follow them (P³RO may keep a worse rewrite because its critic scored it higher; the summary line "
            "says so). Read the dev accuracy. To watch a loop improve a prompt, type a "
            "stronger model (any litellm name, e.g. one served by Ollama) as generator and critic.\n\n"
            "Under papermill there is nobody to click: `-p autorun True` runs once with the parameters."
        ),
    ),
    (
        "parameters",
        """tasks_path = "data/grounded_tasks.jsonl"  # JSONL task file (relative to the repo root); with examples
loop = "p3ro"  # p3ro, creator_critic, pes, pcee; and, on tasks with examples: ape, opro, protegi, resample
task_id = ""  # empty: the first task
model = ""  # if set, it plays every role (fake/auto for a dry run)
generator_model = "local/smollm2"
critic_model = "local/smollm2"
score_mode = ""  # how the critic scores: expected (G-Eval) or sampled; empty: expected for a local critic
finish_threshold = 8.5  # 1.0-10.0
max_iterations = 3  # 1-10
max_tokens = 256  # cap on each reply of a loop's roles
eval_max_tokens = 64  # cap on each reply on a dev/test example (a label, a number, a date fit)
min_criteria = 0  # P³RO: fewest criteria the decomposer must give, 0-6 (0: P³RO's default)
autorun = False  # run once without a click (papermill)""",
    ),
    ("code", ROOT_CELL),
    (
        "code",
        """from promptlab.ui.explorer import load_explorer

explorer = load_explorer(here(tasks_path), loop=loop, task_id=task_id, model=model,
                         generator_model=generator_model, critic_model=critic_model, score_mode=score_mode,
                         finish_threshold=finish_threshold, max_iterations=max_iterations, max_tokens=max_tokens,
                         eval_max_tokens=eval_max_tokens, min_criteria=min_criteria)
explorer.display()""",
    ),
    (
        "code",
        """if autorun:
    from IPython.display import display

    last_run = await explorer.run(echo=lambda line: print(line, end=""))
    for output in explorer.result.outputs:  # also as cell output, which a saved notebook keeps
        display(output.get("data", {"text/plain": output.get("text", "")}), raw=True)
    print("final output:", last_run.final_output if last_run else None)""",
    ),
)

SWEEP = notebook(
    (
        "md",
        (
            "# Run a sweep\n\nLoads an experiment file (see `experiments/demo.yaml`), says how many runs it "
            "makes on which models, how many model calls and how long they should take (measured on this "
            "machine; the basis is in the line), runs every unfinished cell with a progress bar that counts "
            "finished runs (its time estimate follows from them) and shows the summary table. A sweep estimated "
            "above 5 minutes (or whose time has no basis) starts only with `confirm = True`: Run All otherwise "
            "stops after the plan, having made no model call, and says so (the model's time per call is measured by a short timed probe only once you confirm). "
            "While it runs the kernel is busy; Kernel > Interrupt stops it within a second and keeps what finished. Finished cells "
            "are skipped and calls already made are answered by the cache, so running this again resumes an "
            "interrupted sweep. `model` plays every role, pairings included (e.g. `fake/auto` for a dry run, which makes "
            "no local-model call; simulated critics `sim/...` make none either and are kept); the results then "
            "go to their own directory, results/NAME-MODEL."
        ),
    ),
    (
        "parameters",
        """experiment_path = "experiments/demo.yaml"
model = ""  # empty: the models of the experiment; fake/auto for a dry run (every role, pairings included)
executor = "inline"  # or "papermill": one notebook kernel per cell
workers = 2
out_dir = ""  # empty: results/NAME, or results/NAME-MODEL when model is set
confirm = False  # True: start a sweep estimated above 5 minutes (papermill: -p confirm True)""",
    ),
    ("code", ROOT_CELL),
    (
        "code",
        """import pandas as pd
from IPython.display import display

from promptlab.reports import readable_table, rounded, summary_table, trajectory_charts
from promptlab.sweeps import load_experiment, sweep
from promptlab.sweeps.estimate import plan_sweep, probe_first, require_confirmation

exp = load_experiment(here(experiment_path))
if model:
    exp = exp.with_models(model)
cells = exp.cells()
suffix = f"-{model.replace('/', '_')}" if model else ""
out = here(out_dir) if out_dir else ROOT / "results" / f"{exp.name}{suffix}"
# the runs, the model calls (counted by a dry run on fake/auto, a few seconds) and the time they should take
# (from the cells already finished in `out`, else from a timed probe of the model, which makes a few model
# calls: only once you have confirmed, so Run All makes no model call before it asks)
plan = plan_sweep(exp, out, workers, probe=probe_first(exp, confirm))  # scripts (fake/auto) are timed at once
print(plan.text)
display(rounded(pd.DataFrame([{"cell_id": c.cell_id, **c.params} for c in cells])))""",
    ),
    (
        "code",
        """# above 5 minutes (or with no estimate) only with confirm = True: else Run All stops here, saying so
require_confirmation(plan, confirm)
result = sweep(exp, out, executor=executor, workers=workers)
print(result)""",
    ),
    (
        "code",
        """import matplotlib.pyplot as plt

results = result.load()
display(readable_table(summary_table(results)))  # rounded; every column: summary_table(results)
trajectory_charts(results.trajectories)  # dev accuracy across configurations; a critic's score within that critic
plt.show()""",
    ),
)

COMPARE = notebook(
    (
        "md",
        (
            "# Compare configurations\n\nCharts over a results directory written by a sweep. Configurations are "
            "compared by grounded measures (dev and test accuracy); a critic's own score is drawn only within "
            "that critic, since critics' scales differ. Model pairings, trajectories, accuracy against cost, "
            "stop reasons, the final accuracy by finish threshold and iteration cap, and the summary table; a "
            "chart that would hold one number, or whose columns the sweep did not vary, is a sentence instead."
        ),
    ),
    ("parameters", '''results_dir = "results/demo"'''),
    ("code", RESULTS_ROOT_CELL),
    (
        "code",
        """import matplotlib.pyplot as plt
from IPython.display import display

from promptlab import reports
from promptlab.results import load

results = load(here(results_dir))
runs, traj = results.runs, results.trajectories
measure, no_measure = reports.run_measure(runs)
print(f"{len(results.cells)} cells, {len(runs)} runs, {len(traj)} trajectory rows")
display(reports.rounded(results.cells))  # rounded, NA as a dash, times to the minute; results.cells has them all""",
    ),
    (
        "code",
        """why = reports.pairing_why_not(runs)
if why:
    print(f"No pairing heatmap: {why}.")
else:
    reports.plot_pairing_heatmap(runs, value=reports.pairing_value(runs))
    plt.show()""",
    ),
    (
        "code",
        """reports.trajectory_charts(traj)  # dev accuracy across configurations; each critic's score in its own panel
plt.show()""",
    ),
    (
        "code",
        """cost = "cost_usd" if runs["cost_usd"].fillna(0).sum() > 0 else "tokens"
if measure:
    reports.plot_score_vs_cost(runs, x=cost, y=measure)
    plt.show()
else:
    print(f"No accuracy-against-cost chart: {no_measure}.")""",
    ),
    (
        "code",
        """why = reports.stop_reasons_why_not(runs)
if why:
    print(f"Stop reasons: {why}.")
else:
    reports.plot_stop_reasons(runs)
    plt.show()""",
    ),
    (
        "code",
        """if "finish_threshold" in runs.columns and measure:
    hue = "max_iterations" if "max_iterations" in runs.columns else None
    reports.plot_final_by(runs, x="finish_threshold", hue=hue, y=measure)
    plt.show()
else:
    why = "the sweep has no finish_threshold column" if measure else no_measure
    print(f"No chart by finish threshold: {why}.")""",
    ),
    (
        "code",
        """# rounded, and only the columns to compare by (every column, unrounded: reports.summary_table(results))
display(reports.readable_table(reports.summary_table(results)))""",
    ),
    ("md", "## Browse the runs\n\nPick a cell and a run, then step through its iterations."),
    (
        "code",
        """from promptlab.ui.browser import RunBrowser

RunBrowser(here(results_dir)).display()""",
    ),
)

RUNS = notebook(
    (
        "md",
        (
            "# Browse runs\n\nPick a cell and a run of a results directory, then step through its "
            "iterations: the candidate with a diff against the previous one, the scores and justifications, "
            "the reflection, the decision and its reason, the grounded score, and the tokens and cost of "
            "every step."
        ),
    ),
    ("parameters", '''results_dir = "results/demo"'''),
    ("code", RESULTS_ROOT_CELL),
    (
        "code",
        """from promptlab.ui.browser import RunBrowser

browser = RunBrowser(here(results_dir))
browser.display()""",
    ),
)


FINDINGS = notebook(
    (
        "md",
        (
            "# Findings\n\nWhat a grounded sweep says, each answer in a sentence with its n and 95% CI "
            '("Inconclusive: the CI spans 0" when it does): did refinement help (the returned prompt against '
            "the starting prompt on the test split), when to stop (which finish threshold and iteration cap, "
            'by truncating the logged runs, no model calls; cap 0 is "do not refine"), and can the critic '
            "be trusted (its own score against the dev accuracy of the same candidate). The functions are in "
            "`promptlab.analysis`. A results directory without grounded data (tasks without examples) says so "
            "instead."
        ),
    ),
    ("parameters", '''results_dir = "results/demo"'''),
    ("code", RESULTS_ROOT_CELL),
    (
        "code",
        """import matplotlib.pyplot as plt
from IPython.display import Markdown, display

from promptlab import analysis, reports
from promptlab.reports import findings, findings_markdown
from promptlab.results import load

results = load(here(results_dir))
found = findings(results)
print(f"{len(results.runs)} runs; grounded data: {'yes' if found.grounded else 'no'}")
display(Markdown("\\n".join(findings_markdown(found))))""",
    ),
    ("md", "## 1. Did refinement help? Test-split gain per configuration, and paired differences"),
    (
        "code",
        """if found.deltas.empty:
    print("no test-split deltas (no grounded data)")
else:
    display(reports.rounded(found.deltas))  # numbers at 3 significant digits; found.deltas has them all
    reports.plot_forest(found.deltas, title="Test-split gain of the returned prompt over the starting prompt",
                        xlabel="test accuracy, returned minus starting prompt (95% CI)")
    plt.show()
    display(reports.rounded(analysis.compare(results.runs)))""",
    ),
    (
        "md",
        (
            "## 2. When to stop? Counterfactual stopping: threshold x cap\n\nPer configuration, the mean dev "
            "accuracy of the prompt each rule returns and its mean cost, each on one colour scale shared by "
            "every configuration; cap 0 returns the starting prompt."
        ),
    ),
    (
        "code",
        """configs = found.counterfactual["config"].nunique() if len(found.counterfactual) else 1
fig = plt.figure(figsize=(11, 3.6 * configs + 1))
reports.plot_counterfactual_grid(found.counterfactual, fig)
plt.show()""",
    ),
    ("md", "## 3. Can the critic be trusted? Its own score against the dev accuracy of the same candidate"),
    (
        "code",
        """if found.calibration.empty:
    print("no calibration (no iteration has both a critic and a grounded score)")
else:
    display(reports.rounded(reports.critics_named(found.calibration)))  # critics named as in every legend
    reports.plot_calibration(results.trajectories)
    plt.show()
    reports.plot_grounded_trajectories(results.trajectories)
    plt.show()""",
    ),
    (
        "md",
        (
            "## 4. People and the critic\n\nWhere people judged what the runs produced (notebooks/08_judge, "
            "`promptlab judgments import`): each critic, and the experiment's reference judge, against the people "
            "beside the people's agreement with each other, a verdict per critic, and the pairings ranked by people "
            "and by the reference judge (docs/people.md; `promptlab report` writes the same section). Without "
            "judgments, one line says so."
        ),
    ),
    (
        "code",
        """from promptlab.people import has_judgments, people_findings
from promptlab.people.text import findings_markdown
from promptlab.reports.people import plot_people_agreement

if not has_judgments(here(results_dir)):
    print("no judgments: nobody has judged these runs (notebooks/08_judge, or `promptlab judgments plan`)")
else:
    people = people_findings(here(results_dir), n_boot=500)
    display(Markdown("\\n".join(findings_markdown(people))))
    if not people.empty:
        plot_people_agreement(people.agreement, people.plan.kind)
        plt.show()""",
    ),
)


BASELINES = notebook(
    (
        "md",
        (
            "# Baselines at equal budget\n\nThe field's optimizers (OPRO, APE, ProTeGi, GEPA), a no-feedback control "
            "(resample) and the seed loops, compared at the same spend. Each logged run is truncated at each budget "
            "point: it returns the prompt its own selection rule held once it had spent that much (no model "
            "calls; `promptlab.analysis.equal_budget`). The curves give the mean dev and test accuracy of those "
            "prompts with 95% CIs; the table says which loop leads at which budget, paired over the same task and "
            'sample, with Holm-corrected p-values ("Inconclusive: the CI spans 0" when it does). '
            "`experiments/baselines.yaml` makes such a directory; docs/baselines.md reports a measured run."
        ),
    ),
    ("parameters", '''results_dir = "results/baselines"'''),
    ("code", RESULTS_ROOT_CELL),
    (
        "code",
        """import matplotlib.pyplot as plt
from IPython.display import Markdown, display

from promptlab import analysis, reports
from promptlab.reports.budget import budget_columns
from promptlab.reports.findings import budget_lines, findings
from promptlab.results import load

results = load(here(results_dir))
found = findings(results)
budget = found.budget
print(f"{len(results.runs)} runs of {results.runs['loop'].nunique()} loop(s); "
      f"budget in {budget.unit if budget else 'no unit: no run records its incumbents'}")
display(Markdown("\\n".join(budget_lines(found))))""",
    ),
    (
        "md",
        "## Score against spend\n\nOne line per configuration, with the 95% CI as a band (lines that coincide are "
        "drawn slightly apart, each with its own marker and style); a hollow marker is a point past the spend of a "
        "run its budget stopped (not exact).",
    ),
    (
        "code",
        """if budget is None:
    print("no equal-budget table (no run records what it would return at each spend)")
else:
    fig, (dev, test) = plt.subplots(2, 1, figsize=(9, 9), layout="constrained")  # readable at a notebook's width
    reports.plot_budget_curve(budget.table, "dev", ax=dev, budget=budget.unit)
    reports.plot_budget_curve(budget.table, "test", ax=test, budget=budget.unit)
    plt.show()
    display(reports.rounded(budget.table))  # numbers at 3 significant digits; budget.table has them all""",
    ),
    (
        "md",
        "## Paired differences at the largest budget\n\nEvery pair of configurations, paired over the same "
        "task and sample: test accuracy of what each run would return there, b minus a, Holm-corrected.",
    ),
    (
        "code",
        """if budget is not None and len(budget.table):
    point = float(budget.table["point"].max())
    by = budget_columns(results.runs, results.trajectories)
    print(f"at {point:,.0f} {budget.unit}")
    display(reports.rounded(analysis.compare_at_budget(results, point, budget.unit, by=by)))""",
    ),
    (
        "md",
        "## GEPA's search\n\nEach GEPA run's candidates by spend and dev score, each joined to the candidate it was "
        "made from (a merge has two parents): filled, kept in GEPA's pool and measured on the dev split; hollow, "
        "rejected on its minibatch (at its minibatch score); the step line, the dev score of the prompt the run "
        "would return at that spend (`reports.plot_search_tree`, from the trajectories' `parents` column).",
    ),
    (
        "code",
        """gepa_runs = results.runs[results.runs["loop"] == "gepa"]["run_id"].tolist()
if not gepa_runs:
    print("no GEPA run in this directory")
else:
    shown = gepa_runs[:3]
    fig, axes = plt.subplots(len(shown), 1, figsize=(9, 3.6 * len(shown)), layout="constrained", squeeze=False)
    for ax, run_id in zip(axes[:, 0], shown, strict=True):
        reports.plot_search_tree(results.trajectories, run_id, budget=budget.unit if budget else "tokens", ax=ax)
    plt.show()""",
    ),
)


CRITIC = notebook(
    (
        "md",
        (
            "# Can the critic be trusted? Its biases\n\nFive probes of the judge biases a refinement loop is "
            "exposed to, run on any results directory. Each gives an estimate with its n and a CI; a critic's "
            "intervals hold together at 95% (each at 99.4% for five probes, `ci_level`), so a critic with no bias is "
            'called biased on some probe at most 5% of the time. The verdict says "biased" only when the CI excludes 0 and "no evidence of bias" only when the CI lies inside a '
            "stated size (`promptlab.analysis.bias.MARGINS`), else inconclusive; fewer than 10 observations, or data "
            'that do not vary (an interval of width zero), give "not enough data". Two probes read the logs (no '
            "model call); three re-ask the critic on a sample of logged candidates, at most `budget` calls per "
            "model critic, through the call cache, so running this notebook again costs nothing. Simulated "
            "critics (`sim/...`) are re-asked without a call, on every candidate and pair, five draws each "
            "(averaged), and their tables show the size each bias was planted at (`planted`: 0 for sim/oracle "
            "and sim/noisy) and whether the CI covers it. A text the loops logged again at the same sample is "
            "one observation (a model critic answers it the same), and the length and padding probes use what "
            "the critic was shown (a loop's `history_chars` cuts it). docs/analysis.md (Critic biases) gives each "
            "probe's validity on simulated and on scripted model critics with a planted bias.\n\n"
            "**from** says where each interval came from: the logs or re-asks. Two columns say what a row "
            "cannot: **detectable**, the smallest bias the probe finds with 80% power at its n (an inconclusive "
            'row above the stated size says "underpowered", with about the n that would reach it), and **scores '
            "at 1 / 10**, the share of the probe's scores at the scale's ends: above 10% together the estimate "
            'likely understates the bias (saturated), and the row never says "no evidence of bias".'
        ),
    ),
    (
        "parameters",
        """results_dir = "results/demo"
budget = 250  # model calls per model critic for the re-asks (0: the logged probes only)""",
    ),
    ("code", RESULTS_ROOT_CELL),
    (
        "code",
        """import matplotlib.pyplot as plt
from IPython.display import Markdown, display

from promptlab.analysis.bias import bias_table, flip_rate
from promptlab.analysis.bias_asks import probe_frames
from promptlab.reports import critics_named, rounded
from promptlab.reports.bias_charts import plot_biases
from promptlab.reports.findings import bias_markdown
from promptlab.results import load
from promptlab.ui.notebook import require_results

results = load(require_results(here(results_dir)))  # on a fresh clone: stops here, saying to run scripts/demo first
frames = probe_frames(results, budget=budget)
table = bias_table(frames)
print(f"{len(results.runs)} runs; critics: {', '.join(sorted(critics_named(table)['critic'].unique())) or 'none'}")
display(Markdown("\\n".join(bias_markdown(table) or ["No candidate has both a critic score and a dev score."])))""",
    ),
    (
        "md",
        (
            "## Power and saturation\n\nPer critic and probe: the smallest bias detectable with 80% power "
            "(`detectable`, in the probe's unit) against the stated size (`margin`), and the share of the "
            "probe's scores at 1 and at 10 (`at_bottom`, `at_top`; NA for order, which reads verdicts). An "
            "inconclusive row above its margin is underpowered; one above 10% at the ends likely understates."
        ),
    ),
    (
        "code",
        """limits = table[["critic_model", "probe", "estimate", "n", "detectable", "margin", "at_bottom", "at_top"]]
unsure = table["finding"].str.startswith("Inconclusive")
display(rounded(critics_named(limits.assign(underpowered=unsure & (limits["detectable"] > limits["margin"])))))""",
    ),
    (
        "md",
        (
            "## From the logs: length and self-inflation\n\n**Length**: does the critic give longer candidates "
            "higher scores at the same dev accuracy? The estimate is the slope of score on characters / 100 in "
            "a regression with one level per dev accuracy and the iteration as covariates (points per 100 "
            "characters; CI clustered by run). **Self-inflation**: along each run, does the critic's score rise "
            "when the dev accuracy does not? The estimate is the intercept of the score change on the accuracy "
            "change (and the length change) over consecutive iterations (points per step). Left: each "
            "candidate's length and score as deviations from the mean of its accuracy level; right: one point "
            "per step, the estimate at no accuracy change in red."
        ),
    ),
    (
        "code",
        """logged = frames["length"]
if logged.empty:
    print("no candidate has both a critic score and a dev score")
else:
    fig = plt.figure(figsize=(11, 3.8 * logged["critic_model"].nunique() + 0.5))
    plot_biases(frames, table, fig)
    plt.show()""",
    ),
    (
        "md",
        (
            "## By re-asking: padding, anchoring and order\n\n**Padding**: the same candidate re-scored as it "
            "is and with neutral sentences appended (about 300 characters, same meaning, drawn for each candidate "
            "from `promptlab.analysis.bias_padding.PAD_BANK`): the "
            "score change per 100 characters added. **Anchoring**: the same candidate re-scored with a previous "
            "score shown in the critic's context (drawn at random from 2-9, so it is independent of the "
            "candidate's quality): the slope of the score change on the shown score, the weight the critic "
            "gives it. **Order**: two candidates of a run judged by the critic's model as a pairwise judge, in "
            "both orders: the first-position preference (0: none, 1: always the first shown) and the share of "
            "pairs whose verdict changes candidate when the order is swapped."
        ),
    ),
    (
        "code",
        """for probe in ("padding", "anchoring", "order"):
    print(f"{probe}: {len(frames[probe])} re-asks")
    display(rounded(critics_named(frames[probe].head(8))))
for critic, pairs in critics_named(frames["order"]).groupby("critic"):
    rate, n = flip_rate(pairs)
    print(f"{critic}: {'no pairs' if rate is None else f'{rate:.0%} of {n} pairs flip under swapped order'}")
if len(frames["skipped"]):
    display(rounded(critics_named(frames["skipped"])))""",
    ),
)


JUDGE = notebook(
    (
        "md",
        (
            "# Judge: people as the ground truth\n\nWhere nothing is labelled, people are the yardstick. Judge "
            "what the runs of a results directory produced, blind: for each item, two texts for the same input "
            "(what the starting and the returned prompt gave, in a random order you are not told), or one text "
            "to rate 1-10. Type your name and press Start; keys: **a** / **b** / **t** (as good) / **s** (skip) "
            "for pairs, **1**-**9** and **0** (10) for ratings. Every judgment is stored at once in "
            "`<results>/judgments/<name>.jsonl`, so a restarted kernel or a closed tab resumes where you stopped. "
            "About one item in ten comes back later, to measure how consistent each of us is. The plan is drawn "
            "on first use (pairs, seed 0); `promptlab judgments plan RESULTS --kind rating` draws another."
        ),
    ),
    (
        "parameters",
        """results_dir = "results/people"
person = ""  # your name (letters, digits, '.', '_', '-'); empty: type it below""",
    ),
    ("code", RESULTS_ROOT_CELL),
    (
        "code",
        """from promptlab.ui.judging import JudgingWidget
from promptlab.ui.notebook import require_results

widget = JudgingWidget(require_results(here(results_dir)), person=person or None)
_ = widget.show()""",
    ),
    (
        "md",
        (
            "## What the judgments say\n\nRun this once people have judged: each critic against the people, the "
            "people against each other (the ceiling) and themselves (the repeats), a verdict per critic, whether "
            "refinement helped by people's judgment, and the people's own position preference "
            "(`promptlab judgments summary` prints the same)."
        ),
    ),
    (
        "code",
        """from IPython.display import Markdown, display

from promptlab.people import has_judgments, people_findings
from promptlab.people.text import findings_markdown

if has_judgments(here(results_dir)):
    display(Markdown("\\n".join(findings_markdown(people_findings(here(results_dir), n_boot=500)))))""",
    ),
)


def main() -> None:
    """Write the notebooks next to this script."""
    from promptlab.sweeps.notebook import TEMPLATE, run_cell_notebook

    run_cell = stable_ids(run_cell_notebook())
    for path, nb in [
        *(
            (HERE / f"{name}.ipynb", nb)
            for name, nb in (
                ("01_explore", EXPLORE),
                ("02_sweep", SWEEP),
                ("03_compare", COMPARE),
                ("04_findings", FINDINGS),
                ("05_runs", RUNS),
                ("06_baselines", BASELINES),
                ("07_critic", CRITIC),
                ("08_judge", JUDGE),
                ("run_cell", run_cell),
            )
        ),
        (TEMPLATE, run_cell),
    ]:  # the package's copy of run_cell
        nbformat.validate(nb)
        path.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
