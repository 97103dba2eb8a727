"""promptlab: experiments on iterative prompt refinement loops, Jupyter-first.

One cached, structured call path (`complete` / `acomplete`) over litellm, an embedded local model
(`local/smollm2`), a scripted model for tests (`fake/...`), the four refinement loops, sweeps,
tidy frames and plots.
"""

import os as _os

# litellm fetches its price map at import unless told not to; offline that retries for seconds.
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from .cache import Cache, cache_key, open_cache  # noqa: E402
from .cache_backend import CacheBackend  # noqa: E402
from .call import Settings, acomplete, complete  # noqa: E402
from .completion import Completion, TokenLogprob, TopLogprob, Usage  # noqa: E402
from .errors import (  # noqa: E402
    BudgetExceeded,
    CacheUnavailableError,
    ConfigError,
    MissingDependencyError,
    MissingKeyError,
    ParseError,
    PromptlabError,
    ProviderError,
    SweepCellError,
    UnknownModelError,
)
from .events import Event, EventList, PrintLog  # noqa: E402
from .fake import ScriptedModel, ScriptedReply, scripted  # noqa: E402
from .record import Iteration, Run, Score, Step, StepError, Task, Totals  # noqa: E402

__version__ = "0.1.0"

# Heavier parts (loops, sweeps, pandas frames, plots) load on first use, so `import promptlab` stays fast.
_LAZY = {
    "run_loop": "promptlab.loops", "arun_loop": "promptlab.loops", "get_loop": "promptlab.loops",
    "LoopConfig": "promptlab.loops",
    "run_p3ro": "promptlab.loops.p3ro", "arun_p3ro": "promptlab.loops.p3ro", "P3ROConfig": "promptlab.loops.p3ro",
    "run_creator_critic": "promptlab.loops.creator_critic", "arun_creator_critic": "promptlab.loops.creator_critic",
    "CreatorCriticConfig": "promptlab.loops.creator_critic",
    "run_pes": "promptlab.loops.pes", "arun_pes": "promptlab.loops.pes", "PESConfig": "promptlab.loops.pes",
    "PESAgent": "promptlab.loops.pes", "Persona": "promptlab.loops.pes",
    "run_pcee": "promptlab.loops.pcee", "arun_pcee": "promptlab.loops.pcee", "PCEEConfig": "promptlab.loops.pcee",
    "load_experiment": "promptlab.experiments", "Experiment": "promptlab.experiments",
    "load": "promptlab.results", "Results": "promptlab.results", "report": "promptlab.reporting",
    "evaluate_prompt": "promptlab.evaluate", "aevaluate_prompt": "promptlab.evaluate",
    "EvalResult": "promptlab.evaluate", "get_scorer": "promptlab.scorers", "SCORERS": "promptlab.scorers",
    "Scorer": "promptlab.scorers", "format_prompt": "promptlab.tasks", "split_examples": "promptlab.tasks",
    "check_task": "promptlab.tasks", "examples_of": "promptlab.tasks", "Example": "promptlab.record",
    "Split": "promptlab.record", "GroundedScore": "promptlab.record",
    "expected_scores": "promptlab.expected", "ExpectedScore": "promptlab.expected",
    "calibration": "promptlab.analysis", "counterfactual_stopping": "promptlab.analysis",
    "compare": "promptlab.analysis", "delta_table": "promptlab.analysis",
    "Budget": "promptlab.budget",
    "RedisCache": "promptlab.cache_redis",
    "register_model": "promptlab.models", "unregister_model": "promptlab.models",
    "registered_models": "promptlab.models", "ModelAlias": "promptlab.models",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'promptlab' has no attribute {name!r}")


__all__ = [*_LAZY,
    "Cache", "CacheBackend", "CacheUnavailableError", "cache_key", "open_cache", "Settings", "complete", "acomplete", "Completion", "Usage",
    "BudgetExceeded", "ConfigError", "MissingDependencyError", "MissingKeyError", "ParseError", "PromptlabError", "ProviderError",
    "SweepCellError", "UnknownModelError", "Event", "EventList", "PrintLog", "ScriptedModel", "ScriptedReply",
    "scripted", "TokenLogprob", "TopLogprob",
    "Iteration", "Run", "Score", "Step", "StepError", "Task", "Totals", "__version__",
]
