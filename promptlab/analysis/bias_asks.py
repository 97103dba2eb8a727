"""The data of the critic-bias probes (`promptlab.analysis.bias`) from a results directory. MAKES MODEL CALLS
(cached) for the three intervention probes, within a budget of calls per critic.

- `length`, `inflation`: from the logs alone (`bias.logged_frame` over the candidates' lengths).
- `padding`: a logged candidate re-scored as it is and with about 300 characters of neutral sentences appended,
  drawn for that candidate (`bias_padding`); under a window, the candidates that can be padded in it first.
- `anchoring`: the same candidate re-scored with a previous score shown (ANCHORS, drawn by a fixed seed).
- `order`: two candidates of one run judged by the critic's model as a pairwise judge
  (`promptlab.eval.pairwise`), in both orders.

Re-scores go through the loop's `rescore` hook with the loop's own critic prompt (the hook's `candidate` and
`anchor` arguments, `promptlab.loops.runtime.rescoring`), at re-score samples 101 (plain), 102 (padded) and
103 (anchored), and the pairwise judgements at 104: disjoint from the logged calls and from `reliability`'s
re-scores 1..k. The candidates and pairs are drawn by a fixed seed, so a second report asks the same calls and
every one is a cache hit. A simulated critic (`sim/...`) makes no call and is not limited by the budget: every
candidate and pair is asked, SIM_DRAWS times each (samples 101 + DRAW_STRIDE x j, ...), and a candidate's
scores (a pair's verdicts in each order) are averaged over the draws. A model critic is asked once (j = 0);
more draws would spend its budget on fewer candidates.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..aio import run_sync
from ..critics.simulated import simulated_critic
from ..errors import PromptlabError
from ..eval.pairwise import ajudge_pair
from ..loops.registry import get_loop
from ..loops.runtime.config import LOGGED, goal_of
from ..loops.runtime.define import rescore_sample
from ..results.order import canonical_runs
from ..results.store import read_runs
from .bias import logged_frame
from .bias_padding import pad_within

if TYPE_CHECKING:
    import pandas as pd

    from ..record import Iteration, Run
    from ..results.store import Results

ANCHORS = (2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0)
"""The previous scores the anchoring probe shows, one drawn per candidate."""
BUDGET = 250
"""Default model calls per critic for the re-asks (3 per candidate for padding and anchoring, 2 per pair): 50
candidates and 50 pairs, at which the padding probe detects its margin (0.2 points per 100 characters) with 80%
power on a model critic whose scores vary by 0.7 points from ask to ask, and whose reactions to particular
padding sentences add more (benchmarks/bias_model_critics.py: detectable 0.17 at 50 candidates; 0.23 at the 30
that 150 bought). Anchoring and order do not reach their margins of 0.1 at it (they would need about 220
candidates and 450 pairs), nor do the logged probes, whose n is the sweep's: their inconclusive rows say
"underpowered" and about the n that would reach the margin."""
SEED = 0
"""Seed of the draw of candidates, pairs and shown scores."""
SAMPLES = {"plain": 101, "padded": 102, "anchored": 103, "pair": 104}
"""Re-score sample of each kind of re-ask (its first draw)."""
SIM_DRAWS = 5
"""Draws per candidate and pair for a simulated critic: free, and its noise (sim/noisy's sd 2) would otherwise
leave each probe's CI too wide to rule out the stated size."""
DRAW_STRIDE = 10
"""Sample step between draws: draw j of a kind is at SAMPLES[kind] + DRAW_STRIDE x j."""


def critic_view(run: Run, critic: str) -> Callable[[str], str]:
    """What `critic` is shown of a candidate in `run`: its loop's `shown_to_critic` (Creator/Critic cuts it to
    `history_chars`); a simulated critic, or a run of a loop this installation does not know, sees all of it."""
    if simulated_critic(critic) is not None:
        return str.strip
    try:
        return get_loop(run.loop).config_cls.model_validate(run.config, context=LOGGED).shown_to_critic
    except (PromptlabError, ValidationError):
        return str.strip


def text_key(run: Run, *texts: str) -> str:
    """What makes two asks of a critic the same ask: the run's goal, the text(s) shown and the run's sample (a
    model re-asked the same prompt at the same sample answers the same; the cache returns it)."""
    goal = str(run.info.get("goal") or goal_of(run.task))
    return hashlib.sha256("\x00".join([goal, *texts, str(run.sample)]).encode()).hexdigest()[:16]


def logged_runs(results: Results) -> list[Run]:
    """The Run records of the results' ok cells (`read_runs`: a damaged record is skipped and named), cell by cell
    in the order of their ids, each cell's in the canonical order (`promptlab.results.order.canonical_runs`): the
    candidates drawn for the re-asks do not depend on the order in which runs finished."""
    runs: list[Run] = []
    for cell in (
        sorted(map(str, results.runs["cell_id"].dropna().unique())) if "cell_id" in results.runs.columns else []
    ):
        runs += canonical_runs(read_runs(results.path, cell))
    return runs


def candidate_lengths(runs: Sequence[Run]) -> pd.DataFrame:
    """run_id, iteration, chars of every logged candidate, with what a model critic was shown of it (`shown`
    characters) and `key` / `shown_key` (`text_key` of the whole text / of the text shown): rows with the same
    key are one ask of the critic, logged again."""
    import pandas as pd

    rows = []
    for r in runs:
        view = critic_view(r, "")
        for it in r.iterations:
            if it.candidate is not None:
                shown = view(it.candidate)
                rows.append(
                    (r.run_id, it.index, len(it.candidate), len(shown), text_key(r, it.candidate), text_key(r, shown))
                )
    return pd.DataFrame(rows, columns=["run_id", "iteration", "chars", "shown", "key", "shown_key"])


def critics_of(run: Run) -> list[str]:
    """The models that scored a run's candidates (its critic roles, else its critic_model or model)."""
    roles = [m for role, m in run.models.items() if role.startswith("critic") or role == "evaluator"]
    return list(dict.fromkeys(roles)) or [str(run.config.get("critic_model") or run.config.get("model"))]


async def aprobe_frames(
    results: Results, *, budget: int = BUDGET, cache: Any = None, settings: Any = None
) -> dict[str, pd.DataFrame]:
    """Probe name -> its tidy frame (`bias.bias_table`'s input) for every critic of a results directory, and
    "skipped": critic_model, why, for a critic whose re-asks failed (the logged probes still count)."""
    import pandas as pd

    runs = logged_runs(results)
    frames = {"length": logged_frame(results.trajectories, candidate_lengths(runs))}
    frames["inflation"] = frames["length"]
    rows: dict[str, list[dict[str, Any]]] = {"padding": [], "anchoring": [], "order": []}
    skipped: list[dict[str, Any]] = []
    for critic in sorted({c for r in runs for c in critics_of(r)}):
        own = [r for r in runs if critic in critics_of(r) and _rescorable(r)]
        try:
            found = await _ask_critic(critic, own, budget, cache, settings)
        except (PromptlabError, ValidationError) as e:  # e.g. a model no longer configured: say so, go on
            skipped.append({"critic_model": critic, "why": f"the re-asks failed: {type(e).__name__}: {e}"[:300]})
            continue
        for probe, got in found.items():
            rows[probe] += got
    frames["skipped"] = pd.DataFrame(skipped, columns=["critic_model", "why"])
    columns = {
        "padding": ["critic_model", "run_id", "iteration", "plain", "padded", "added_chars", "why_not"],
        "anchoring": ["critic_model", "run_id", "iteration", "plain", "anchored", "anchor"],
        "order": ["critic_model", "pair", "draw", "swapped", "first_won", "tie", "error"],
    }
    for probe, cols in columns.items():
        frames[probe] = pd.DataFrame(rows[probe], columns=cols)
    return frames


def probe_frames(
    results: Results, *, budget: int = BUDGET, cache: Any = None, settings: Any = None
) -> dict[str, pd.DataFrame]:
    """`aprobe_frames` from sync code (also inside a running event loop, e.g. a Jupyter kernel)."""
    return run_sync(aprobe_frames(results, budget=budget, cache=cache, settings=settings))


async def _ask_critic(
    critic: str, runs: list[Run], budget: int, cache: Any, settings: Any
) -> dict[str, list[dict[str, Any]]]:
    """The re-asks of one critic: as many candidates (3 calls each) and pairs (2 calls each) as the budget
    allows, about 60% of it on candidates; unlimited for a simulated critic."""
    import numpy as np

    rng = np.random.default_rng(SEED)
    items = [(r, it) for r in runs for it in r.iterations if it.candidate is not None and it.grounded is not None]
    pairs = [(r, a, b) for r in runs for a, b in zip(r.iterations, r.iterations[1:], strict=False) if _pairable(a, b)]
    # a text the loops logged again (at the same sample) is one ask: the critic would answer it the same
    items = list({text_key(r, str(it.candidate)): (r, it) for r, it in reversed(items)}.values())[::-1]
    pairs = list({text_key(r, str(a.candidate), str(b.candidate)): (r, a, b) for r, a, b in reversed(pairs)}.values())
    pairs = pairs[::-1]
    items = [items[i] for i in rng.permutation(len(items))]
    pairs = [pairs[i] for i in rng.permutation(len(pairs))]
    # under a window (history_chars) a candidate that fills it cannot be padded: ask those that can first
    items.sort(key=lambda ri: _padded(critic, *ri) is None)
    if simulated_critic(critic) is None:
        n_items = min(len(items), max(budget * 3 // 5, budget - 2 * len(pairs)) // 3)
        items, pairs = items[:n_items], pairs[: max(0, budget - 3 * n_items) // 2]
    anchors = rng.choice(ANCHORS, size=len(items))
    draws = SIM_DRAWS if simulated_critic(critic) is not None else 1
    scored = await asyncio.gather(
        *[_rescores(critic, r, it, float(a), draws, cache, settings) for (r, it), a in zip(items, anchors, strict=True)]
    )
    judged = await asyncio.gather(
        *[_pair(critic, r, a, b, j, cache, settings) for r, a, b in pairs for j in range(draws)]
    )
    return {
        "padding": [{k: v for k, v in s.items() if k not in ("anchored", "anchor")} for s in scored],
        "anchoring": [{k: v for k, v in s.items() if k not in ("padded", "added_chars", "why_not")} for s in scored],
        "order": [row for rows in judged for row in rows],
    }


def _rescorable(run: Run) -> bool:
    """Whether the run's loop is registered and can re-score its candidates (a `rescore` hook)."""
    try:
        return get_loop(run.loop).rescore is not None
    except PromptlabError:  # a loop this installation does not know: its runs are read from the logs only
        return False


def _pairable(a: Iteration, b: Iteration) -> bool:
    return a.candidate is not None and b.candidate is not None and a.candidate != b.candidate


async def _rescores(
    critic: str, run: Run, it: Iteration, anchor: float, draws: int, cache: Any, settings: Any
) -> dict[str, Any]:
    """One candidate re-scored plain, padded and with a shown score, each `draws` times (averaged). The padding
    goes where the critic sees it (`pad_within`); a candidate that already fills the critic's window is not
    padded, and `why_not` says so."""
    assert it.candidate is not None
    rescore = get_loop(run.loop).rescore
    assert rescore is not None
    view = critic_view(run, critic)
    text = _padded(critic, run, it)
    extra: dict[str, dict[str, Any]] = {"plain": {}, "anchored": {"anchor": anchor}}
    if text is not None:
        extra["padded"] = {"candidate": text}
    asks = [
        rescore(run, it.index, sample=SAMPLES[kind] + DRAW_STRIDE * j, cache=cache, settings=settings, **kw)
        for kind, kw in extra.items()
        for j in range(draws)
    ]
    got = [_mean_of(critic, run, s) for s in await asyncio.gather(*asks)]
    plain, anchored, *padded = (_average(got[k * draws : (k + 1) * draws]) for k in range(len(extra)))
    shown = len(view(it.candidate))
    return {
        "critic_model": critic,
        "run_id": run.run_id,
        "iteration": it.index,
        "plain": plain,
        "padded": padded[0] if padded else None,
        "added_chars": len(view(text)) - shown if text is not None else 0,
        "why_not": None if text is not None else f"the critic is shown only its first {shown} characters",
        "anchored": anchored,
        "anchor": anchor,
    }


def _padded(critic: str, run: Run, it: Iteration) -> str | None:
    """The candidate as the padding probe shows it to `critic` (`pad_within` its view, padding drawn for this
    candidate), or None when it cannot be padded in view."""
    assert it.candidate is not None
    return pad_within(it.candidate, critic_view(run, critic), key=text_key(run, it.candidate))


def _average(scores: list[float | None]) -> float | None:
    """The mean of the draws that gave a score (None: none did)."""
    present = [v for v in scores if v is not None]
    return sum(present) / len(present) if present else None


def _mean_of(critic: str, run: Run, scores: list[Any]) -> float | None:
    """The mean of the present scores given by `critic`'s model (a judge role maps to its model)."""
    mine = [s.score for s in scores if run.models.get(s.judge or "", s.judge) == critic or len(critics_of(run)) == 1]
    return _average([None if v is None else float(v) for v in mine])


async def _pair(
    critic: str, run: Run, a: Iteration, b: Iteration, draw: int, cache: Any, settings: Any
) -> list[dict[str, Any]]:
    """Two candidates of a run judged in both orders by the critic's model (draw `draw` of the pair)."""
    goal = str(run.info.get("goal") or goal_of(run.task))
    sample = rescore_sample(run.sample, SAMPLES["pair"] + DRAW_STRIDE * draw)
    pair = f"{run.run_id}:{a.index}-{b.index}"
    rows = []
    for swapped, (x, y) in enumerate(((a, b), (b, a))):
        got = await ajudge_pair(
            critic,
            goal,
            str(x.candidate),
            str(y.candidate),
            accuracies=(_dev(x), _dev(y)),
            sample=sample,
            cache=cache,
            settings=settings,
        )
        first_won = None if got.preferred is None else got.preferred == 0
        rows.append(
            {
                "critic_model": critic,
                "pair": pair,
                "draw": draw,
                "swapped": swapped,
                "first_won": first_won,
                "tie": got.tie,
                "error": got.error,
            }
        )
    return rows


def _dev(it: Iteration) -> float | None:
    return it.grounded.score if it.grounded is not None else None


__all__ = [
    "ANCHORS",
    "BUDGET",
    "DRAW_STRIDE",
    "SAMPLES",
    "SEED",
    "SIM_DRAWS",
    "aprobe_frames",
    "candidate_lengths",
    "critic_view",
    "critics_of",
    "logged_runs",
    "probe_frames",
    "text_key",
]
