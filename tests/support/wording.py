"""A grounded task whose target model's accuracy is a KNOWN function of the prompt's wording, and scripted
writers for each prompt-search loop, for tests that check each optimizer finds the best wording.

The target (`target_model`, registered as `fake/<name>-target` like any scripted model) answers example i
right ("yes") iff the prompt contains at least `difficulty(i) = i % 4` of the three KEYWORDS, so a prompt with
k of them has accuracy #{i : i % 4 <= k} / n on any set of examples: the best wording holds all three (1.0 on
every split) and nothing else reaches it. The writers are scripted too: they see only what each loop's
request shows them, so a loop finds the best wording only if its mechanism (scores shown in order, errors
turned into reasons and edits, a bandit that keeps the best) works.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import promptlab
from promptlab.record import Example, Split, Task

KEYWORDS = ("careful", "label", "exactly")
"""The words the target rewards, in the order the writers add them."""
START = "Answer the item."
"""The starting prompt: none of the keywords, accuracy 1/4."""
BEST = "Be careful to label the item exactly."
"""A wording with every keyword (accuracy 1.0)."""

TASK = Task(
    id="wording",
    prompt=START,
    goal="answer yes",
    examples=[Example(input=f"item {i}", target="yes") for i in range(40)],
    scorer={"kind": "exact"},
    split=Split(seed=0, dev=20, test=20),
)


def keywords_in(prompt: str) -> int:
    """How many of the keywords `prompt` contains (case-insensitive)."""
    return sum(k in prompt.lower() for k in KEYWORDS)


def accuracy(prompt: str, items: list[int]) -> float:
    """The known accuracy of `prompt` on the examples numbered `items`."""
    return sum(i % 4 <= keywords_in(prompt) for i in items) / len(items)


def target_reply(messages: list[dict[str, Any]]) -> str:
    """The target: 'yes' iff the prompt holds at least `item % 4` keywords."""
    text = messages[-1]["content"]
    item = int(text.rsplit("item ", 1)[1].split()[0])
    return "yes" if keywords_in(text.rsplit("item ", 1)[0]) >= item % 4 else "no"


def add_keyword(prompt: str) -> str:
    """`prompt` with the first keyword it lacks added (the same prompt when it has them all)."""
    missing = [k for k in KEYWORDS if k not in prompt.lower()]
    return f"{prompt.rstrip('.')} and be {missing[0]}." if missing else prompt


def quoted(text: str, after: str) -> str:
    """The text between the first pair of double quotes after `after` (how ProTeGi's requests quote the prompt)."""
    return text.split(after, 1)[1].split('"', 2)[1]


def opro_optimizer(messages: list[dict[str, Any]]) -> str:
    """Reads the meta-prompt's history (ascending: the best last) and adds a keyword to the best instruction."""
    text = messages[-1]["content"]
    shown = re.findall(r"text:\n(.*?)\nscore:\n(\d+)", text, flags=re.DOTALL)
    best = shown[-1][0] if shown else START
    return json.dumps({"instruction": add_keyword(best)})


def cycling(field: str, texts: list[str]) -> Callable[[list[dict[str, Any]]], str]:
    """A writer that replies with `texts` in turn (then the last one), as JSON `{field: text}`."""
    queue = list(texts)
    return lambda messages: json.dumps({field: queue.pop(0) if len(queue) > 1 else queue[0]})


def ape_resampler(messages: list[dict[str, Any]]) -> str:
    """Rewords an instruction by adding a keyword it lacks (so rewording the best climbs)."""
    instruction = messages[-1]["content"].split("Instruction:\n", 1)[1].split("\n\nReply", 1)[0]
    return json.dumps({"prompt": add_keyword(instruction)})


def protegi_writer(messages: list[dict[str, Any]]) -> str:
    """Gradient: the reason names the first keyword the prompt lacks; edit: adds the keyword the reason names;
    paraphrase: the same words with 'Please,' in front (a distinct text of the same accuracy)."""
    text = messages[-1]["content"]
    if '"reasons"' in text:
        prompt = quoted(text, "The prompt:")
        missing = [k for k in KEYWORDS if k not in prompt.lower()]
        return json.dumps({"reasons": [f"it never says {missing[0]!r}" if missing else "it is vague"]})
    if '"prompts"' in text:
        prompt = quoted(text, "The prompt:")
        named = re.search(r"never says '(\w+)'", text)
        return json.dumps({"prompts": [f"{prompt.rstrip('.')} and be {named.group(1)}." if named else prompt]})
    instruction = text.split("Instruction:\n", 1)[1].split("\n\nReply", 1)[0]
    return json.dumps({"prompt": f"Please, {instruction[0].lower()}{instruction[1:]}"})


def gepa_reflector(messages: list[dict[str, Any]]) -> str:
    """GEPA's reflection model: adds the first keyword the prompt GEPA shows (its first ``` block) lacks, and
    replies in a ``` block as GEPA's reflection prompt asks."""
    shown = messages[-1]["content"].split("```\n", 1)[1].split("\n```", 1)[0]
    return f"```\n{add_keyword(shown)}\n```"


def write_gepa_cell(results_dir: Any, budget_calls: int = 120, samples: int = 2) -> Any:
    """A cell `gepa` of GEPA runs on TASK (`samples` replicates) with `gepa_reflector` and the known target, in
    `results_dir`; returns its path."""
    from promptlab.loops.registry import run_loop
    from promptlab.results.store import write_cell

    writer, target = models("sweep-gepa", gepa_reflector)
    cfg = {"model": writer.name, "target_model": target.name, "budget_calls": budget_calls}
    runs = [run_loop("gepa", TASK, cfg, sample=s, cache=False) for s in range(samples)]
    write_cell(results_dir, "gepa", {"loop": "gepa"}, runs)
    return results_dir


def models(name: str, writer: Callable[[list[dict[str, Any]]], str]) -> tuple[Any, Any]:
    """(writer, target) scripted models `fake/<name>-writer` and `fake/<name>-target`."""
    return (
        promptlab.scripted(f"{name}-writer", respond=writer),
        promptlab.scripted(f"{name}-target", respond=target_reply),
    )


def ape_writer(proposals: list[str]) -> Callable[[list[dict[str, Any]]], str]:
    """APE's proposer replies with `proposals` in turn; its resampler adds a keyword (rewording the best climbs)."""
    propose = cycling("instruction", proposals)
    return lambda m: propose(m) if '"instruction"' in m[-1]["content"] else ape_resampler(m)


WRITERS: dict[str, tuple[Callable[[], Callable[[list[dict[str, Any]]], str]], dict[str, Any]]] = {
    # OPRO climbs only if its meta-prompt shows the best instruction last (ascending order)
    "opro": (lambda: opro_optimizer, {"candidates_per_step": 2, "max_iterations": 5}),
    # APE's proposals hold at most one keyword: only the iterative rounds (rewording the best) reach all three
    "ape": (
        lambda: ape_writer(["Say yes.", "Be careful.", "Label it."]),
        {"demo_sets": 2, "proposals_per_set": 2, "max_iterations": 2, "keep": 1, "variations": 1},
    ),
    # ProTeGi reaches them only through reasons drawn from the errors and edits that follow them
    "protegi": (
        lambda: protegi_writer,
        {"max_iterations": 3, "beam_size": 2, "samples_per_eval": 5, "n_gradients": 1, "mc_samples_per_step": 1},
    ),
    # resample finds the best wording only if it is among its draws (the 4th) and it keeps the best on dev
    "resample": (
        lambda: cycling("prompt", ["Reply to the item.", "Be careful.", "Label it.", BEST, "Say no."]),
        {"max_iterations": 6},
    ),
}
"""Per search loop: a factory of a fresh scripted writer (its state starts anew for each run) and the config
under which the loop finds the best wording."""


def run_search(loop: str, name: str, *, sample: int = 0, cache: Any = False, **extra: Any) -> tuple[Any, Any, Any]:
    """(run, writer, target) of `loop` on TASK with its scripted writer (`WRITERS`) and the known target."""
    from promptlab.loops.registry import run_loop

    factory, cfg = WRITERS[loop]
    writer, target = models(name, factory())
    run = run_loop(
        loop,
        TASK,
        {"model": writer.name, "target_model": target.name, "budget_calls": 400, **cfg, **extra},
        sample=sample,
        cache=cache,
    )
    return run, writer, target


def write_baselines_sweep(results_dir: Any, budget_calls: int = 120) -> Any:
    """A results directory of the four search loops on TASK (one cell each, 2 samples), budgeted in calls,
    made by running them on the scripted models; returns its path."""
    from promptlab.results.store import write_cell

    for loop in WRITERS:
        runs = [run_search(loop, f"sweep-{loop}", sample=s, budget_calls=budget_calls)[0] for s in range(2)]
        write_cell(results_dir, loop, {"loop": loop}, runs)
    return results_dir
