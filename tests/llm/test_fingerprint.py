"""Inference fingerprints: their id and fields, a hosted reply's, the run's provenance, the runs frame, the report's
section and the warning on mixed fingerprints (offline; the local model's own fingerprint: test_reference.py)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from factories import CELL_A, CELL_B, runs_a, runs_b

from promptlab import analysis
from promptlab.llm.call.completion import Completion
from promptlab.llm.call.transport import reply_of
from promptlab.llm.local import fingerprint as fpr
from promptlab.llm.providers.resolved import resolve_model
from promptlab.loops.runtime.provenance import note_model
from promptlab.reports.fingerprints import fingerprint_markdown
from promptlab.results.store import load, write_cell

AVX2 = "CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | AVX512 = 0 | OPENMP = 1 |"
AVX512 = "CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | AVX512 = 1 | OPENMP = 1 |"


def local_fields(**changes: Any) -> dict[str, Any]:
    fields = {
        "kind": "local",
        "model": "m.gguf",
        "model_sha256": "ab" * 32,
        "llama_cpp_python": "0.3.36",
        "build": "portable",
        "cmake_args": "-DGGML_NATIVE=OFF",
        "system_info": AVX2,
        "engine": "pool",
        "extra_bufts": True,
        "weight_buffers": ["CPU"],
        "threads": 2,
        "instances": 1,
        "cpu": "AMD EPYC",
    }
    return fpr.with_id({**fields, **changes})


def test_the_id_hashes_what_decides_a_reply_and_not_the_cpu_name_threads_path_or_unused_settings() -> None:
    base = local_fields()
    assert base["id"] == fpr.fingerprint_id(base) and len(base["id"]) == 12
    same = local_fields(cpu="Intel Xeon", threads=1, instances=2, engine="batch", n_seq=16, extra_bufts=False)
    assert same["id"] == base["id"]
    for field, value in [
        ("system_info", AVX512),
        ("build", "native"),
        ("model_sha256", "cd" * 32),
        ("llama_cpp_python", "0.3.37"),
        ("weight_buffers", ["AMX", "CPU"]),
    ]:
        other = local_fields(**{field: value})
        assert other["id"] != base["id"], field
        assert fpr.differing_fields([base, other]) == [field]


def test_kernels_and_description_read_from_system_info() -> None:
    assert fpr.kernel_flags(AVX512) == "SSE3 AVX AVX2 F16C FMA AVX512 OPENMP"
    line = fpr.describe(local_fields())
    assert line.startswith(local_fields()["id"] + ": m.gguf (sha256 abababababab)")
    assert "portable build, kernels SSE3 AVX AVX2 F16C FMA OPENMP, pool (threads 2, instances 1)," in line
    assert "weights in CPU (extra buffer types on)" in line
    assert "on AMD EPYC" in line


def test_a_model_file_is_hashed_once_per_path_mtime_and_size(tmp_path: Path) -> None:
    f = tmp_path / "w.gguf"
    f.write_bytes(b"GGUF" + b"x" * 100)
    assert fpr.file_sha256(f) == hashlib.sha256(f.read_bytes()).hexdigest()
    hits = fpr._sha256.cache_info().hits
    fpr.file_sha256(f)
    assert fpr._sha256.cache_info().hits == hits + 1
    f.write_bytes(b"GGUF" + b"y" * 200)
    os.utime(f, ns=(1, 1))
    assert fpr.file_sha256(f) == hashlib.sha256(f.read_bytes()).hexdigest()


def test_a_hosted_reply_carries_its_reported_model_and_system_fingerprint() -> None:
    import litellm

    response = litellm.ModelResponse(
        model="gpt-4o-mini-2024-07-18",
        system_fingerprint="fp_44709d6fcb",
        choices=[{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    )
    reply = reply_of(resolve_model("gpt-4o-mini"), response)
    assert reply.fingerprint is not None
    assert reply.fingerprint["kind"] == "hosted" and reply.fingerprint["system_fingerprint"] == "fp_44709d6fcb"
    assert reply.fingerprint["model"] == reply.response_model == "gpt-4o-mini-2024-07-18"
    silent = fpr.hosted_fingerprint("gpt-4o-mini-2024-07-18", {"choices": []})
    assert silent["system_fingerprint"] is None and silent["id"] != reply.fingerprint["id"]


def test_a_runs_provenance_keeps_every_fingerprint_its_replies_rest_on() -> None:
    prov: dict[str, Any] = {}
    a, b = local_fields(), local_fields(system_info=AVX512)
    for role, fp in [("creator", a), ("critic", a), ("creator", b)]:
        note_model(prov, role, "local/smollm2", Completion(model="local/smollm2", text="x", fingerprint=fp))
    note_model(prov, "judge", "fake/j", Completion(model="fake/j", text="x"))
    assert prov["models"]["creator"]["fingerprint"] == a["id"] and "fingerprint" not in prov["models"]["judge"]
    assert prov["fingerprints"] == {"local/smollm2": {a["id"]: a, b["id"]: b}}


def with_fingerprint(runs: list[Any], fp: dict[str, Any]) -> list[Any]:
    for run in runs:
        run.provenance["fingerprints"] = {"local/smollm2": {fp["id"]: fp}}
    return runs


def test_the_report_states_its_fingerprints_and_warns_when_runs_mix_them(tmp_path: Path) -> None:
    from promptlab.reports.summary import report

    portable, native = local_fields(), local_fields(system_info=AVX512, build="native")
    write_cell(tmp_path, "a", CELL_A, with_fingerprint(runs_a(), portable), wall_time_s=1.0)
    write_cell(tmp_path, "b", CELL_B, with_fingerprint(runs_b(), native), wall_time_s=1.0)
    runs = load(tmp_path).runs
    assert set(runs["fingerprint"]) == {portable["id"], native["id"]}
    assert json.loads(runs["fingerprints"].iloc[0]) == {"local/smollm2": {portable["id"]: portable}}
    [warning] = analysis.mixed_fingerprints(runs)
    assert f"{native['id']}, {portable['id']}" in warning or f"{portable['id']}, {native['id']}" in warning
    assert "differ in build, system_info" in warning and "cells a, b" in warning
    assert warning in analysis.provenance_warnings(runs)
    section = fingerprint_markdown(runs)
    assert f"- local/smollm2: `{fpr.describe(portable)}` (4 runs)" in section
    assert f"- local/smollm2: `{fpr.describe(native)}` (4 runs)" in section
    text = report(tmp_path)["summary.md"].read_text()
    assert "## Inference fingerprints" in text and fpr.describe(native) in text
    assert "different inference fingerprints" in text


def test_one_fingerprint_is_no_warning_and_none_is_said(tmp_path: Path) -> None:
    write_cell(tmp_path, "a", CELL_A, with_fingerprint(runs_a(), local_fields()), wall_time_s=1.0)
    write_cell(tmp_path, "b", CELL_B, with_fingerprint(runs_b(), local_fields(threads=1, cpu="other")), wall_time_s=1.0)
    runs = load(tmp_path).runs
    assert analysis.mixed_fingerprints(runs) == [] and runs["fingerprint"].nunique() == 1
    bare = runs.assign(fingerprints=None)
    assert analysis.mixed_fingerprints(bare) == []
    assert "No reply carries an inference fingerprint" in " ".join(fingerprint_markdown(bare))


@pytest.mark.parametrize("text", ["model name\t: AMD EPYC 9B14\nflags : avx2\n", "Hardware : BCM2835\n"])
def test_the_cpu_name_is_read_from_cpuinfo(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text(text)
    monkeypatch.setattr(fpr, "CPUINFO", info)
    fpr.cpu_name.cache_clear()
    try:
        assert fpr.cpu_name() == text.split(":")[1].split("\n")[0].strip()
    finally:
        fpr.cpu_name.cache_clear()
