"""docs/loops.md's tables of where each loop differs from its design document (a baseline: its paper) name, per row,
the scripted test in tests/loops/ that runs the row's behaviour: each named test exists in that loop's files (its
own, its `_seed` file, the file of candidate 0, which both grounded prompt loops share, or the file on how the
four design-document loops read replies; the baselines share one file)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = "test_start_candidate.py"  # candidate 0, run the same way in both grounded prompt loops
SEARCH = ("test_search_loops.py",)  # the four baselines
REPLIES = (
    "test_design_replies.py"  # how every role's reply is read, and the reply cap, across the four design-document loops
)
LOOP_FILES = {
    "P³RO": ("test_p3ro.py", "test_p3ro_design.py", SHARED, REPLIES),
    "Creator/Critic (PromptForge)": (
        "test_creator_critic.py",
        "test_creator_critic_design.py",
        SHARED,
        REPLIES,
        "test_creator_feedback.py",
    ),
    "PES (Plan-Execute-Synthesize)": ("test_pes.py", "test_pes_design.py", REPLIES),
    "PCEE (Planner-Controller-Executor-Evaluator)": ("test_pcee.py", "test_pcee_design.py", REPLIES),
    "OPRO (Yang et al. 2023)": SEARCH,
    "APE (Zhou et al. 2022)": SEARCH,
    "ProTeGi (Pryzant et al. 2023)": SEARCH,
    "Resample (the no-feedback control)": SEARCH,
    "GEPA (Agrawal et al. 2025)": ("test_gepa.py",),
}


def table_rows() -> dict[str, list[list[str]]]:
    """Loop heading -> the rows (cells) of its table in docs/loops.md's section."""
    text = (ROOT / "docs" / "loops.md").read_text(encoding="utf-8")
    section = text.split("## Where each loop differs from its design document", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, list[list[str]]] = {}
    loop = None
    for line in section.splitlines():
        heading = re.fullmatch(r"\*\*(.+)\*\*", line.strip())
        if heading:
            loop = heading.group(1)
        elif line.startswith("| ") and loop is not None and not line.startswith(("| design document", "| paper |")):
            rows.setdefault(loop, []).append([c.strip() for c in line.strip().strip("|").split(" | ")])
    return rows


def test_every_row_names_a_scripted_test_of_its_loop_that_exists() -> None:
    rows = table_rows()
    assert set(rows) == set(LOOP_FILES), rows.keys()
    for loop, table in rows.items():
        source = "\n".join((ROOT / "tests" / "loops" / f).read_text(encoding="utf-8") for f in LOOP_FILES[loop])
        assert len(table) >= 5, loop
        for cells in table:
            assert len(cells) == 4, cells
            name = re.fullmatch(r"`(test_\w+)`", cells[3])
            assert name, f"{loop}: row without a test: {cells[0]}"
            assert f"def {name.group(1)}(" in source, f"{loop}: {name.group(1)} is not in {LOOP_FILES[loop]}"
            assert "@pytest.mark.local_model\ndef " + name.group(1) not in source  # scripted, not the local model
