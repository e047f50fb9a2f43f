"""AclAuthorizer's decisions against Kafka's rules, and a reference model of them."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.security import KafkaPrincipal
from sluice.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAclError,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from sluice.security.acl_store import FileAclStore
from sluice.security.authorizer import AclAuthorizer, parse_super_users

ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
Op, Perm, RT, PT = AclOperation, AclPermissionType, ResourceType, PatternType


class MemoryStore:
    """An AclStore in memory (the file and ZooKeeper stores are tested below)."""

    def __init__(self) -> None:
        self.acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}

    def load(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        return dict(self.acls)

    def load_one(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        return self.acls.get(pattern, frozenset())

    def update(self, pattern, change):  # type: ignore[no-untyped-def]
        entries = change(self.acls.get(pattern, frozenset()))
        if entries:
            self.acls[pattern] = entries
        else:
            self.acls.pop(pattern, None)
        return entries


def binding(
    name: str,
    op: AclOperation,
    perm: AclPermissionType = Perm.ALLOW,
    principal: str = "User:alice",
    host: str = "*",
    rtype: ResourceType = RT.TOPIC,
    ptype: PatternType = PT.LITERAL,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(rtype, name, ptype), AccessControlEntry(principal, host, op, perm)
    )


def authorizer(*bindings: AclBinding, **kwargs: object) -> AclAuthorizer:
    a = AclAuthorizer(MemoryStore(), **kwargs)  # type: ignore[arg-type]
    assert a.create_acls(list(bindings)) == [None] * len(bindings)
    return a


def can(a: AclAuthorizer, op: AclOperation, name: str, who: KafkaPrincipal = ALICE,
        host: str = "10.0.0.1", rtype: ResourceType = RT.TOPIC) -> bool:  # fmt: skip
    return a.authorize(who, host, op, rtype, name)


def test_an_allow_grants_only_its_operation_and_principal() -> None:
    a = authorizer(binding("orders", Op.WRITE))
    assert can(a, Op.WRITE, "orders")
    assert not can(a, Op.READ, "orders")
    assert not can(a, Op.WRITE, "orders", who=BOB)
    assert not can(a, Op.WRITE, "payments")  # no ACL applies, and no allow-everyone


def test_deny_wins_over_allow() -> None:
    a = authorizer(binding("orders", Op.ALL), binding("orders", Op.WRITE, Perm.DENY))
    assert can(a, Op.READ, "orders")
    assert not can(a, Op.WRITE, "orders")
    # a DENY of ALL refuses every operation, also through a wildcard
    a = authorizer(binding("orders", Op.READ), binding("*", Op.ALL, Perm.DENY, "User:*"))
    assert not can(a, Op.READ, "orders")


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.ALL])
def test_describe_is_implied(granted: AclOperation) -> None:
    assert can(authorizer(binding("t", granted)), Op.DESCRIBE, "t")


@pytest.mark.parametrize("granted", [Op.CREATE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS])
def test_describe_is_not_implied_by_others(granted: AclOperation) -> None:
    assert not can(authorizer(binding("t", granted)), Op.DESCRIBE, "t")


def test_describe_configs_is_implied_by_alter_configs_only() -> None:
    assert can(authorizer(binding("t", Op.ALTER_CONFIGS)), Op.DESCRIBE_CONFIGS, "t")
    assert not can(authorizer(binding("t", Op.ALTER)), Op.DESCRIBE_CONFIGS, "t")
    # a DENY of READ does not deny the DESCRIBE that another ALLOW implies
    a = authorizer(binding("t", Op.WRITE), binding("t", Op.READ, Perm.DENY))
    assert can(a, Op.DESCRIBE, "t")


def test_wildcards_and_prefixes() -> None:
    a = authorizer(
        binding("*", Op.READ, principal="User:*"),
        binding("team-a.", Op.WRITE, ptype=PT.PREFIXED),
        binding("team-a.secret", Op.WRITE, Perm.DENY, ptype=PT.PREFIXED),
        binding("orders", Op.WRITE, principal="User:bob", host="10.0.0.2"),
    )
    assert can(a, Op.READ, "anything", who=BOB)
    assert can(a, Op.WRITE, "team-a.orders")
    assert not can(a, Op.WRITE, "team-a.secrets")
    assert not can(a, Op.WRITE, "team-b.orders")
    assert can(a, Op.WRITE, "orders", who=BOB, host="10.0.0.2")
    assert not can(a, Op.WRITE, "orders", who=BOB, host="10.0.0.3")
    # ACL of another resource type never applies
    assert not can(a, Op.READ, "anything", rtype=RT.GROUP)


def test_super_users_and_allow_everyone_if_no_acl_found() -> None:
    admins = parse_super_users("User:admin; User:ops")
    a = authorizer(binding("t", Op.ALL, Perm.DENY, "User:*"), super_users=admins,
                   allow_everyone_if_no_acl_found=True)  # fmt: skip
    assert can(a, Op.DELETE, "t", who=KafkaPrincipal("User", "ops"))
    assert not can(a, Op.READ, "t")
    # no ACL applies to "other": everyone may; any ACL on it, even another principal's,
    # takes that away, as in Kafka
    assert can(a, Op.DELETE, "other")
    a.create_acls([binding("other", Op.READ, principal="User:bob")])
    assert not can(a, Op.DELETE, "other")
    assert can(a, Op.READ, "other", who=BOB)
    with pytest.raises(ValueError, match="Type:name"):
        parse_super_users("admin")


def test_decisions_follow_acl_changes() -> None:
    a = authorizer()
    assert not can(a, Op.READ, "t")  # cached as denied
    a.create_acls([binding("t", Op.READ)])
    assert can(a, Op.READ, "t")
    deleted = a.delete_acls([AclBindingFilter(entry=AccessControlEntryFilter("User:alice"))])
    assert [b for b, _ in deleted[0]] == [binding("t", Op.READ)]
    assert not can(a, Op.READ, "t")


def test_idempotent_write_by_resource_type() -> None:
    """Kafka's authorizeByResourceType: WRITE on some topic, unless a DENY covers it."""
    by_type = AclAuthorizer.authorize_by_resource_type
    assert not by_type(authorizer(), ALICE, "h", Op.WRITE, RT.TOPIC)
    assert by_type(authorizer(binding("t", Op.WRITE)), ALICE, "h", Op.WRITE, RT.TOPIC)
    assert by_type(authorizer(binding("a.", Op.ALL, ptype=PT.PREFIXED)), ALICE, "h", Op.WRITE,
                   RT.TOPIC)  # fmt: skip
    denied = authorizer(binding("a.b", Op.WRITE), binding("a.", Op.WRITE, Perm.DENY,
                                                          ptype=PT.PREFIXED))  # fmt: skip
    assert not by_type(denied, ALICE, "h", Op.WRITE, RT.TOPIC)
    wildcard_deny = authorizer(binding("t", Op.WRITE), binding("*", Op.WRITE, Perm.DENY))
    assert not by_type(wildcard_deny, ALICE, "h", Op.WRITE, RT.TOPIC)
    assert by_type(authorizer(allow_everyone_if_no_acl_found=True), ALICE, "h", Op.WRITE,
                   RT.TOPIC)  # fmt: skip


def test_authorized_operations_bits() -> None:
    a = authorizer(binding("t", Op.READ), binding(CLUSTER_NAME, Op.ALL, rtype=RT.CLUSTER))
    bits = a.authorized_operations(ALICE, "h", RT.TOPIC, "t")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE)
    cluster = a.authorized_operations(ALICE, "h", RT.CLUSTER, CLUSTER_NAME)
    assert cluster == sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


@pytest.mark.parametrize(
    "bad",
    [
        binding("", Op.READ),
        binding("other", Op.ALTER, rtype=RT.CLUSTER),
        binding("t", Op.ANY),
        binding("t", Op.READ, Perm.ANY),
        binding("t", Op.READ, principal="alice"),
        binding("t", Op.READ, ptype=PT.MATCH),
        binding("t", Op.READ, rtype=RT.ANY),
    ],
)
def test_invalid_bindings_are_refused(bad: AclBinding) -> None:
    a = authorizer()
    [error] = a.create_acls([bad])
    assert isinstance(error, InvalidAclError)
    assert a.acl_count == 0


def test_filters_match_as_kafka() -> None:
    literal = ResourcePattern(RT.TOPIC, "orders")
    wildcard = ResourcePattern(RT.TOPIC, "*")
    prefix = ResourcePattern(RT.TOPIC, "ord", PT.PREFIXED)
    match = ResourcePatternFilter(RT.TOPIC, "orders", PT.MATCH)
    assert all(match.matches(p) for p in (literal, wildcard, prefix))
    assert not match.matches(ResourcePattern(RT.TOPIC, "orders-x", PT.PREFIXED))
    any_ = ResourcePatternFilter(RT.ANY, "orders", PT.ANY)
    assert any_.matches(literal) and not any_.matches(wildcard) and not any_.matches(prefix)
    assert ResourcePatternFilter(RT.TOPIC, None, PT.PREFIXED).matches(prefix)
    assert not ResourcePatternFilter(RT.GROUP).matches(literal)
    with pytest.raises(InvalidAclError, match="UNKNOWN"):
        AclBindingFilter(ResourcePatternFilter(RT.UNKNOWN)).validate()


def test_a_file_store_keeps_acls_across_restarts(tmp_path: Path) -> None:
    path = tmp_path / "acls.json"
    a = AclAuthorizer(FileAclStore(path))
    a.create_acls([binding("t", Op.READ), binding("p.", Op.WRITE, ptype=PT.PREFIXED)])
    again = AclAuthorizer(FileAclStore(path))
    again.load()
    assert can(again, Op.READ, "t") and can(again, Op.WRITE, "p.x")
    assert sorted(map(str, again.acls(AclBindingFilter()))) == sorted(
        map(str, a.acls(AclBindingFilter()))
    )
    assert [p.name for p in tmp_path.iterdir()] == ["acls.json"]  # no temporary left


# -- a reference model ----------------------------------------------------------------------

NAMES = st.sampled_from(["a", "ab", "abc", "b", "*", "a*"])
OPS = st.sampled_from([op for op in AclOperation if op not in (Op.ANY, Op.UNKNOWN)])
BINDINGS = st.builds(
    binding,
    NAMES,
    OPS,
    st.sampled_from([Perm.ALLOW, Perm.DENY]),
    st.sampled_from(["User:alice", "User:bob", "User:*"]),
    st.sampled_from(["*", "h1", "h2"]),
    st.sampled_from([RT.TOPIC, RT.GROUP]),
    st.sampled_from([PT.LITERAL, PT.PREFIXED]),
)
IMPLIED = {
    Op.DESCRIBE: {Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
    Op.DESCRIBE_CONFIGS: {Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS},
}


def reference(bindings: list[AclBinding], who: str, host: str, op: AclOperation,
              rtype: ResourceType, name: str, allow_everyone: bool) -> bool:  # fmt: skip
    """Kafka's rules written over the list of bindings, finding the applicable ones with
    a MATCH filter (another path than the authorizer's index)."""
    applies = AclBindingFilter(ResourcePatternFilter(rtype, name, PT.MATCH))
    acls = [b.entry for b in bindings if applies.matches(b)]
    if not acls:
        return allow_everyone

    def matching(perm: AclPermissionType, ops: set[AclOperation]) -> bool:
        return any(
            e.permission_type == perm and e.principal in (who, "User:*")
            and e.host in (host, "*") and (e.operation in ops or e.operation == Op.ALL)
            for e in acls
        )  # fmt: skip

    return not matching(Perm.DENY, {op}) and matching(Perm.ALLOW, IMPLIED.get(op, {op}))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(BINDINGS, max_size=12),
    st.sampled_from([ALICE, BOB]),
    st.sampled_from(["h1", "h2"]),
    OPS,
    st.sampled_from([RT.TOPIC, RT.GROUP]),
    st.sampled_from(["a", "ab", "abc", "b", "c", "*"]),
    st.booleans(),
)
def test_decisions_equal_the_reference(
    bindings: list[AclBinding], who: KafkaPrincipal, host: str, op: AclOperation,
    rtype: ResourceType, name: str, allow_everyone: bool,
) -> None:  # fmt: skip
    a = authorizer(*bindings, allow_everyone_if_no_acl_found=allow_everyone)
    expected = reference(bindings, str(who), host, op, rtype, name, allow_everyone)
    assert a.authorize(who, host, op, rtype, name) == expected
    assert a.authorize(who, host, op, rtype, name) == expected  # from the cache
    # and after deleting everything, only allow-everyone is left
    a.delete_acls([AclBindingFilter()])
    assert a.authorize(who, host, op, rtype, name) == allow_everyone


def test_an_unreadable_acl_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "acls.json"
    path.write_text('{"resources": [{"resourceType": "Topic"}]}')
    with pytest.raises(ValueError, match=r"cannot read the ACLs in .*acls\.json"):
        FileAclStore(path)
