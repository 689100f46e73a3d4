"""Every Python block of README.md runs, in order, against a local service: the README cannot go stale."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from groupcoord.actors import stop

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", README.read_text(), re.S | re.M)


def test_the_readme_has_python_examples():
    assert len(BLOCKS) >= 3, "README.md lost its Python examples"


@pytest.mark.timeout(600)
def test_every_python_block_of_the_readme_runs(ray_local, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the examples keep their storage under ./data
    scope: dict = {"__name__": "readme"}
    try:
        for number, block in enumerate(BLOCKS, 1):
            exec(compile(block, f"README.md, Python block {number}", "exec"), scope)
    finally:
        stop()
