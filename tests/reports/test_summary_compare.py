"""scripts/demo's check that its summary.md is the committed one (experiments/demo.summary.md) but for the lines
that name the machine and the results folder: the fingerprint's description differs by CPU, the id must not."""

from __future__ import annotations

from pathlib import Path

from promptlab.reports.fingerprints import machine_free, summary_difference

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = (ROOT / "experiments" / "demo.summary.md").read_text()
FINGERPRINT = "- local/smollm2: `aac814573e10: SmolLM2-135M-Instruct.Q4_1.gguf (sha256 b179c9523d0e), llama-cpp-python"


def test_the_committed_summary_is_a_whole_demo_report_under_the_readmes_fingerprint() -> None:
    assert "Runs in ok cells: 63." in REFERENCE and "## Findings" in REFERENCE
    assert FINGERPRINT in REFERENCE
    assert "`aac814573e10`" in (ROOT / "README.md").read_text()


def test_another_machine_and_folder_under_the_same_fingerprint_agree() -> None:
    lines = REFERENCE.splitlines()
    lines[0] = "# Sweep report: /home/someone/elsewhere"
    at = next(i for i, line in enumerate(lines) if FINGERPRINT in line)
    lines[at] = lines[at].replace("Intel(R) Xeon(R) Processor", "AMD EPYC 7B13")
    assert summary_difference("\n".join(lines), REFERENCE) is None
    assert len(machine_free(REFERENCE)) == len(lines) - 2


def test_a_different_digit_in_an_interval_is_named_with_both_versions() -> None:
    changed = REFERENCE.replace("0.307 [0.271, 0.343]", "0.307 [0.274, 0.343]", 1)
    said = summary_difference(changed, REFERENCE)
    assert said is not None and "[0.274, 0.343]" in said and "[0.271, 0.343]" in said


def test_a_summary_cut_short_differs() -> None:
    cut = "\n".join(REFERENCE.splitlines()[:-3])
    assert (
        summary_difference(cut, REFERENCE)
        == f"{len(machine_free(cut))} lines compared against the reference's {len(machine_free(REFERENCE))}"
    )
