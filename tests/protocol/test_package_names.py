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
