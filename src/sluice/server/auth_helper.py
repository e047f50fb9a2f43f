"""Authorization in the request handlers, as Kafka's ``AuthHelper``.

Each handler asks whether the request's principal, from the client's address, may do an
operation on a resource: ``authorize(ctx, AclOperation.WRITE, ResourceType.TOPIC,
name)``. Without an authorizer (``authorizer.class.name`` empty) everything is allowed
and ``authorized_operations`` holds every operation of the resource type, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from sluice.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
    to_32_bit_field,
)

if TYPE_CHECKING:
    from sluice.server.request_context import RequestContext

__all__ = [
    "AclOperation",
    "ResourceType",
    "authorize",
    "authorize_by_resource_type",
    "authorize_cluster",
    "authorized_operations",
    "filter_by_authorized",
]

_NOT_ASKED = -2147483648
"""Kafka's ``Int.MinValue``: authorized operations not asked for."""


def _host(ctx: RequestContext) -> str:
    """The client's address as ACL hosts are written (no leading ``/``)."""
    return ctx.client_host.removeprefix("/")


def authorize(
    ctx: RequestContext, operation: AclOperation, resource_type: ResourceType, name: str
) -> bool:
    """Whether the request may do ``operation`` on the resource."""
    authorizer = ctx.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize(ctx.session.principal, _host(ctx), operation, resource_type, name)


def authorize_cluster(ctx: RequestContext, operation: AclOperation) -> bool:
    """Whether the request may do ``operation`` on the CLUSTER resource."""
    return authorize(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def filter_by_authorized(
    ctx: RequestContext, operation: AclOperation, resource_type: ResourceType, names: Iterable[str]
) -> set[str]:
    """The names of ``names`` the request may do ``operation`` on."""
    authorizer = ctx.authorizer
    if authorizer is None:
        return set(names)
    principal, host = ctx.session.principal, _host(ctx)
    return {
        n for n in set(names) if authorizer.authorize(principal, host, operation, resource_type, n)
    }


def authorize_by_resource_type(
    ctx: RequestContext, operation: AclOperation, resource_type: ResourceType
) -> bool:
    """Whether the request may do ``operation`` on some resource of the type."""
    authorizer = ctx.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize_by_resource_type(
        ctx.session.principal, _host(ctx), operation, resource_type
    )


def authorized_operations(
    ctx: RequestContext, resource_type: ResourceType, name: str, asked: bool = True
) -> int:
    """The ``authorized_operations`` bit field of the resource; Kafka's "not asked"
    value when ``asked`` is false."""
    if not asked:
        return _NOT_ASKED
    authorizer = ctx.authorizer
    if authorizer is None:
        return to_32_bit_field(set(SUPPORTED_OPERATIONS[resource_type]))
    return authorizer.authorized_operations(ctx.session.principal, _host(ctx), resource_type, name)


def may_auto_create(ctx: RequestContext, topic: str) -> bool:
    """Whether a missing topic may be created on first use: CREATE on the cluster or on
    the topic, as Kafka asks before auto-creating in Metadata."""
    if ctx.authorizer is None or ctx.metadata_cache.contains_topic(topic):
        return True
    return authorize_cluster(ctx, AclOperation.CREATE) or authorize(
        ctx, AclOperation.CREATE, ResourceType.TOPIC, topic
    )
