"""The rooms import one way only: protocol <- storage <- spark <- actors, and the client never imports the service.

Inside protocol/, the sub-rooms have their own direction (see DESIGN.md): the shared vocabulary at the root,
the shard runtime below the groups, `classic/` and `consumer/` side by side and never importing each other,
`offsets/` above both, and the coordinator on top. Every import counts: module level, inside a function,
and under `if TYPE_CHECKING:`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROOMS = {"protocol": "protocol", "storage": "storage", "spark": "spark", "actors": "actors"}

P = "groupcoord.protocol"
# The shared vocabulary: the protocol's root modules (not its package __init__, which re-exports API.md's names).
PROTOCOL_ROOT = {
    f"{P}.{name}"
    for name in (
        "apis", "commit_run", "config", "consumer_protocol", "errors", "messages", "partitioner", "records",
        "responses", "validation", "values",
    )
}
# The shard runtime below the groups; the coordinator (also in shard/) is the top of the protocol.
SHARD_RUNTIME = {f"{P}.shard", *(f"{P}.shard.{n}" for n in ("clock", "deferred", "log", "purgatory", "runtime",
                                                            "registry", "stats"))}

# What each package (and everything under it) may import of groupcoord, and which outside modules it may not.
# The longest matching key is a module's rule.
ALLOWED = {
    P: {P},  # the package __init__ and the coordinator: anything of the protocol
    # The shared vocabulary reaches into the sub-rooms only for what it re-exports or builds responses from.
    **{m: PROTOCOL_ROOT | {f"{P}.consumer.messages", f"{P}.consumer.records", f"{P}.classic.group",
                           f"{P}.assignors.consumer_protocol"} for m in PROTOCOL_ROOT},
    f"{P}.shard": PROTOCOL_ROOT | SHARD_RUNTIME,
    f"{P}.shard.coordinator": {P},
    # Turning a group of one protocol into the other: the one module below the coordinator that knows both.
    f"{P}.shard.conversions": {P},
    f"{P}.classic": PROTOCOL_ROOT | SHARD_RUNTIME | {f"{P}.classic", f"{P}.assignors"},
    f"{P}.consumer": PROTOCOL_ROOT | SHARD_RUNTIME | {f"{P}.consumer"},
    # offsets/ reads both kinds of group (the offsets of a group depend on the group, never the reverse).
    f"{P}.offsets": PROTOCOL_ROOT | SHARD_RUNTIME | {f"{P}.offsets", f"{P}.classic", f"{P}.consumer"},
    f"{P}.assignors": PROTOCOL_ROOT | {f"{P}.assignors"},
    # security/: Kafka's ACL model and per-API table, over the shared vocabulary's requests and responses.
    f"{P}.security": PROTOCOL_ROOT | {f"{P}.security", f"{P}.consumer.messages"},
    "groupcoord.storage": {"groupcoord.storage", P},
    "groupcoord.spark": {"groupcoord.spark", "groupcoord.storage", P},
    "groupcoord.actors": {"groupcoord.actors.client", "groupcoord.actors.service"},  # the package __init__
    "groupcoord.actors.client": {"groupcoord.actors.client", P},
    "groupcoord.actors.service": {
        "groupcoord.actors.service",
        "groupcoord.actors.client.handle",
        "groupcoord.actors.client.wire",  # how a batch crosses Ray, the same at both ends
        "groupcoord.storage",
        P,
    },
    # The tools (CLI, demo, offset reset) are the top: they may use every room; nothing but the tools imports them.
    "groupcoord.actors.tools": {
        "groupcoord.actors.tools",
        "groupcoord.actors.client",
        "groupcoord.actors.service",
        "groupcoord.spark",
        "groupcoord.storage",
        P,
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
FORBIDDEN_EXTERNAL = {"groupcoord.storage": {"ray", "pyspark", "raydp"}, "groupcoord.spark": {"ray.actor"}}
for _rule in ALLOWED:
    if _rule == P or _rule.startswith(P + "."):
        FORBIDDEN_EXTERNAL[_rule] = {"ray", "asyncio", "pyspark", "raydp"}


def _modules() -> dict[str, Path]:
    out = {}
    for room, folder in ROOMS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join(["groupcoord", room, *parts])] = path
    return out


MODULES = _modules()


def _imports(module: str, path: Path) -> set[str]:
    """Every module `path` imports anywhere in it, relative imports resolved against `module`.

    `from x import y` counts as importing `x.y` when that is one of our modules, else `x`. The parent
    packages Python imports on the way (`groupcoord.protocol` before `groupcoord.protocol.errors`) are not
    counted: they are not a dependency the code chose.
    """
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
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in MODULES else target)
    return found


IMPORTS = {m: _imports(m, p) for m, p in MODULES.items()}


def _rule_for(module: str) -> str | None:
    return next((p for p in sorted(ALLOWED, key=len, reverse=True) if module == p or module.startswith(p + ".")), None)


RULED = sorted(m for m in MODULES if _rule_for(m) is not None)


def _within(name: str, prefixes: set[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize("module", RULED)
def test_a_module_imports_only_the_rooms_below_it(module: str) -> None:
    rule = _rule_for(module)
    assert rule is not None
    path = MODULES[module].relative_to(ROOT)
    imported = IMPORTS[module]
    ours = {i for i in imported if i.startswith("groupcoord")}
    wrong = sorted(i for i in ours if not _within(i, ALLOWED[rule]))
    assert not wrong, f"{path} imports {wrong}; {rule} may import only {sorted(ALLOWED[rule])}"
    banned = sorted(i for i in imported if _within(i, FORBIDDEN_EXTERNAL.get(rule, set())))
    assert not banned, f"{path} imports {banned}, which {rule} must not use"


def test_classic_and_consumer_groups_never_import_each_other() -> None:
    crossing = sorted(
        (m, i)
        for a, b in ((f"{P}.classic", f"{P}.consumer"), (f"{P}.consumer", f"{P}.classic"))
        for m in MODULES
        if _within(m, {a})
        for i in IMPORTS[m]
        if _within(i, {b})
    )
    assert not crossing


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module, or of one module importing itself (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(root: str) -> None:  # iterative, so a long chain cannot hit the recursion limit
        nonlocal counter
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = counter
                    counter += 1
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_among_groupcoord_modules() -> None:
    graph = {m: {i for i in IMPORTS[m] if i in MODULES} for m in MODULES}
    cycles = _cycles(graph)
    assert not cycles, "import cycles (module, function and TYPE_CHECKING imports all count): " + "; ".join(
        " <-> ".join(c) for c in cycles
    )


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"a"}}) == [["a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_every_room_was_checked() -> None:
    for package in ALLOWED:
        assert any(m == package or m.startswith(package + ".") for m in RULED), package
    assert set(RULED) == set(MODULES)
    assert len(RULED) > 40
