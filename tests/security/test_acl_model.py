"""Kafka's ACL model: patterns, wildcards, operations implied, DENY over ALLOW, super users, no-ACL default."""

import pytest

from groupcoord.protocol.security.acl import AclBinding, Authorizer, InvalidAclError


def allow(rtype, name, op, principal="User:alice", pattern="LITERAL"):
    return AclBinding(rtype, name, pattern, principal, op, "ALLOW")


def deny(rtype, name, op, principal="User:alice", pattern="LITERAL"):
    return AclBinding(rtype, name, pattern, principal, op, "DENY")


def test_literal_matches_the_name_only():
    a = Authorizer([allow("GROUP", "billing", "READ")])
    assert a.authorize("User:alice", "READ", "GROUP", "billing")
    assert not a.authorize("User:alice", "READ", "GROUP", "billing-2")
    assert not a.authorize("User:alice", "READ", "GROUP", "bill")


def test_prefixed_matches_names_that_start_with_it():
    a = Authorizer([allow("GROUP", "billing-", "READ", pattern="PREFIXED")])
    assert a.authorize("User:alice", "READ", "GROUP", "billing-eu")
    assert a.authorize("User:alice", "READ", "GROUP", "billing-")
    assert not a.authorize("User:alice", "READ", "GROUP", "billing")
    assert not a.authorize("User:alice", "READ", "TOPIC", "billing-eu")  # another resource type


def test_wildcard_resource_and_wildcard_principal():
    a = Authorizer([allow("TOPIC", "*", "READ"), allow("GROUP", "shared", "READ", principal="User:*")])
    assert a.authorize("User:alice", "READ", "TOPIC", "anything")
    assert not a.authorize("User:bob", "READ", "TOPIC", "anything")
    assert a.authorize("User:bob", "READ", "GROUP", "shared")


def test_deny_wins_over_allow_whatever_the_pattern():
    a = Authorizer([
        allow("TOPIC", "*", "READ"),
        allow("TOPIC", "pay", "READ", pattern="PREFIXED"),
        deny("TOPIC", "payroll", "READ"),
    ])
    assert a.authorize("User:alice", "READ", "TOPIC", "payments")
    assert not a.authorize("User:alice", "READ", "TOPIC", "payroll")


def test_deny_for_everyone_applies_to_a_named_principal():
    a = Authorizer([allow("GROUP", "g", "READ"), deny("GROUP", "g", "READ", principal="User:*")])
    assert not a.authorize("User:alice", "READ", "GROUP", "g")


@pytest.mark.parametrize("op", ["READ", "WRITE", "DELETE", "ALTER"])
def test_an_allow_of_read_write_delete_alter_implies_describe(op):
    a = Authorizer([allow("GROUP", "g", op)])
    assert a.authorize("User:alice", "DESCRIBE", "GROUP", "g")


def test_describe_does_not_imply_read_and_create_does_not_imply_describe():
    a = Authorizer([allow("GROUP", "g", "DESCRIBE"), allow("TOPIC", "t", "CREATE")])
    assert not a.authorize("User:alice", "READ", "GROUP", "g")
    assert not a.authorize("User:alice", "DESCRIBE", "TOPIC", "t")


def test_a_deny_of_read_does_not_deny_describe():
    a = Authorizer([allow("GROUP", "g", "DESCRIBE"), deny("GROUP", "g", "READ")])
    assert a.authorize("User:alice", "DESCRIBE", "GROUP", "g")
    assert not a.authorize("User:alice", "READ", "GROUP", "g")


def test_all_matches_every_operation_both_ways():
    a = Authorizer([allow("GROUP", "g", "ALL"), deny("GROUP", "x", "ALL"), allow("GROUP", "x", "READ")])
    assert all(a.authorize("User:alice", op, "GROUP", "g") for op in ("READ", "DELETE", "DESCRIBE", "ALTER"))
    assert not a.authorize("User:alice", "READ", "GROUP", "x")


def test_super_users_bypass_every_binding():
    a = Authorizer([deny("GROUP", "*", "ALL", principal="User:*")], super_users=["User:admin"])
    assert a.authorize("User:admin", "DELETE", "GROUP", "anything")
    assert not a.authorize("User:alice", "DELETE", "GROUP", "anything")


def test_no_acl_found_is_denied_by_default_and_allowed_with_the_option():
    bindings = [allow("GROUP", "owned", "READ", principal="User:bob")]
    assert not Authorizer(bindings).authorize("User:alice", "READ", "GROUP", "free")
    everyone = Authorizer(bindings, allow_everyone_if_no_acl_found=True)
    assert everyone.authorize("User:alice", "READ", "GROUP", "free")
    # A resource that has ACLs (of someone else) is not "no ACL found".
    assert not everyone.authorize("User:alice", "READ", "GROUP", "owned")


def test_a_binding_for_a_specific_host_never_matches_a_ray_caller():
    a = Authorizer([AclBinding("GROUP", "g", "LITERAL", "User:alice", "READ", "ALLOW", "10.0.0.1")])
    assert not a.authorize("User:alice", "READ", "GROUP", "g")


def test_validation_normalizes_case_and_refuses_bad_fields():
    assert AclBinding("group", "g", "prefixed", "User:a", "read", "deny").validated() == AclBinding(
        "GROUP", "g", "PREFIXED", "User:a", "READ", "DENY"
    )
    for bad in (
        AclBinding("QUEUE", "g", "LITERAL", "User:a", "READ"),
        AclBinding("GROUP", "g", "MATCH", "User:a", "READ"),
        AclBinding("GROUP", "g", "LITERAL", "alice", "READ"),
        AclBinding("GROUP", "g", "LITERAL", "User:a", "FLY"),
        AclBinding("GROUP", "", "LITERAL", "User:a", "READ"),
        AclBinding("GROUP", "*", "PREFIXED", "User:a", "READ"),
        AclBinding("CLUSTER", "mine", "LITERAL", "User:a", "ALTER"),
    ):
        with pytest.raises(InvalidAclError):
            bad.validated()
