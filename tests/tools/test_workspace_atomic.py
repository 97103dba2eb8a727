"""#41 item 7: workspace copies are atomic. A shell step's workspace is copied back beside the old contents and
swapped in; a copy that fails for any reason (it used to recurse, and a 1,500-deep chain of folders raised
RecursionError past the OSError it caught, leaving a 497-level partial copy that broke every later step) leaves
nothing behind, and the next step sees the workspace as it was. The copy and the removal loop over a stack, so any
depth of folders is copied whole."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from promptlab.tools import stager
from promptlab.tools.workspace import Workspace

DEPTH = 1_500


def chain(root: Path, depth: int = DEPTH) -> Path:
    """A chain of `depth` folders under root (made with relative steps: the full path is past PATH_MAX)."""
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            nxt = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        with open(os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "w") as f:
            f.write("bottom")
    finally:
        os.close(fd)
    return root


def depth_of(root: Path) -> int:
    n, here = 0, os.open(root, os.O_RDONLY)
    try:
        while True:
            try:
                nxt = os.open("d", os.O_RDONLY, dir_fd=here)
            except FileNotFoundError:
                return n
            os.close(here)
            here, n = nxt, n + 1
    finally:
        os.close(here)


def test_a_deep_chain_is_copied_back_whole(tmp_path: Path) -> None:
    stage, ws = tmp_path / "stage", tmp_path / "ws"
    stage.mkdir()
    chain(stage)
    ws.mkdir()
    (ws / "old.txt").write_text("before")
    try:
        stager.copy_out(str(stage), str(ws))
        assert depth_of(ws) == DEPTH and not (ws / "old.txt").exists()
        assert Workspace(ws).usage_bytes() == len("bottom")  # measured without recursion too
        stager.remove_tree(str(ws / "d"))
        assert not (ws / "d").exists()
    finally:  # pytest's own clean-up of tmp_path recurses (shutil.rmtree on 3.11) and fails on a 1,500-deep chain
        for root in (stage, ws):
            if (root / "d").exists():
                stager.remove_tree(str(root / "d"))


@pytest.mark.parametrize("error", [RecursionError("maximum recursion depth exceeded"), OSError(28, "No space")])
def test_a_copy_that_fails_leaves_the_workspace_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    stage, ws = tmp_path / "stage", tmp_path / "ws"
    stage.mkdir()
    for i in range(5):
        (stage / f"new{i}.txt").write_text("new")
    (stage / "sub").mkdir()
    (stage / "sub" / "deeper.txt").write_text("new")
    ws.mkdir()
    (ws / "old.txt").write_text("before")
    copied = []

    def fail_on_the_third(self: stager.Copier, src: str, dst: str, st: os.stat_result) -> None:
        copied.append(src)
        if len(copied) == 3:
            raise error
        real(self, src, dst, st)

    real = stager.Copier.file
    monkeypatch.setattr(stager.Copier, "file", fail_on_the_third)
    with pytest.raises(stager.StageError, match=f"not kept .*{type(error).__name__}.*as it was before the step"):
        stager.copy_out(str(stage), str(ws))
    assert sorted(p.name for p in ws.iterdir()) == ["old.txt"]  # nothing left behind, nothing half-swapped
    assert (ws / "old.txt").read_text() == "before"
