"""promptlab: experiments on iterative prompt refinement loops, Jupyter-first.

One cached, structured call path (`complete` / `acomplete`) over litellm, an embedded local model
(`local/smollm2`), a scripted model for tests (`fake/...`), the four refinement loops, sweeps,
tidy frames and plots.
"""

import os as _os

# litellm fetches its price map at import unless told not to; offline that retries for seconds.
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from .cache import Cache, cache_key, open_cache  # noqa: E402
from .call import Settings, acomplete, complete  # noqa: E402
from .completion import Completion, Usage  # noqa: E402
from .errors import (  # noqa: E402
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
from .fake import ScriptedModel, scripted  # noqa: E402
from .record import Iteration, Run, Score, Step, StepError, Task, Totals  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "Cache", "cache_key", "open_cache", "Settings", "complete", "acomplete", "Completion", "Usage",
    "ConfigError", "MissingDependencyError", "MissingKeyError", "ParseError", "PromptlabError", "ProviderError",
    "SweepCellError", "UnknownModelError", "Event", "EventList", "PrintLog", "ScriptedModel", "scripted",
    "Iteration", "Run", "Score", "Step", "StepError", "Task", "Totals", "__version__",
]
