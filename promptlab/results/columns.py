"""The documented columns of the results frames: name -> (pandas nullable dtype, description).

`promptlab.results.load` gives `Results.trajectories` (TRAJECTORY_COLUMNS), `Results.runs` (RUN_COLUMNS)
and `Results.cells` (CELL_COLUMNS), each with the cell's params as extra columns. Dtypes do not depend on
the data: an empty result has the same columns and dtypes as a full one.
"""

from __future__ import annotations

Columns = dict[str, tuple[str, str]]

TRAJECTORY_COLUMNS: Columns = {
    "cell_id": ("string", "Sweep cell the run belongs to."),
    "run_id": (
        "string",
        "Unique run id (Run.run_id, a uuid that differs between executions of a cell; never orders rows).",
    ),
    "loop": ("string", "Loop name."),
    "task_id": ("string", "Task id."),
    "sample": ("Int64", "Replicate index of the run."),
    "iteration": (
        "Int64",
        "Iteration number: 1, 2, ... for the loop's rewrites, 0 for the starting prompt "
        "scored as candidate 0 (grounded P³RO and Creator/Critic with include_start).",
    ),
    "criterion": ("string", "What this row's score judged; <NA> for an iteration without scores (one row)."),
    "judge": ("string", "Who gave the score (a model name or 'critic[k]'), <NA> if not recorded."),
    "score": ("Float64", "The judge's own score; <NA> when the judge's output was unusable (never a default number)."),
    "mode": (
        "string",
        "How this row's score was produced (Score.mode): 'sampled' (the number the judge wrote), "
        "'expected' (G-Eval: probability-weighted over 1-10), 'simulated' (a sim/ critic), "
        "'fallback' (parse_failure_score); <NA> when missing or not recorded.",
    ),
    "average": ("Float64", "The iteration's comparable score (Iteration.average); repeated on its rows."),
    "decision": ("string", "What the loop decided after the iteration; repeated on its rows."),
    "stop_reason": ("string", "Why the RUN stopped (the same on all of a run's rows)."),
    "input_tokens": (
        "Int64",
        "Input tokens of the iteration's calls (original calls, also for cache hits); "
        "ITERATION-LEVEL, repeated on each criterion row: dedupe with iteration_frame().",
    ),
    "output_tokens": ("Int64", "Output tokens of the iteration's calls; iteration-level like input_tokens."),
    "cost_usd": ("Float64", "Cost of the iteration's calls; <NA> if a call's price is unknown; iteration-level."),
    "calls": ("Int64", "Model calls made in the iteration (cache hits and failures included); iteration-level."),
    "cache_hits": ("Int64", "Calls of the iteration answered from the cache; iteration-level."),
    "n_errors": ("Int64", "Errors recorded in the iteration; iteration-level."),
    "decision_score": (
        "Float64",
        "The 1-10 score the loop's router used (Iteration.decision_score: the critic "
        "average, or 1 + 9 x grounded_score with score_source 'grounded'); iteration-level. NOT the "
        "critic's score: use critic_score to study the critic.",
    ),
    "critic_score": (
        "Float64",
        "The critic's own score of the iteration's candidate (Iteration.average: the mean "
        "of its criterion scores, or the aggregate of the critics' scores), sampled or expected as "
        "score_mode says; never derived from the grounded score; iteration-level.",
    ),
    "grounded_score": (
        "Float64",
        "The iteration's candidate measured on the dev split: mean scorer value in "
        "[0, 1]; <NA> for a task without examples; iteration-level.",
    ),
    "grounded_n": ("Int64", "Dev examples that got a score (errors excluded); iteration-level."),
    "grounded_ci_low": ("Float64", "Lower end of grounded_score's 95% CI (Wilson for 0/1, else bootstrap)."),
    "grounded_ci_high": ("Float64", "Upper end of grounded_score's 95% CI."),
    "score_source": (
        "string",
        "What the router decided on: critic, grounded or both (config score_source); <NA> for loops without one.",
    ),
    "critic_model": ("string", "Model of the judge that gave this row's score (the critic or evaluator)."),
    "cum_calls": (
        "Int64",
        "Model calls the run had made towards its budget when the iteration was decided "
        "(Iteration.spent: setup included, cache hits included, test-split measurement left out); "
        "iteration-level; <NA> for records made before budgets.",
    ),
    "cum_tokens": (
        "Int64",
        "Tokens (input + output, as the original calls reported them) the run had spent "
        "towards its budget when the iteration was decided (Iteration.spent); iteration-level.",
    ),
    "cum_cost_usd": (
        "Float64",
        "Cost the run had spent towards its budget when the iteration was decided; <NA> if "
        "a call's price is unknown; iteration-level.",
    ),
    "incumbent": (
        "Int64",
        "The iteration whose candidate the run would return if it stopped after this one "
        "(Iteration.incumbent: the loop's own selection rule); <NA> for loops that return no prompt; "
        "iteration-level.",
    ),
    "test_score": (
        "Float64",
        "The iteration's candidate on the test split (Iteration.test: measured after the "
        "loop for every incumbent when test_incumbents is on); <NA> otherwise; iteration-level.",
    ),
    "test_n": ("Int64", "Test examples that candidate got a score on."),
    "test_ci_low": ("Float64", "Lower end of test_score's 95% CI."),
    "test_ci_high": ("Float64", "Upper end of test_score's 95% CI."),
    "parents": (
        "string",
        "The iterations the candidate was made from (Iteration.parents), comma-separated: '3', or '2,5' for "
        "GEPA's merge; <NA> where none is recorded (the start, loops without a lineage); with `iteration`, "
        "the edges of the search tree; iteration-level.",
    ),
}
"""Trajectories: one row per run x iteration x criterion (an unscored iteration still gives one row).
Setup and final phases (planning, polish) are not in any iteration: their tokens are only in RUN_COLUMNS."""

RUN_COLUMNS: Columns = {
    "cell_id": ("string", "Sweep cell the run belongs to."),
    "run_id": (
        "string",
        "Unique run id (Run.run_id, a uuid that differs between executions of a cell; never orders rows).",
    ),
    "loop": ("string", "Loop name."),
    "task_id": ("string", "Task id."),
    "sample": ("Int64", "Replicate index of the run."),
    "generator_model": ("string", "Model of the proposing roles (config generator_model, else model)."),
    "critic_model": ("string", "Model of the judging roles (config critic_model, else model)."),
    "final_score": (
        "Float64",
        "The LAST iteration's average, even when that is <NA> (compare best_score); <NA> for a run without iterations.",
    ),
    "best_score": (
        "Float64",
        "The average of best_iteration (Run.best_score): the highest average, except "
        "with score_source 'grounded', where the iteration is chosen by its decision score.",
    ),
    "best_iteration": (
        "Int64",
        "The iteration the loop ranks best (Run.best_iteration: by decision score for "
        "p3ro and creator_critic, by average otherwise; ties go to the earliest).",
    ),
    "final_output_score": (
        "Float64",
        "Mean of the present scores the loop gave its final output "
        "(Run.final_scores, e.g. a judge's grade); <NA> if none.",
    ),
    "iterations_used": (
        "Int64",
        "Number of iterations the run made (iteration 0, the starting prompt scored as "
        "candidate 0, is not one: it is no rewrite).",
    ),
    "stop_reason": ("string", "Why the loop stopped."),
    "calls": ("Int64", "Model calls of the run (Run.totals: cache hits and failures included)."),
    "cache_hits": ("Int64", "Calls answered from the cache (Run.totals)."),
    "failed_calls": ("Int64", "Calls that ended in an error (Run.totals)."),
    "input_tokens": (
        "Int64",
        "Input tokens of all the run's calls, setup and final phases included (original calls, also for cache hits).",
    ),
    "output_tokens": ("Int64", "Output tokens of all the run's calls (as input_tokens)."),
    "tokens": ("Int64", "input_tokens + output_tokens."),
    "cost_usd": ("Float64", "Cost of all the run's calls (original calls); <NA> if a call's price is unknown."),
    "spent_tokens": (
        "Int64",
        "Tokens this execution actually sent to providers (Run.totals; 0 on a full cache replay).",
    ),
    "spent_cost_usd": ("Float64", "Cost this execution actually paid (Run.totals); <NA> if unknown."),
    "wall_time_s": ("Float64", "Wall-clock seconds of the run."),
    "cum_calls": (
        "Int64",
        "Model calls the run made towards its budget (Run.spent: every call but test-split "
        "measurement, cache hits included, so a replay counts the same); <NA> for records made "
        "before budgets.",
    ),
    "cum_tokens": ("Int64", "Tokens the run spent towards its budget (Run.spent, original figures)."),
    "cum_cost_usd": ("Float64", "Cost the run spent towards its budget; <NA> if a call's price is unknown."),
    "n_errors": ("Int64", "Errors recorded in the run."),
    "error": ("string", "The first error as 'Kind: message', <NA> if none."),
    "score_source": ("string", "What the router decided on: critic, grounded or both; <NA> for loops without one."),
    "target_model": ("string", "Model that ran candidate prompts on the examples (prompt loops; else <NA>)."),
    "baseline_test_score": (
        "Float64",
        "The task's original prompt on the test split: mean scorer value in "
        "[0, 1] (Run.baseline_test); <NA> for a task without examples.",
    ),
    "baseline_test_n": ("Int64", "Test examples the original prompt got a score on."),
    "baseline_test_ci_low": ("Float64", "Lower end of baseline_test_score's 95% CI."),
    "baseline_test_ci_high": ("Float64", "Upper end of baseline_test_score's 95% CI."),
    "final_test_score": ("Float64", "The run's final output (prompt) on the test split (Run.final_test)."),
    "final_test_n": ("Int64", "Test examples the final prompt got a score on."),
    "final_test_ci_low": ("Float64", "Lower end of final_test_score's 95% CI."),
    "final_test_ci_high": ("Float64", "Upper end of final_test_score's 95% CI."),
    "delta": ("Float64", "final minus baseline, paired over the test examples scored in both (Run.delta)."),
    "delta_n": ("Int64", "Test examples scored in both measures."),
    "delta_ci_low": ("Float64", "Lower end of delta's paired bootstrap 95% CI."),
    "delta_ci_high": ("Float64", "Upper end of delta's paired bootstrap 95% CI."),
    "final_iteration": ("Int64", "Iteration whose candidate is the final output (Run.info['final_iteration'])."),
    "promptlab_version": ("string", "promptlab version that made the run (Run.provenance)."),
    "litellm_version": ("string", "litellm version that made the run."),
    "prompts_hash": (
        "string",
        "sha256 (16 hex) over the role prompt templates the run used: runs made under "
        "different role prompts differ here.",
    ),
    "prompt_hashes": ("string", "JSON text: per role used, sha256 (16 hex) of its prompt template (Run.provenance)."),
    "task_hash": ("string", "sha256 (16 hex) of the task, its examples and its split."),
    "experiment_hash": ("string", "Hash of the experiment file (set by the sweep); <NA> outside a sweep."),
    "reported_models": (
        "string",
        "JSON text: per role, the model requested, the id the provider reported and "
        "the endpoint identity (never a key).",
    ),
    "fingerprint": (
        "string",
        "The ids of the inference fingerprints the run's replies rest on (promptlab.llm.local.fingerprint), sorted and "
        "space-separated; <NA> where no reply carried one (scripted and simulated models, older records).",
    ),
    "fingerprints": (
        "string",
        "JSON text: per model requested, fingerprint id -> its fields (build, kernels, engine, model sha256, CPU; "
        "a hosted model's reported id and system_fingerprint).",
    ),
}
"""Runs: one row per run."""

ADDED_COLUMNS = frozenset({"parents", "fingerprint", "fingerprints"})
"""Documented columns that a cell written by an earlier promptlab lacks: `load` reads them as <NA>. A missing
column outside this set means a damaged file, and the cell is listed as corrupt."""

CELL_COLUMNS: Columns = {
    "cell_id": ("string", "Cell directory name."),
    "status": (
        "string",
        "ok, failed, cut (stopped by the sweep's max_cost), incomplete (no status.json yet) "
        "or corrupt (unreadable files).",
    ),
    "error_kind": ("string", "Kind of the cell's error (failed, cut or corrupt cells), else <NA>."),
    "error": ("string", "The cell's error message (failed, cut or corrupt cells), else <NA>."),
    "n_runs": ("Int64", "Runs the cell recorded (from status.json)."),
    "n_errors": ("Int64", "Errors its runs recorded and went on past (an ok cell may have some)."),
    "wall_time_s": ("Float64", "Wall-clock seconds of the cell."),
    "finished_at": ("string", "UTC time status.json was written (ISO 8601)."),
    "spent_tokens": (
        "Int64",
        "Tokens the cell's last execution sent to providers, whatever its status (under a "
        "spending cap: what the cap charged it, runs it stopped included).",
    ),
    "spent_cost_usd": (
        "Float64",
        "USD the cell's last execution paid, whatever its status (a cell cut by "
        "max_cost shows what it paid); <NA> if unknown.",
    ),
}
"""Cells: one row per cell directory, whatever its status, followed by the cell's params."""

CONFIG_COLUMNS = frozenset({"loop", "generator_model", "critic_model", "target_model", "score_source"})
"""Param names that may repeat a documented column: the frames copy these from the run's config, so the
column and the param agree (the run record's value is used there)."""
