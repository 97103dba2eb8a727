"""Scripted MODEL critics with planted biases, and the Creator/Critic sweeps they judge: the validation of the
critic-bias probes through the real call path (prompt, scripted model, JSON parsing, the loop, the re-asks).

A replication is one small sweep at ONE fixed sample: 3 tasks x 4 creator styles (12 Creator/Critic runs of
5 rewrites, the starting prompt scored as candidate 0: 72 candidates, some repeated as loops repeat them: the
starting prompt in every run of its task, a first rewrite two styles share). Its critic is a scripted model
(`fake/...`) that reads the candidate it is shown from its prompt and scores it

    clip((1 - W') (2 + 6 q + B x (shown - 150) / 100 + offset + e + sum of r(s)) + W' x s0, 1, 10)

q the candidate's quality (its level, which the scripted target's dev accuracy follows), `shown` the characters
of the candidate in its prompt (a loop's `history_chars` cuts it), e ~ Normal(0, sd) a pure function of the
replication, the call's sample and the text shown (a model at temperature 0: the same text at the same sample
gets the same score), r(s) ~ Normal(0, sentence_sd) a fixed reaction to each distinct sentence s shown that is not
the candidate's own (its marker and filler; with `own_sentences`, to those as well): a pure function of the
replication and the sentence, a critic that reacts to what particular padding sentences say, with no length
preference, s0 a previous score shown in its prompt (W' = W when one is, else 0); in a pairwise
judgement it names the first shown with probability P, else the better one. `offset` pushes scores to the top
of the scale (saturation). Each replication's critic has its own model name, so its calls are new draws while
the creator's and the target's (which do not depend on the critic: show_critique=False) are cache hits.

Texts: "Task K vN level L. " + filler; the creator keeps the marker at the start, so a cut prompt still shows
it. The filler's length is drawn independently of the level, so length and quality vary apart.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

import promptlab
from promptlab.analysis.bias import bias_table
from promptlab.analysis.bias_asks import BUDGET, probe_frames
from promptlab.eval.tasks import split_examples
from promptlab.llm.cache.backend import CacheBackend, VerifyReport
from promptlab.loops.creator_critic.config import CreatorCriticConfig
from promptlab.loops.creator_critic.loop import run_creator_critic
from promptlab.record import Example, Split, Task
from promptlab.results.store import load, write_cell

LEVELS = 6
"""Quality levels 0..6: the dev accuracy of a level-L prompt is L / 6 (the target answers an example of difficulty d
right when d < L, `examples`)."""
FILLER = (
    "Answer the question that follows. ",
    "Reply in one word. ",
    "Think about what is asked first. ",
    "Use plain words. ",
    "Be brief and exact in the reply you give. ",
    "Do not add anything else. ",
)
MARK = re.compile(r"Task (\d+) v(\d+) level (\d+)\.")
STYLES = 4
"""Creator styles per task (a run each)."""
TASKS = 3
ITERATIONS = 5


def _unit(*parts: Any) -> float:
    """A uniform draw in [0, 1) that is a pure function of `parts`."""
    digest = hashlib.sha256("\x00".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _normal(*parts: Any) -> float:
    return random.Random(hashlib.sha256("\x00".join(map(str, parts)).encode()).digest()).gauss(0.0, 1.0)


def prompt_text(task: int, version: int, level: int, filler_chars: int) -> str:
    """A candidate: its marker, then whole filler sentences up to about `filler_chars` characters."""
    text, k = f"Task {task} v{version} level {level}. ", 0
    start = len(text)
    while len(text) - start < filler_chars:
        text += FILLER[(task + version + k) % len(FILLER)]
        k += 1
    return text.strip()


def creator_reply(style: int) -> Any:
    """The creator of one style: the next version from the marker of the latest one (level up or down by a
    draw, a filler of 0-320 characters), a pure function of task, version, level and style (styles 0 and 1
    write the same first rewrite)."""

    def respond(messages: list[dict[str, Any]]) -> str:
        found = MARK.search(messages[-1]["content"].split("Latest version:", 1)[-1])
        assert found is not None, messages[-1]["content"]
        task, version, level = (int(g) for g in found.groups())
        who = min(style, 1) if version == 0 else style
        step = (-1, 0, 1, 1, 2)[int(5 * _unit("step", task, version, level, who))]
        chars = int(320 * _unit("chars", task, version, level, who))
        return prompt_text(task, version + 1, max(0, min(LEVELS, level + step)), chars)

    return respond


def target_reply(messages: list[dict[str, Any]]) -> str:
    text = messages[-1]["content"]
    found = MARK.search(text)
    level = int(found.group(3)) if found else 0
    difficulty = int(text.rsplit("difficulty ", 1)[1].split()[0])
    return "yes" if difficulty < level else "no"


@dataclass(frozen=True)
class Planted:
    """A scripted critic's planted biases (the sizes the probes should read)."""

    per_100: float = 0.0
    """Points per 100 characters shown (length and padding)."""
    anchor: float = 0.0
    """Weight towards a shown previous score (anchoring)."""
    first: float = 0.0
    """Probability of naming the first shown in a pairwise judgement (order)."""
    sd: float = 0.7
    offset: float = 0.0
    """Added to every score before the clip: 6 puts about 60% of the logged scores at 10."""
    sentence_sd: float = 0.0
    """The sd of the fixed shift each distinct sentence shown (not the candidate's own) gives the score (0: none)."""
    own_sentences: bool = False
    """Whether the candidates' own sentences (FILLER, whose distinct count grows with length) get a shift too."""


ANCHOR = re.compile(r"scored ([0-9.]+) out of 10")


SENTENCE = re.compile(r"[^.!?]+[.!?]*")
OWN = {f.strip() for f in FILLER}
"""The candidates' own filler sentences."""


def sentences(text: str) -> set[str]:
    """The distinct sentences of a text (a cut text's last, partial one among them)."""
    return {s.strip() for s in SENTENCE.findall(text) if s.strip()} if text else set()


def critic_reply(planted: Planted, replication: int) -> Any:
    """The scripted critic's `respond(messages, params)`: critiques and pairwise judgements."""

    def raw(shown: str, sample: int, *context: str) -> float:
        found = MARK.search(shown)
        quality = int(found.group(3)) / LEVELS if found else 0.0
        e = planted.sd * _normal("critic", replication, sample, shown, *context)
        said = (
            sentences(shown)
            if planted.own_sentences
            else sentences(shown) - OWN - {m.group(0) for m in MARK.finditer(shown)}
        )
        react = sum(planted.sentence_sd * _normal("sentence", replication, s) for s in said)
        return 2 + 6 * quality + planted.per_100 * (len(shown) - 150) / 100 + planted.offset + e + react

    def score(shown: str, sample: int, anchor: float | None) -> float:
        value = raw(shown, sample)
        if anchor is not None:
            value = (1 - planted.anchor) * value + planted.anchor * anchor
        return round(min(10.0, max(1.0, value)), 3)

    def respond(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        text, sample = messages[-1]["content"], int(params["sample"])
        if "Prompt A:" in text:
            first, second = (part.split(">>>", 1)[0].strip() for part in text.split("<<<")[1:3])
            if _unit("first", replication, sample, first, second) < planted.first:
                return json.dumps({"better": "A", "reason": "first"})
            # its noise is the whole prompt's (a pair asked again is answered the same, another pair anew); a
            # comparison has no scale to saturate
            a, b = raw(first, sample, "A", second), raw(second, sample, "B", first)
            return json.dumps({"better": "A" if a >= b else "B", "reason": "better"})
        shown = text.split("<<<", 1)[1].split(">>>", 1)[0].strip()
        anchor = ANCHOR.search(text)
        value = score(shown, sample, float(anchor.group(1)) if anchor else None)
        return json.dumps({"score": value, "strengths": [], "weaknesses": [], "suggestions": []})

    return respond


SPLIT = Split(seed=0, dev=LEVELS)


def examples() -> list[Example]:
    """18 examples whose "difficulty" d (the target answers right when d < the prompt's level) is 0..5 once each on
    the dev split (6 examples, by the split's seed), so a level-L prompt's dev accuracy is exactly L / 6."""
    blank = Task(id="t", prompt="p", examples=[Example(input=str(i), target="yes") for i in range(18)], split=SPLIT)
    dev, test = split_examples(blank)
    difficulty = {i: k for k, i in enumerate(dev)} | {i: k % LEVELS for k, i in enumerate(test)}
    return [Example(input=f"item {i} difficulty {difficulty[i]}", target="yes") for i in range(18)]


EXAMPLES = examples()


def task(k: int) -> Task:
    return Task(
        id=f"t{k}",
        prompt=prompt_text(k, 0, 1 + k % 5, 40 + 60 * (k % 5)),
        goal="answer yes or no",
        examples=EXAMPLES,
        scorer={"kind": "exact"},
        split=SPLIT,
    )


class MemoryCache(CacheBackend):
    """A call cache in this process's memory (the simulation's creator and target calls, shared by replications)."""

    location = "memory"

    def __init__(self) -> None:
        self.records: dict[str, BaseModel] = {}

    def get(self, key: str, kind: Any = None) -> Any:
        found = self.records.get(key)
        return found.model_copy(deep=True) if found is not None else None

    def add(self, key: str, record: BaseModel) -> bool:
        self.records.setdefault(key, record.model_copy(deep=True))
        return True

    def set(self, key: str, record: BaseModel) -> None:
        self.records[key] = record.model_copy(deep=True)

    def discard(self, key: str) -> None:
        self.records.pop(key, None)

    def stats(self) -> dict[str, Any]:
        return {"location": self.location, "entries": len(self.records), "bytes": 0}

    def clear(self) -> int:
        n = len(self.records)
        self.records.clear()
        return n

    def verify(self, *, fix: bool = False) -> VerifyReport:
        raise NotImplementedError("an in-memory cache has nothing on disk to verify")

    def __contains__(self, key: str) -> bool:
        return key in self.records

    def __len__(self) -> int:
        return len(self.records)

    def close(self) -> None:
        return None


@dataclass
class Simulation:
    """Replications of one scenario: the sweep, its probes and its bias table, each at a fresh critic."""

    planted: Planted
    history_chars: int | None = None
    budget: int = BUDGET
    tasks: int = TASKS
    """Tasks of the sweep (4 runs each): more than TASKS gives a large budget more distinct candidates to re-ask."""
    cache: MemoryCache = field(default_factory=MemoryCache)

    def __post_init__(self) -> None:
        promptlab.scripted("mc-target", respond=target_reply)
        for style in range(STYLES):
            promptlab.scripted(f"mc-creator-{style}", respond=creator_reply(style))

    def replicate(self, replication: int, results_dir: Any) -> Any:
        """The bias table of one replication (its sweep written to `results_dir`)."""
        critic = promptlab.scripted(f"mc-critic-{replication}", respond=critic_reply(self.planted, replication))
        runs = []
        for k in range(self.tasks):
            for style in range(STYLES):
                cfg = CreatorCriticConfig(
                    model=f"fake/mc-creator-{style}",
                    target_model="fake/mc-target",
                    critic_model=critic.name,
                    max_iterations=ITERATIONS,
                    show_critique=False,
                    history_chars=self.history_chars,
                    final="best",
                )
                runs.append(run_creator_critic(task(k), cfg, sample=0, cache=self.cache))
        write_cell(results_dir, "cell", {"loop": "creator_critic", "critic_model": critic.name}, runs)
        frames = probe_frames(load(results_dir), budget=self.budget, cache=self.cache)
        return bias_table(frames), frames


__all__ = [
    "EXAMPLES",
    "MemoryCache",
    "Planted",
    "Simulation",
    "creator_reply",
    "critic_reply",
    "prompt_text",
    "sentences",
    "target_reply",
    "task",
]
