"""promptlab: experiments on iterative prompt refinement loops, Jupyter-first.

The package's map (each subpackage's `__init__` names its public API):

- `llm/`: the one call path (`complete` / `acomplete`) over litellm: cache, structured output, retries,
  limits, the spending cap, model aliases, the embedded local model and the scripted model.
- `eval/`: grounded evaluation: a prompt measured on labelled examples, scorers, task files, statistics.
- `critics/`: simulated critics (`sim/...`), critics with known properties called by model name.
- `loops/`: the refinement loops (P³RO, Creator/Critic, PES, PCEE; the baselines OPRO, APE, ProTeGi, GEPA and
  the resample control), each made by `loops.runtime.define_loop`, with its stop rule in its `router`.
- `tools/`: tools for the agent loops, the per-run workspace and its sandbox.
- `sweeps/`: experiment files, cells, and the executors that run them (inline, papermill, dask).
- `results/`: sweep results on disk and as tidy pandas frames.
- `analysis/`: calibration, critic biases, counterfactual stopping, paired comparisons, equal budget,
  reliability, provenance.
- `reports/`: charts and the report (summary.md).
- `ui/`: the notebooks' widgets (explorer, run browser).

Beside them: `record` (the Run record), `events`, `errors`, `aio` (running a coroutine from sync code) and
`cli`. The root imports only the call path; everything else loads on first use.
"""

import os as _os
from typing import TYPE_CHECKING

# litellm fetches its price map at import unless told not to; offline that retries for seconds.
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from importlib.metadata import PackageNotFoundError as _NotFound  # noqa: E402
from importlib.metadata import version as _version  # noqa: E402

from .errors import (  # noqa: E402
    CacheUnavailableError,
    ConfigError,
    MissingDependencyError,
    MissingKeyError,
    ParseError,
    PromptlabError,
    ProviderError,
    SpendingCapExceeded,
    SweepCellError,
    UnknownModelError,
)
from .events import Event, EventList, PrintLog  # noqa: E402
from .llm.cache.backend import CacheBackend  # noqa: E402
from .llm.cache.disk import Cache  # noqa: E402
from .llm.cache.keys import cache_key  # noqa: E402
from .llm.cache.location import open_cache  # noqa: E402
from .llm.call import acomplete, complete  # noqa: E402
from .llm.completion import Completion, TokenLogprob, TopLogprob
from .llm.fake import ScriptedModel, ScriptedReply, scripted  # noqa: E402
from .llm.settings import Settings  # noqa: E402
from .llm.tally import Tally, Usage  # noqa: E402
from .record import Iteration, Run, Score, Step, StepError, Task, Totals  # noqa: E402

if TYPE_CHECKING:  # the lazy names, typed for a user's checker (tests/test_gates.py keeps this in step with _LAZY)
    from .analysis.bias import bias_table
    from .analysis.bias_asks import probe_frames
    from .analysis.budget import equal_budget
    from .analysis.consistency import reliability
    from .analysis.critic import calibration
    from .analysis.paired import compare, delta_table
    from .analysis.stopping import counterfactual_stopping
    from .eval.evaluate import EvalResult, aevaluate_prompt, evaluate_prompt
    from .eval.expected import ExpectedScore, expected_scores
    from .eval.scorers import SCORERS, get_scorer
    from .eval.scoring import Scorer
    from .eval.tasks import check_task, examples_of, format_prompt, read_tasks, split_examples
    from .llm.aliases import ModelAlias, Price, register_model, registered_models, unregister_model
    from .llm.cache.redis import RedisCache
    from .llm.spending_cap import SpendingCap
    from .loops.ape.loop import APEConfig, arun_ape, run_ape
    from .loops.creator_critic.config import CreatorCriticConfig
    from .loops.creator_critic.loop import arun_creator_critic, run_creator_critic
    from .loops.gepa.config import GEPAConfig
    from .loops.gepa.loop import arun_gepa, run_gepa
    from .loops.opro.loop import OPROConfig, arun_opro, run_opro
    from .loops.p3ro.config import P3ROConfig
    from .loops.p3ro.loop import arun_p3ro, run_p3ro
    from .loops.pcee.loop import PCEEConfig, arun_pcee, run_pcee
    from .loops.pes.agent import PESAgent, arun_pes, run_pes
    from .loops.pes.config import Persona, PESConfig
    from .loops.protegi.config import ProTeGiConfig
    from .loops.protegi.loop import arun_protegi, run_protegi
    from .loops.registry import arun_loop, get_loop, run_loop
    from .loops.resample.loop import ResampleConfig, arun_resample, run_resample
    from .loops.runtime.config import LoopConfig
    from .record import Example, GroundedScore, Split
    from .reports.summary import report
    from .results.store import Results, load
    from .sweeps.experiment import Experiment, load_experiment
    from .sweeps.run import sweep
    from .ui.browser import RunBrowser
    from .ui.explorer import Explorer

try:
    __version__ = _version("promptlab-loops")
except _NotFound:  # a source tree that was never installed
    __version__ = "0.0.0+unknown"

# Heavier parts (loops, sweeps, pandas frames, plots) load on first use, so `import promptlab` stays fast.
# Each name maps to the module that defines it.
_LAZY = {
    "run_loop": "promptlab.loops.registry",
    "arun_loop": "promptlab.loops.registry",
    "get_loop": "promptlab.loops.registry",
    "LoopConfig": "promptlab.loops.runtime.config",
    "run_p3ro": "promptlab.loops.p3ro.loop",
    "arun_p3ro": "promptlab.loops.p3ro.loop",
    "P3ROConfig": "promptlab.loops.p3ro.config",
    "run_creator_critic": "promptlab.loops.creator_critic.loop",
    "arun_creator_critic": "promptlab.loops.creator_critic.loop",
    "CreatorCriticConfig": "promptlab.loops.creator_critic.config",
    "run_pes": "promptlab.loops.pes.agent",
    "arun_pes": "promptlab.loops.pes.agent",
    "PESConfig": "promptlab.loops.pes.config",
    "PESAgent": "promptlab.loops.pes.agent",
    "Persona": "promptlab.loops.pes.config",
    "run_pcee": "promptlab.loops.pcee.loop",
    "arun_pcee": "promptlab.loops.pcee.loop",
    "PCEEConfig": "promptlab.loops.pcee.loop",
    "run_opro": "promptlab.loops.opro.loop",
    "arun_opro": "promptlab.loops.opro.loop",
    "OPROConfig": "promptlab.loops.opro.loop",
    "run_ape": "promptlab.loops.ape.loop",
    "arun_ape": "promptlab.loops.ape.loop",
    "APEConfig": "promptlab.loops.ape.loop",
    "run_protegi": "promptlab.loops.protegi.loop",
    "arun_protegi": "promptlab.loops.protegi.loop",
    "ProTeGiConfig": "promptlab.loops.protegi.config",
    "run_resample": "promptlab.loops.resample.loop",
    "arun_resample": "promptlab.loops.resample.loop",
    "ResampleConfig": "promptlab.loops.resample.loop",
    "run_gepa": "promptlab.loops.gepa.loop",
    "arun_gepa": "promptlab.loops.gepa.loop",
    "GEPAConfig": "promptlab.loops.gepa.config",
    "sweep": "promptlab.sweeps.run",
    "load_experiment": "promptlab.sweeps.experiment",
    "Experiment": "promptlab.sweeps.experiment",
    "load": "promptlab.results.store",
    "Results": "promptlab.results.store",
    "report": "promptlab.reports.summary",
    "evaluate_prompt": "promptlab.eval.evaluate",
    "aevaluate_prompt": "promptlab.eval.evaluate",
    "EvalResult": "promptlab.eval.evaluate",
    "get_scorer": "promptlab.eval.scorers",
    "SCORERS": "promptlab.eval.scorers",
    "Scorer": "promptlab.eval.scoring",
    "format_prompt": "promptlab.eval.tasks",
    "split_examples": "promptlab.eval.tasks",
    "check_task": "promptlab.eval.tasks",
    "examples_of": "promptlab.eval.tasks",
    "read_tasks": "promptlab.eval.tasks",
    "Example": "promptlab.record",
    "Split": "promptlab.record",
    "GroundedScore": "promptlab.record",
    "expected_scores": "promptlab.eval.expected",
    "ExpectedScore": "promptlab.eval.expected",
    "calibration": "promptlab.analysis.critic",
    "counterfactual_stopping": "promptlab.analysis.stopping",
    "compare": "promptlab.analysis.paired",
    "delta_table": "promptlab.analysis.paired",
    "equal_budget": "promptlab.analysis.budget",
    "reliability": "promptlab.analysis.consistency",
    "bias_table": "promptlab.analysis.bias",
    "probe_frames": "promptlab.analysis.bias_asks",
    "SpendingCap": "promptlab.llm.spending_cap",
    "RedisCache": "promptlab.llm.cache.redis",
    "register_model": "promptlab.llm.aliases",
    "unregister_model": "promptlab.llm.aliases",
    "registered_models": "promptlab.llm.aliases",
    "ModelAlias": "promptlab.llm.aliases",
    "Price": "promptlab.llm.aliases",
    "Explorer": "promptlab.ui.explorer",
    "RunBrowser": "promptlab.ui.browser",
}


# Old names kept working for a while (with a DeprecationWarning): "budget" now means only a loop's call/token budget.
_DEPRECATED = {
    "Budget": ("promptlab.llm.spending_cap", "SpendingCap"),
    "BudgetExceeded": ("promptlab.errors", "SpendingCapExceeded"),
}


def __getattr__(name: str) -> object:
    if name in _DEPRECATED:
        import importlib
        import warnings

        module, new = _DEPRECATED[name]
        warnings.warn(f"promptlab.{name} is deprecated: use promptlab.{new}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(module), new)
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'promptlab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [  # literal, so checkers see the lazy names as the public API too
    "Cache",
    "CacheBackend",
    "CacheUnavailableError",
    "cache_key",
    "open_cache",
    "Settings",
    "complete",
    "acomplete",
    "Completion",
    "Tally",
    "Usage",
    "SpendingCapExceeded",
    "ConfigError",
    "MissingDependencyError",
    "MissingKeyError",
    "ParseError",
    "PromptlabError",
    "ProviderError",
    "SweepCellError",
    "UnknownModelError",
    "Event",
    "EventList",
    "PrintLog",
    "ScriptedModel",
    "ScriptedReply",
    "scripted",
    "TokenLogprob",
    "TopLogprob",
    "Iteration",
    "Run",
    "Score",
    "Step",
    "StepError",
    "Task",
    "Totals",
    "__version__",
    "run_loop",
    "arun_loop",
    "get_loop",
    "LoopConfig",
    "run_p3ro",
    "arun_p3ro",
    "P3ROConfig",
    "run_creator_critic",
    "arun_creator_critic",
    "CreatorCriticConfig",
    "run_pes",
    "arun_pes",
    "PESConfig",
    "PESAgent",
    "Persona",
    "run_pcee",
    "arun_pcee",
    "PCEEConfig",
    "run_opro",
    "arun_opro",
    "OPROConfig",
    "run_ape",
    "arun_ape",
    "APEConfig",
    "run_protegi",
    "arun_protegi",
    "ProTeGiConfig",
    "run_resample",
    "arun_resample",
    "ResampleConfig",
    "run_gepa",
    "arun_gepa",
    "GEPAConfig",
    "sweep",
    "load_experiment",
    "Experiment",
    "load",
    "Results",
    "report",
    "evaluate_prompt",
    "aevaluate_prompt",
    "EvalResult",
    "get_scorer",
    "SCORERS",
    "Scorer",
    "format_prompt",
    "split_examples",
    "check_task",
    "examples_of",
    "read_tasks",
    "Example",
    "Split",
    "GroundedScore",
    "expected_scores",
    "ExpectedScore",
    "calibration",
    "counterfactual_stopping",
    "compare",
    "delta_table",
    "equal_budget",
    "reliability",
    "bias_table",
    "probe_frames",
    "SpendingCap",
    "RedisCache",
    "register_model",
    "unregister_model",
    "registered_models",
    "ModelAlias",
    "Price",
    "Explorer",
    "RunBrowser",
]
