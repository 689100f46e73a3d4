"""Credentials hide their secret; hashes verify only the right secret; the request quota's throttle."""

import pytest

from groupcoord.protocol.security.credentials import Credentials, SecretHash, principal_of
from groupcoord.protocol.security.quota import RequestQuota


def test_repr_and_str_never_show_the_secret():
    c = Credentials("User:billing", "s3cr3t-value")
    assert "s3cr3t-value" not in repr(c) and "s3cr3t-value" not in str(c) and "s3cr3t-value" not in f"{c}"
    assert "User:billing" in repr(c)


def test_from_env_parses_the_principal_and_keeps_colons_in_the_secret():
    assert Credentials.from_env({}) is None
    c = Credentials.from_env({"GROUPCOORD_CREDENTIALS": "User:billing:a:b"})
    assert c == Credentials("User:billing", "a:b")
    with pytest.raises(ValueError) as e:
        Credentials.from_env({"GROUPCOORD_CREDENTIALS": "Group:x:topsecret"})
    assert "topsecret" not in str(e.value)


def test_a_hash_is_salted_and_verifies_only_its_secret():
    secret = "not-hex-zq"  # hex salts and digests cannot contain it by chance
    h1, h2 = SecretHash.of(secret), SecretHash.of(secret)
    assert h1.salt != h2.salt and h1.digest != h2.digest
    assert h1.matches(secret) and not h1.matches(secret + "x") and not h1.matches(None)
    assert secret not in repr(h1)


def test_principal_names():
    assert principal_of("billing") == "User:billing" == principal_of("User:billing")
    for bad in ("", "User:*", "User:a:b", 7):
        with pytest.raises(ValueError):
            principal_of(bad)


def test_quota_throttles_past_the_rate_and_recovers_with_time():
    q = RequestQuota({"User:noisy": 10.0})
    assert [q.record("User:noisy", 1, 0.0) for _ in range(10)] == [0] * 10
    throttle = q.record("User:noisy", 5, 0.0)  # 5 over a 10/s rate: half a second
    assert 500 <= throttle <= 501
    assert q.record("User:noisy", 1, 1.0) == 0  # a second later the bucket has refilled
    assert q.record("User:quiet", 1000, 0.0) == 0  # no quota of its own and no default


def test_quota_default_for_every_user():
    q = RequestQuota({"User:*": 1.0, "User:vip": 1000.0})
    q.record("User:a", 1, 0.0)
    assert q.record("User:a", 1, 0.0) > 0
    assert q.record("User:vip", 100, 0.0) == 0
