"""Write the grounded task sets under data/ from phrase banks and a fixed seed (nothing is downloaded).

    python data/make_datasets.py [--out DIR]      (default: the directory of this script)

Writes ``grounded/sentiment.jsonl``, ``grounded/arithmetic.jsonl``, ``grounded/dates.jsonl`` (one
``{"id", "input", "target"}`` per line) and ``grounded_tasks.jsonl`` (one task per line: id, prompt, goal,
examples, scorer, split). Running it again writes the same bytes: every choice comes from one
``random.Random(SEED)`` per set, and the files are written with fixed key order and ``\\n`` line ends.

- sentiment: short product reviews, label ``positive`` or ``negative`` (balanced). The wording is varied on
  purpose so a keyword match does not solve it: negated praise and complaints ("not worth the price", "can't
  fault it"), a minor point of the opposite polarity followed by the main verdict ("The box was dented, but
  ..."), and closers with no sentiment words. The label is the polarity of the main verdict.
- arithmetic: one- and two-step word problems with small whole numbers; the answer is computed here.
- dates: a date written in one of nine styles (month names, ordinals, weekdays, year-first numbers) inside a
  sentence; the target is the date as YYYY-MM-DD. Numeric day/month orders that could be read two ways
  (03/05/2021) are not used.

The starting prompts are deliberately plain (a first attempt a user might write), so a refinement loop has
room to improve them; their measured accuracy on the local model is in the README.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

SEED = 0
"""The one seed every set is drawn from (each set uses its own Random(SEED + k))."""
SIZE = 120
"""Examples per set."""
SPLIT = {"seed": 0, "dev": 20, "test": 60}
"""Dev/test sizes of every task (the remaining examples are unused spares)."""

# sentiment -------------------------------------------------------------------------------------------------
PRODUCTS = [
    "pair of headphones",
    "blender",
    "backpack",
    "phone case",
    "desk lamp",
    "coffee grinder",
    "pair of running shoes",
    "keyboard",
    "water bottle",
    "tent",
    "vacuum",
    "charger",
    "kettle",
    "office chair",
    "umbrella",
    "toaster",
    "yoga mat",
    "smart watch",
    "frying pan",
    "hair dryer",
]
GOOD = [
    "works exactly as described",
    "has held up through months of daily use",
    "is worth every penny",
    "does the job better than the pricier one I had",
    "feels solid and well made",
    "arrived early and has worked perfectly since",
    "is easy to clean and store",
    "made my mornings easier",
    "still looks new after a year",
    "was a gift and my brother uses it every day",
    "exceeded what I expected for the price",
    "is a pleasure to use every day",
]
BAD = [
    "stopped working after a week",
    "broke the second time I used it",
    "is flimsy and already cracked",
    "was a waste of money",
    "never worked properly",
    "smells of cheap plastic",
    "fell apart within a month",
    "is much smaller than the photos suggest",
    "gave up after two uses",
    "already has a crack down one side",
    "feels cheaper than it looks",
    "arrived scratched and the seller ignored me",
]
GOOD_NEGATED = [
    "I can't fault it",
    "I have no complaints at all",
    "it never lets me down",
    "it's not bad at all, honestly",
    "I wouldn't swap it for anything",
    "nothing has gone wrong yet",
]
BAD_NEGATED = [
    "it's not worth the price",
    "I wouldn't buy it again",
    "it doesn't do what the listing claims",
    "it hardly ever works the way it should",
    "I can't recommend it",
    "it isn't fit for purpose",
]
MINOR_GOOD = [
    "The colour is nice",
    "Delivery was quick",
    "The box looked great",
    "Setup took two minutes",
    "The price seemed fair",
]
MINOR_BAD = [
    "The box was dented",
    "Delivery took a while",
    "The manual is confusing",
    "It's a bit heavy",
    "The cable is short",
]
OPENERS = [
    "",
    "",
    "Bought this for my flat. ",
    "Second one I've owned. ",
    "Update after a month: ",
    "Ordered on a whim. ",
    "Used it for a weekend trip. ",
]
CLOSERS = {
    "positive": ["", "", "Would buy again.", "Five stars from me.", "Ordering another for my mum."],
    "negative": ["", "", "Sending it back.", "One star.", "Save your money."],
}


def _review(rng: random.Random, label: str) -> str:
    product = rng.choice(PRODUCTS)
    main = GOOD if label == "positive" else BAD
    negated = GOOD_NEGATED if label == "positive" else BAD_NEGATED
    minor = MINOR_BAD if label == "positive" else MINOR_GOOD
    shape = rng.randrange(4)
    if shape == 0:  # plain verdict
        body = f"This {product} {rng.choice(main)}."
    elif shape == 1:  # negated wording
        body = f"As for the {product}, {rng.choice(negated)}."
    elif shape == 2:  # a minor point of the other polarity, then the verdict
        body = f"{rng.choice(minor)}, but the {product} {rng.choice(main)}."
    else:  # two verdicts of the same polarity
        first, second = rng.sample(main, 2)
        body = f"The {product} {first}, and {rng.choice(negated)}. It {second}."
    closer = rng.choice(CLOSERS[label])
    return f"{rng.choice(OPENERS)}{body}{' ' + closer if closer else ''}"


def sentiment(rng: random.Random) -> list[dict[str, Any]]:
    """Balanced positive/negative reviews in a shuffled order."""
    labels = ["positive", "negative"] * (SIZE // 2)
    rng.shuffle(labels)
    return [{"input": _review(rng, label), "target": label} for label in labels]


# arithmetic ------------------------------------------------------------------------------------------------
NAMES = ["Maria", "Tom", "Aisha", "Ken", "Lena", "Omar", "Priya", "Jonas", "Sofia", "Diego", "Mei", "Sam"]
THINGS = ["apples", "marbles", "stickers", "pencils", "cookies", "stamps", "shells", "cards", "eggs", "books"]


def _add(rng: random.Random, name: str, things: str) -> tuple[str, int]:
    a, b = rng.randint(3, 40), rng.randint(2, 30)
    return f"{name} has {a} {things}. A friend gives {name} {b} more. How many {things} does {name} have now?", a + b


def _sub(rng: random.Random, name: str, things: str) -> tuple[str, int]:
    a = rng.randint(12, 60)
    b = rng.randint(2, a - 3)
    return f"{name} had {a} {things} and gave away {b}. How many {things} are left?", a - b


def _mul(rng: random.Random, name: str, things: str) -> tuple[str, int]:
    a, b = rng.randint(2, 9), rng.randint(3, 12)
    return f"{name} fills {a} bags with {b} {things} in each bag. How many {things} is that altogether?", a * b


def _div(rng: random.Random, name: str, things: str) -> tuple[str, int]:
    each, k = rng.randint(2, 12), rng.randint(2, 8)
    return (
        f"{name} shares {each * k} {things} equally among {k} children. How many {things} does each child get?",
        each,
    )


def _two_step(rng: random.Random, name: str, things: str) -> tuple[str, int]:
    packs, per = rng.randint(2, 6), rng.randint(3, 10)
    lost = rng.randint(1, packs * per - 1)
    return (
        f"{name} buys {packs} packs of {things} with {per} in each pack, then loses {lost} of them. How many "
        f"{things} does {name} have left?",
        packs * per - lost,
    )


def _more_than(rng: random.Random, name: str, things: str) -> tuple[str, int]:
    other = rng.choice([n for n in NAMES if n != name])
    a, b = rng.randint(5, 30), rng.randint(2, 15)
    return (
        f"{other} has {a} {things}. {name} has {b} more {things} than {other}. How many {things} do they have "
        f"together?",
        a + (a + b),
    )


PROBLEMS: list[tuple[Callable[[random.Random, str, str], tuple[str, int]], int]] = [
    (_add, 30),
    (_sub, 25),
    (_mul, 20),
    (_div, 15),
    (_two_step, 15),
    (_more_than, 15),
]
"""Problem makers and how many of each (sum = SIZE)."""


def arithmetic(rng: random.Random) -> list[dict[str, Any]]:
    """Word problems of six kinds in a shuffled order; each target is computed by its maker."""
    makers = [make for make, count in PROBLEMS for _ in range(count)]
    rng.shuffle(makers)
    out = []
    for make in makers:
        text, answer = make(rng, rng.choice(NAMES), rng.choice(THINGS))
        out.append({"input": text, "target": answer})
    return out


# dates -----------------------------------------------------------------------------------------------------
SENTENCES = [
    "The meeting was moved to {date}.",
    "{name} was born on {date}, in a small town by the sea.",
    "We signed the lease on {date} after weeks of back and forth.",
    "Please send the form back before {date}.",
    "The shop reopens on {date}, according to the sign.",
    "On {date} the team shipped its first release.",
    "My flight leaves {date} early in the morning.",
    "The invoice is dated {date}.",
    "{name} started the new job on {date}.",
    "Tickets for the concert on {date} sold out in an hour.",
]


def _ordinal(n: int) -> str:
    suffix = "th" if 11 <= n % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def _month(d: dt.date) -> str:
    return _MONTHS[d.month - 1]  # English whatever the process locale (strftime's %B is locale-bound)


DATE_STYLES: list[Callable[[dt.date], str]] = [
    lambda d: f"{_month(d)} {d.day}, {d.year}",  # March 5, 2021
    lambda d: f"{d.day} {_month(d)} {d.year}",  # 5 March 2021
    lambda d: f"{_month(d)[:3]}. {d.day}, {d.year}",  # Mar. 5, 2021
    lambda d: f"the {_ordinal(d.day)} of {_month(d)}, {d.year}",  # the 5th of March, 2021
    lambda d: f"{_month(d)} {_ordinal(d.day)}, {d.year}",  # March 5th, 2021
    lambda d: f"{d.year}/{d.month:02d}/{d.day:02d}",  # 2021/03/05
    lambda d: f"{d.day:02d} {_month(d)[:3]} {d.year}",  # 05 Mar 2021
    lambda d: f"{_DAYS[d.weekday()]}, {_month(d)} {d.day}, {d.year}",  # Friday, March 5, 2021
    lambda d: f"{d.year}.{d.month:02d}.{d.day:02d}",  # 2021.03.05
]
"""Unambiguous ways to write a date (no day/month order that could be read two ways)."""


def dates(rng: random.Random) -> list[dict[str, Any]]:
    """Sentences holding one date each (styles used equally often, shuffled); target YYYY-MM-DD."""
    styles = [DATE_STYLES[i % len(DATE_STYLES)] for i in range(SIZE)]
    rng.shuffle(styles)
    start, span = dt.date(1985, 1, 1), (dt.date(2030, 12, 31) - dt.date(1985, 1, 1)).days
    out = []
    for style in styles:
        d = start + dt.timedelta(days=rng.randrange(span + 1))
        sentence = rng.choice(SENTENCES).format(date=style(d), name=rng.choice(NAMES))
        out.append({"input": sentence[0].upper() + sentence[1:], "target": d.isoformat()})
    return out


# tasks -----------------------------------------------------------------------------------------------------
TASKS: list[dict[str, Any]] = [
    {
        "id": "sentiment",
        "make": sentiment,
        "prompt": "What do you think of this review?\n\n{input}",
        "goal": "A prompt that makes the model label a short product review as positive or negative, answering "
        "with exactly one of the two words.",
        "scorer": {"kind": "choice", "labels": ["positive", "negative"]},
    },
    {
        "id": "arithmetic",
        "make": arithmetic,
        "prompt": "{input}",
        "goal": "A prompt that makes the model solve a short arithmetic word problem and give the answer as a "
        "single whole number.",
        "scorer": {"kind": "numeric", "pick": "last"},
    },
    {
        "id": "dates",
        "make": dates,
        "prompt": "Write the date from this sentence in YYYY-MM-DD format.\n\n{input}",
        "goal": "A prompt that makes the model find the date in a sentence and write it as YYYY-MM-DD "
        "(for example 2021-03-05), with nothing else.",
        "scorer": {"kind": "regex", "pattern": r"\d{4}-\d{2}-\d{2}", "group": 0},
    },
]
"""The grounded tasks: id, example maker, starting prompt, goal and scorer spec."""


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def write(out: Path) -> list[Path]:
    """Write every examples file and the task file under `out`; return the paths written."""
    (out / "grounded").mkdir(parents=True, exist_ok=True)
    written, tasks = [], []
    for k, spec in enumerate(TASKS):
        rows = spec["make"](random.Random(SEED + k))
        examples = [{"id": f"{spec['id']}-{i:03d}", **row} for i, row in enumerate(rows)]
        path = out / "grounded" / f"{spec['id']}.jsonl"
        path.write_text(_jsonl(examples), encoding="utf-8", newline="\n")
        written.append(path)
        tasks.append(
            {
                "id": spec["id"],
                "prompt": spec["prompt"],
                "goal": spec["goal"],
                "examples": f"grounded/{spec['id']}.jsonl",
                "scorer": spec["scorer"],
                "split": SPLIT,
            }
        )
    path = out / "grounded_tasks.jsonl"
    path.write_text(_jsonl(tasks), encoding="utf-8", newline="\n")
    return [*written, path]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent, help="where to write")
    for path in write(p.parse_args().out):
        print(path)


if __name__ == "__main__":
    main()
