"""promptlab: experiments on iterative prompt refinement loops, Jupyter-first.

The root's public names are one table, `NAMES` (name -> defining module), each loaded on first use; the package's
map is in docs/calls.md, section "promptlab".
"""

import importlib as _importlib
import os as _os
from typing import TYPE_CHECKING

# litellm fetches its price map at import unless told not to; offline that retries for seconds.
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from importlib.metadata import PackageNotFoundError as _NotFound  # noqa: E402
from importlib.metadata import version as _version  # noqa: E402

try:
    __version__ = _version("promptlab-loops")
except _NotFound:  # a source tree that was never installed
    __version__ = "0.0.0+unknown"

# The root's public names, each with the module that defines it: the one table `__getattr__`, `__dir__` and
# `__all__` are made from. A name loads on first use, so `import promptlab` stays fast.
NAMES = {
    "Cache": "promptlab.llm.cache.disk",
    "CacheBackend": "promptlab.llm.cache.backend",
    "CacheUnavailableError": "promptlab.errors",
    "cache_key": "promptlab.llm.cache.keys",
    "open_cache": "promptlab.llm.cache.location",
    "Settings": "promptlab.llm.call.settings",
    "complete": "promptlab.llm.call.entry",
    "acomplete": "promptlab.llm.call.entry",
    "Completion": "promptlab.llm.call.completion",
    "Tally": "promptlab.llm.spending.tally",
    "Usage": "promptlab.llm.spending.tally",
    "SpendingCapExceeded": "promptlab.errors",
    "ConfigError": "promptlab.errors",
    "MissingDependencyError": "promptlab.errors",
    "MissingKeyError": "promptlab.errors",
    "ParseError": "promptlab.errors",
    "PromptlabError": "promptlab.errors",
    "ProviderError": "promptlab.errors",
    "SweepCellError": "promptlab.errors",
    "UnknownModelError": "promptlab.errors",
    "Event": "promptlab.events",
    "EventList": "promptlab.events",
    "PrintLog": "promptlab.events",
    "ScriptedModel": "promptlab.llm.providers.scripted",
    "ScriptedReply": "promptlab.llm.providers.scripted",
    "scripted": "promptlab.llm.providers.scripted",
    "TokenLogprob": "promptlab.llm.call.completion",
    "TopLogprob": "promptlab.llm.call.completion",
    "Iteration": "promptlab.record",
    "Run": "promptlab.record",
    "Score": "promptlab.record",
    "Step": "promptlab.record",
    "StepError": "promptlab.record",
    "Task": "promptlab.record",
    "Totals": "promptlab.record",
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
    "SpendingCap": "promptlab.llm.spending.cap",
    "RedisCache": "promptlab.llm.cache.redis",
    "register_model": "promptlab.llm.providers.aliases",
    "unregister_model": "promptlab.llm.providers.aliases",
    "registered_models": "promptlab.llm.providers.aliases",
    "ModelAlias": "promptlab.llm.providers.aliases",
    "Price": "promptlab.llm.providers.aliases",
    "Explorer": "promptlab.ui.explorer",
    "RunBrowser": "promptlab.ui.browser",
}

# The call path is imported with the root; loops, sweeps, pandas frames and plots wait for first use.
_CALL_PATH = (
    "promptlab.errors",
    "promptlab.events",
    "promptlab.record",
    "promptlab.llm.call.entry",
    "promptlab.llm.providers.scripted",
    "promptlab.llm.cache.location",
)
for _module in _CALL_PATH:
    _importlib.import_module(_module)

if TYPE_CHECKING:  # NAMES again, for a user's type checker (which cannot run `__getattr__`); tests/test_gates.py
    # checks that these imports and NAMES agree, name for name and module for module.
    from .analysis.bias import bias_table as bias_table
    from .analysis.bias_asks import probe_frames as probe_frames
    from .analysis.budget import equal_budget as equal_budget
    from .analysis.consistency import reliability as reliability
    from .analysis.critic import calibration as calibration
    from .analysis.paired import compare as compare
    from .analysis.paired import delta_table as delta_table
    from .analysis.stopping import counterfactual_stopping as counterfactual_stopping
    from .errors import CacheUnavailableError as CacheUnavailableError
    from .errors import ConfigError as ConfigError
    from .errors import MissingDependencyError as MissingDependencyError
    from .errors import MissingKeyError as MissingKeyError
    from .errors import ParseError as ParseError
    from .errors import PromptlabError as PromptlabError
    from .errors import ProviderError as ProviderError
    from .errors import SpendingCapExceeded as SpendingCapExceeded
    from .errors import SweepCellError as SweepCellError
    from .errors import UnknownModelError as UnknownModelError
    from .eval.evaluate import EvalResult as EvalResult
    from .eval.evaluate import aevaluate_prompt as aevaluate_prompt
    from .eval.evaluate import evaluate_prompt as evaluate_prompt
    from .eval.expected import ExpectedScore as ExpectedScore
    from .eval.expected import expected_scores as expected_scores
    from .eval.scorers import SCORERS as SCORERS
    from .eval.scorers import get_scorer as get_scorer
    from .eval.scoring import Scorer as Scorer
    from .eval.tasks import check_task as check_task
    from .eval.tasks import examples_of as examples_of
    from .eval.tasks import format_prompt as format_prompt
    from .eval.tasks import read_tasks as read_tasks
    from .eval.tasks import split_examples as split_examples
    from .events import Event as Event
    from .events import EventList as EventList
    from .events import PrintLog as PrintLog
    from .llm.cache.backend import CacheBackend as CacheBackend
    from .llm.cache.disk import Cache as Cache
    from .llm.cache.keys import cache_key as cache_key
    from .llm.cache.location import open_cache as open_cache
    from .llm.cache.redis import RedisCache as RedisCache
    from .llm.call.completion import Completion as Completion
    from .llm.call.completion import TokenLogprob as TokenLogprob
    from .llm.call.completion import TopLogprob as TopLogprob
    from .llm.call.entry import acomplete as acomplete
    from .llm.call.entry import complete as complete
    from .llm.call.settings import Settings as Settings
    from .llm.providers.aliases import ModelAlias as ModelAlias
    from .llm.providers.aliases import Price as Price
    from .llm.providers.aliases import register_model as register_model
    from .llm.providers.aliases import registered_models as registered_models
    from .llm.providers.aliases import unregister_model as unregister_model
    from .llm.providers.scripted import ScriptedModel as ScriptedModel
    from .llm.providers.scripted import ScriptedReply as ScriptedReply
    from .llm.providers.scripted import scripted as scripted
    from .llm.spending.cap import SpendingCap as SpendingCap
    from .llm.spending.tally import Tally as Tally
    from .llm.spending.tally import Usage as Usage
    from .loops.ape.loop import APEConfig as APEConfig
    from .loops.ape.loop import arun_ape as arun_ape
    from .loops.ape.loop import run_ape as run_ape
    from .loops.creator_critic.config import CreatorCriticConfig as CreatorCriticConfig
    from .loops.creator_critic.loop import arun_creator_critic as arun_creator_critic
    from .loops.creator_critic.loop import run_creator_critic as run_creator_critic
    from .loops.gepa.config import GEPAConfig as GEPAConfig
    from .loops.gepa.loop import arun_gepa as arun_gepa
    from .loops.gepa.loop import run_gepa as run_gepa
    from .loops.opro.loop import OPROConfig as OPROConfig
    from .loops.opro.loop import arun_opro as arun_opro
    from .loops.opro.loop import run_opro as run_opro
    from .loops.p3ro.config import P3ROConfig as P3ROConfig
    from .loops.p3ro.loop import arun_p3ro as arun_p3ro
    from .loops.p3ro.loop import run_p3ro as run_p3ro
    from .loops.pcee.loop import PCEEConfig as PCEEConfig
    from .loops.pcee.loop import arun_pcee as arun_pcee
    from .loops.pcee.loop import run_pcee as run_pcee
    from .loops.pes.agent import PESAgent as PESAgent
    from .loops.pes.agent import arun_pes as arun_pes
    from .loops.pes.agent import run_pes as run_pes
    from .loops.pes.config import Persona as Persona
    from .loops.pes.config import PESConfig as PESConfig
    from .loops.protegi.config import ProTeGiConfig as ProTeGiConfig
    from .loops.protegi.loop import arun_protegi as arun_protegi
    from .loops.protegi.loop import run_protegi as run_protegi
    from .loops.registry import arun_loop as arun_loop
    from .loops.registry import get_loop as get_loop
    from .loops.registry import run_loop as run_loop
    from .loops.resample.loop import ResampleConfig as ResampleConfig
    from .loops.resample.loop import arun_resample as arun_resample
    from .loops.resample.loop import run_resample as run_resample
    from .loops.runtime.config import LoopConfig as LoopConfig
    from .record import Example as Example
    from .record import GroundedScore as GroundedScore
    from .record import Iteration as Iteration
    from .record import Run as Run
    from .record import Score as Score
    from .record import Split as Split
    from .record import Step as Step
    from .record import StepError as StepError
    from .record import Task as Task
    from .record import Totals as Totals
    from .reports.summary import report as report
    from .results.store import Results as Results
    from .results.store import load as load
    from .sweeps.experiment import Experiment as Experiment
    from .sweeps.experiment import load_experiment as load_experiment
    from .sweeps.run import sweep as sweep
    from .ui.browser import RunBrowser as RunBrowser
    from .ui.explorer import Explorer as Explorer

# Old names kept working for a while (with a DeprecationWarning): "budget" now means only a loop's call/token budget.
_DEPRECATED = {
    "Budget": ("promptlab.llm.spending.cap", "SpendingCap"),
    "BudgetExceeded": ("promptlab.errors", "SpendingCapExceeded"),
}


def __getattr__(name: str) -> object:
    if name in _DEPRECATED:
        import warnings

        module, new = _DEPRECATED[name]
        warnings.warn(f"promptlab.{name} is deprecated: use promptlab.{new}", DeprecationWarning, stacklevel=2)
        return getattr(_importlib.import_module(module), new)
    if name in NAMES:
        value = getattr(_importlib.import_module(NAMES[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'promptlab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = ["__version__", *NAMES]
