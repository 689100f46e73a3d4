"""Every Python block of README.md and docs/*.md runs, in order, each page against its own local service."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from groupcoord.actors import stop

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def python_blocks(page: Path) -> list[str]:
    """The fenced Python blocks of a Markdown page, in order."""
    return re.findall(r"^```python\n(.*?)^```", page.read_text(), re.S | re.M)


def test_the_docs_have_python_examples():
    assert len(python_blocks(ROOT / "README.md")) >= 1, "README.md lost its quick start"
    assert len(python_blocks(ROOT / "docs" / "clients.md")) >= 3, "docs/clients.md lost its examples"


def test_every_page_the_readme_links_exists():
    links = re.findall(r"\]\((docs/[^)#]+)", (ROOT / "README.md").read_text())
    assert links, "README.md links no page of docs/"
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, f"README.md links pages that do not exist: {missing}"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)], ids=lambda p: p.name)
def test_every_python_block_of_a_page_runs(page, ray_local, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the examples keep their storage under ./data
    scope: dict = {"__name__": page.stem}
    try:
        for number, block in enumerate(python_blocks(page), 1):
            exec(compile(block, f"{page.name}, Python block {number}", "exec"), scope)
    finally:
        stop()
