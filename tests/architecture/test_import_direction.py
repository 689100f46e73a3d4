"""The rooms import one way only: protocol <- storage <- spark <- actors, and the client never imports the service."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROOMS = {"protocol": "protocol", "storage": "storage", "spark": "spark", "actors": "actors"}

# What each package (and everything under it) may import of groupcoord, and which outside modules it may not.
ALLOWED = {
    "groupcoord.protocol": {"groupcoord.protocol"},
    "groupcoord.storage": {"groupcoord.storage", "groupcoord.protocol"},
    "groupcoord.spark": {"groupcoord.spark", "groupcoord.storage", "groupcoord.protocol"},
    "groupcoord.actors.client": {"groupcoord.actors.client", "groupcoord.protocol"},
    "groupcoord.actors.service": {
        "groupcoord.actors.service",
        "groupcoord.actors.client.handle",
        "groupcoord.storage",
        "groupcoord.protocol",
    },
    # The Kafka listener is a client of the partition actors on behalf of Kafka connections: its requests go
    # through the one request coalescer the client library uses (shared batch calls), not a second copy of it.
    "groupcoord.actors.service.kafka": {
        "groupcoord.actors.service",
        "groupcoord.actors.client.handle",
        "groupcoord.actors.client.coalescer",
        "groupcoord.storage",
        "groupcoord.protocol",
    },
}
FORBIDDEN_EXTERNAL = {
    "groupcoord.protocol": {"ray", "asyncio", "pyspark", "raydp"},
    "groupcoord.storage": {"ray", "pyspark", "raydp"},
    "groupcoord.spark": {"ray.actor"},
    "groupcoord.actors.client": set(),
    "groupcoord.actors.service": set(),
    "groupcoord.actors.service.kafka": set(),
}


def _modules() -> list[tuple[str, Path]]:
    out = []
    for room, folder in ROOMS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join(["groupcoord", room, *parts])
            out.append((name, path))
    return out


def _imports(module: str, path: Path) -> set[str]:
    """Every module `path` imports, with relative imports resolved against `module`."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            # `from . import service` imports a submodule
            found.update(f"{target}.{alias.name}" for alias in node.names if not node.module)
    return found


def _rule_for(module: str) -> str | None:
    return next((p for p in sorted(ALLOWED, key=len, reverse=True) if module == p or module.startswith(p + ".")), None)


MODULES = [(m, p) for m, p in _modules() if _rule_for(m) is not None]


def _within(name: str, prefixes: set[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[m for m, _ in MODULES])
def test_a_module_imports_only_the_rooms_below_it(module: str, path: Path) -> None:
    rule = _rule_for(module)
    assert rule is not None
    imported = _imports(module, path)
    ours = {i for i in imported if i.startswith("groupcoord")}
    wrong = sorted(i for i in ours if not _within(i, ALLOWED[rule]))
    assert not wrong, f"{path.relative_to(ROOT)} imports {wrong}; {rule} may import only {sorted(ALLOWED[rule])}"
    banned = sorted(i for i in imported if _within(i, FORBIDDEN_EXTERNAL[rule]))
    assert not banned, f"{path.relative_to(ROOT)} imports {banned}, which {rule} must not use"


def test_every_room_was_checked() -> None:
    checked = {m for m, _ in MODULES}
    for package in ALLOWED:
        assert any(m == package or m.startswith(package + ".") for m in checked), package
    assert len(checked) > 40
