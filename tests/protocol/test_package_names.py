"""groupcoord.protocol's names load on first use, and are still all there: the public API (../shared/API.md)."""

from __future__ import annotations

import groupcoord.protocol as protocol
from groupcoord.protocol import messages
from groupcoord.protocol.shard.coordinator import GroupCoordinator


def test_every_public_name_resolves_to_its_defining_object():
    names = protocol.__all__
    assert "GroupCoordinator" in names and set(messages.__all__) <= set(names)
    assert protocol.GroupCoordinator is GroupCoordinator
    assert protocol.HeartbeatRequest is messages.HeartbeatRequest
    assert set(names) <= set(dir(protocol))
    namespace: dict = {}
    exec("from groupcoord.protocol import *", namespace)
    assert {n for n in namespace if not n.startswith("__")} == set(names)


def test_a_name_the_package_lacks_is_an_attribute_error():
    try:
        protocol.NoSuchRequest  # noqa: B018
    except AttributeError as e:
        assert "NoSuchRequest" in str(e)
    else:
        raise AssertionError("an unknown name resolved")


def test_the_lazy_table_and_the_imports_mypy_reads_name_the_same_things():
    # A name added to one and not the other would type-check and fail at run time, or the reverse.
    import ast
    from pathlib import Path

    tree = ast.parse(Path(protocol.__file__).read_text())
    checked = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    imported = {(node.module, alias.name) for node in checked.body if isinstance(node, ast.ImportFrom)
                for alias in node.names}
    assert {("messages", "*")} | {(home.lstrip("."), name) for name, home in protocol._HOMES.items()} == imported
