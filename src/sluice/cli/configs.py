"""``sluice configs``: describe and alter topic, broker, user and client-id configs, like
kafka-configs.

    sluice configs --bootstrap-server localhost:9092 --alter --entity-type users \\
        --entity-name alice --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    sluice configs --bootstrap-server localhost:9092 --describe --entity-type users
    sluice configs --bootstrap-server localhost:9092 --alter --entity-type clients \\
        --entity-default --add-config request_percentage=50
    sluice configs --bootstrap-server localhost:9092 --alter --user alice --client app \\
        --delete-config producer_byte_rate
    sluice configs --bootstrap-server localhost:9092 --describe --topic events

Entities are given as ``--entity-type TYPE`` with ``--entity-name NAME`` or
``--entity-default`` (paired in order; ``users`` and ``clients`` may be combined for a
(user, client-id) quota), or with kafka-configs' shorthands ``--topic``, ``--broker``,
``--broker-defaults``, ``--user``, ``--user-defaults``, ``--client``,
``--client-defaults``. Topics and brokers go through DescribeConfigs and
IncrementalAlterConfigs, users and clients through DescribeClientQuotas and
AlterClientQuotas.

Each entity type has a handler in :data:`ENTITY_TYPES` (describe, alter). A user's
SCRAM credentials (``SCRAM-SHA-256=[iterations=8192,password=...]``,
:data:`USER_CREDENTIAL_KEYS`) are among its configs, as in kafka-configs: they go
through AlterUserScramCredentials and DescribeUserScramCredentials
(:mod:`sluice.cli.scram_users`), its quotas through the quota APIs.
"""

from __future__ import annotations

import argparse
import decimal
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from sluice.cli.arguments import (
    ToolError,
    UsageError,
    add_bootstrap_argument,
    command_config,
    read_properties_file,
    tool_command,
    warner,
)
from sluice.cli.scram_users import (
    alter_credentials,
    alter_credentials_in_zookeeper,
    describe_credentials,
    describe_credentials_in_zookeeper,
)
from sluice.cli.tool_types import ClientError

if TYPE_CHECKING:
    from sluice.cli.tool_clients import Admin

__all__ = ["ENTITY_TYPES", "USER_CREDENTIAL_KEYS", "add_parser", "parse_add_config", "run"]

PROG = "sluice configs"
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
USER_CREDENTIAL_KEYS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
"""User configs that are SCRAM credentials, not quotas."""

_DESCRIPTION = """\
Describe and alter configs of topics, brokers, users and client ids, like
kafka-configs.sh: topic and broker configs, and the client quotas
producer_byte_rate, consumer_byte_rate, request_percentage and
controller_mutation_rate of users, client ids and (user, client id) pairs."""


@dataclass(frozen=True)
class Entity:
    """An entity named on the command line: its type (topics, brokers, users, clients)
    and its name; None is the default entity, ALL (describe only) every one."""

    entity_type: str
    name: str | None


ALL = "\0all"  # no name given: every entity of the type (describe)


class EntityTypeHandler(Protocol):
    """Describes and alters the configs of one entity type (or users+clients)."""

    def describe(self, admin: Admin, entities: Sequence[Entity], show_all: bool) -> None: ...

    def alter(
        self, admin: Admin, entities: Sequence[Entity], add: dict[str, str], delete: list[str]
    ) -> str:
        """Apply the changes; the line to print."""


# -- add-config ------------------------------------------------------------------------------


def parse_add_config(text: str) -> dict[str, str]:
    """kafka-configs' ``--add-config``: ``k1=v1,k2=[v2,v3]`` (commas inside brackets
    belong to the value, whose brackets are dropped)."""
    items: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    out: dict[str, str] = {}
    for item in items:
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(
                "Invalid entity config: all configs to be added must be in the format "
                '"key=val" or "key=[val1,val2]".'
            )
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[key.strip()] = value
    return out


def java_double(value: float) -> str:
    """``value`` as Java's ``Double.toString`` writes it (kafka-configs prints quotas so):
    ``1024.0``, ``0.5``, ``1.0E7``."""
    if value == 0 or (1e-3 <= abs(value) < 1e7):
        text = repr(float(value))
        return text if "e" not in text else f"{value:f}"
    if not math.isfinite(value):
        return "Infinity" if value > 0 else "-Infinity" if value < 0 else "NaN"
    sign, digits, exponent = decimal.Decimal(repr(float(value))).normalize().as_tuple()
    assert isinstance(exponent, int)
    body = "".join(map(str, digits))
    mantissa = body[0] + "." + (body[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{len(body) - 1 + exponent}"


# -- topics and brokers ---------------------------------------------------------------------


class ResourceConfigs:
    """Topic or broker configs, through DescribeConfigs and IncrementalAlterConfigs."""

    def __init__(self, resource_type: int, singular: str, dynamic_source: str) -> None:
        self.resource_type = resource_type
        self.singular = singular
        self.dynamic_source = dynamic_source

    def _names(self, admin: Admin, entity: Entity) -> list[str]:
        if entity.name == ALL:
            if self.resource_type == RESOURCE_TOPIC:
                return sorted(admin.list_topics())
            return [*(str(b) for b in admin.broker_ids()), ""]  # and the cluster default
        return ["" if entity.name is None else entity.name]

    def describe(self, admin: Admin, entities: Sequence[Entity], show_all: bool) -> None:
        (entity,) = entities
        for name in self._names(admin, entity):
            configs = admin.describe_configs(self.resource_type, name)
            if name:
                what = "All" if show_all else "Dynamic"
                print(f"{what} configs for {self.singular} {name} are:")
            else:
                print(f"Default configs for {self.singular}s in the cluster are:")
            source = "DYNAMIC_DEFAULT_BROKER_CONFIG" if not name else self.dynamic_source
            for c in sorted(configs, key=lambda c: c.name):
                if not show_all and c.source != source:
                    continue
                value = "null" if c.sensitive or c.value is None else c.value
                synonyms = ", ".join(
                    f"{s}:{n}={'null' if c.sensitive or v is None else v}" for s, n, v in c.synonyms
                )
                sensitive = "true" if c.sensitive else "false"
                print(f"  {c.name}={value} sensitive={sensitive} synonyms={{{synonyms}}}")

    def alter(
        self, admin: Admin, entities: Sequence[Entity], add: dict[str, str], delete: list[str]
    ) -> str:
        (entity,) = entities
        name = "" if entity.name is None else str(entity.name)
        admin.alter_configs(self.resource_type, name, add, delete)
        if name:
            return f"Completed updating config for {self.singular} {name}."
        return f"Completed updating default config for {self.singular}s in the cluster."


# -- users and clients ----------------------------------------------------------------------

_QUOTA_ENTITY = {"users": "user", "clients": "client-id"}
_DESCRIBED_AS = {"user": "user-principal", "client-id": "client-id"}


class ClientQuotaConfigs:
    """User, client-id and (user, client-id) quotas, through DescribeClientQuotas and
    AlterClientQuotas."""

    def describe(self, admin: Admin, entities: Sequence[Entity], show_all: bool) -> None:
        components: list[tuple[str, int, str | None]] = []
        for e in entities:
            kind = _QUOTA_ENTITY[e.entity_type]
            if e.name == ALL:
                components.append((kind, 2, None))
            elif e.name is None:
                components.append((kind, 1, None))
            else:
                components.append((kind, 0, e.name))
        for entity, quotas in admin.describe_client_quotas(components, strict=True):
            described = ", ".join(
                f"{_DESCRIBED_AS.get(kind, kind)} '{name}'" if name is not None
                else f"the default {_DESCRIBED_AS.get(kind, kind)}"
                for kind, name in sorted(entity.items(), key=lambda kv: kv[0] != "user")
            )  # fmt: skip
            values = ", ".join(f"{k}={java_double(v)}" for k, v in sorted(quotas.items()))
            print(f"Quota configs for {described} are {values}")
        users = [e for e in entities if e.entity_type == "users"]
        if len(entities) == 1 and users and users[0].name is not None:  # not a default
            named = None if users[0].name == ALL else [users[0].name]
            try:
                lines = describe_credentials(admin, named)
            except ClientError as exc:
                if exc.code != "RESOURCE_NOT_FOUND":  # a user with quotas only
                    raise
                lines = []
            for line in lines:
                print(line)

    def alter(
        self, admin: Admin, entities: Sequence[Entity], add: dict[str, str], delete: list[str]
    ) -> str:
        scram_add = {k: v for k, v in add.items() if k in USER_CREDENTIAL_KEYS}
        scram_delete = [k for k in delete if k in USER_CREDENTIAL_KEYS]
        if scram_add or scram_delete:
            head = entities[0]
            if len(entities) > 1 or head.entity_type != "users" or head.name is None:
                raise UsageError(
                    "SCRAM credentials are set for one named user, not a default or a "
                    "user's client ids"
                )
            done = alter_credentials(admin, head.name, scram_add, scram_delete)
            add = {k: v for k, v in add.items() if k not in USER_CREDENTIAL_KEYS}
            delete = [k for k in delete if k not in USER_CREDENTIAL_KEYS]
            if not add and not delete:
                return done
        ops: dict[str, float | None] = {}
        for key, value in add.items():
            try:
                ops[key] = float(value)
            except ValueError:
                raise UsageError(
                    f"Cannot parse quota configuration value for {key}: {value}"
                ) from None
        ops.update({key: None for key in delete})
        admin.alter_client_quotas({_QUOTA_ENTITY[e.entity_type]: e.name for e in entities}, ops)
        head = entities[0]
        if head.name is not None:
            return f"Completed updating config for {head.entity_type[:-1]} {head.name}."
        return f"Completed updating default config for {head.entity_type} in the cluster."


ENTITY_TYPES: dict[str, EntityTypeHandler] = {
    "topics": ResourceConfigs(RESOURCE_TOPIC, "topic", "DYNAMIC_TOPIC_CONFIG"),
    "brokers": ResourceConfigs(RESOURCE_BROKER, "broker", "DYNAMIC_BROKER_CONFIG"),
    "users": ClientQuotaConfigs(),
    "clients": ClientQuotaConfigs(),
}
"""The handler of each ``--entity-type`` (users+clients pairs go to the users one)."""


# -- the command line -----------------------------------------------------------------------


class _Shorthand(argparse.Action):
    """``--user NAME`` and the like: append (entity type, name) to ``args.shorthands``."""

    def __init__(self, *args: Any, entity_type: str = "", default_entity: bool = False,
                 **kwargs: Any) -> None:  # fmt: skip
        self.entity_type = entity_type
        self.default_entity = default_entity
        super().__init__(*args, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:  # fmt: skip
        found = list(getattr(namespace, "shorthands", None) or [])
        found.append(Entity(self.entity_type, None if self.default_entity else str(values)))
        namespace.shorthands = found


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "configs",
        help="describe and alter topic, broker, user and client-id configs (quotas)",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_bootstrap_argument(parser)
    parser.add_argument(
        "--zookeeper", metavar="HOST:PORT[/CHROOT]",
        help="instead of --bootstrap-server, for users' SCRAM credentials only: write "
        "them into the cluster's ZooKeeper, so that brokers can have theirs before any "
        "broker runs",
    )  # fmt: skip
    parser.add_argument(
        "--command-config", metavar="FILE",
        help="client properties file (e.g. security settings) for the admin client",
    )  # fmt: skip
    actions = parser.add_mutually_exclusive_group()
    actions.add_argument("--describe", action="store_true", help="list configs of the entity")
    actions.add_argument("--alter", action="store_true", help="change configs of the entity")
    parser.add_argument(
        "--entity-type", action="append", default=[], metavar="TYPE",
        choices=sorted(ENTITY_TYPES),
        help="topics, brokers, users or clients (users and clients may be combined)",
    )  # fmt: skip
    parser.add_argument(
        "--entity-name", action="append", dest="entity_names", metavar="NAME",
        help="the entity's name (topic, broker id, user principal name, client id)",
    )  # fmt: skip
    parser.add_argument(
        "--entity-default", action="append_const", dest="entity_names", const=None,
        help="the default entity of the --entity-type in the same position",
    )  # fmt: skip
    for option, kind, default, text in (
        ("--topic", "topics", False, "the topic (as --entity-type topics --entity-name)"),
        ("--broker", "brokers", False, "the broker id"),
        ("--broker-defaults", "brokers", True, "the default broker configs"),
        ("--user", "users", False, "the user principal name"),
        ("--user-defaults", "users", True, "the default user quotas"),
        ("--client", "clients", False, "the client id"),
        ("--client-defaults", "clients", True, "the default client-id quotas"),
    ):
        parser.add_argument(
            option, action=_Shorthand, entity_type=kind, default_entity=default,
            nargs=0 if default else None, metavar=None if default else "NAME", help=text,
        )  # fmt: skip
    parser.add_argument(
        "--add-config", metavar="K=V[,K=V...]",
        help="configs to set, e.g. producer_byte_rate=1048576,consumer_byte_rate=2097152 "
        "(a value with commas in square brackets)",
    )  # fmt: skip
    parser.add_argument(
        "--add-config-file", metavar="FILE", help="a properties file of configs to set"
    )
    parser.add_argument(
        "--delete-config", action="append", metavar="K[,K...]", help="configs to remove"
    )
    parser.add_argument(
        "--all", action="store_true", help="describe every config, not only the overrides"
    )
    parser.set_defaults(func=run, shorthands=[], entity_names=None)


def _entities(args: argparse.Namespace) -> list[Entity]:
    types: list[str] = list(args.entity_type)
    names: list[str | None] = list(args.entity_names or [])
    if len(names) > len(types):
        raise UsageError("--entity-name or --entity-default given without its --entity-type")
    entities = [Entity(t, names[i] if i < len(names) else ALL) for i, t in enumerate(types)]
    entities += list(args.shorthands)
    if not entities:
        raise UsageError("an entity is required: --entity-type (or --topic, --user, ...)")
    kinds = [e.entity_type for e in entities]
    if len(set(kinds)) != len(kinds):
        raise UsageError(f"entity type {kinds[0]} given twice")
    if len(entities) > 1 and set(kinds) != {"users", "clients"}:
        raise UsageError("only users and clients may be combined in one entity")
    entities.sort(key=lambda e: e.entity_type != "users")  # users first, as Kafka shows them
    for e in entities:
        if e.entity_type == "topics" and e.name is None:
            raise UsageError("--entity-default is not supported for topics")
        if e.entity_type == "brokers" and e.name not in (None, ALL) and not str(e.name).isdigit():
            raise UsageError(f"the broker's entity name must be an id, not {e.name!r}")
    return entities


def _run(args: argparse.Namespace) -> int:
    if not args.describe and not args.alter:
        raise UsageError("an action is required: --describe or --alter")
    if args.zookeeper and args.bootstrap_server:
        raise UsageError("only one of --bootstrap-server and --zookeeper may be given")
    if not args.bootstrap_server and not args.zookeeper:
        raise UsageError("--bootstrap-server is required")
    entities = _entities(args)
    add: dict[str, str] = {}
    if args.add_config:
        add.update(parse_add_config(args.add_config))
    if args.add_config_file:
        add.update(read_properties_file(args.add_config_file))
    delete = [k.strip() for item in args.delete_config or [] for k in item.split(",") if k.strip()]
    if args.describe and (add or delete):
        raise UsageError("--add-config and --delete-config apply to --alter only")
    if args.alter:
        if not add and not delete:
            raise UsageError(
                "At least one of --add-config, --add-config-file, or --delete-config must be "
                "specified with --alter"
            )
        if any(e.name == ALL for e in entities):
            kinds = ", ".join(e.entity_type for e in entities)
            raise UsageError(
                f"--entity-name or --entity-default must be specified with --alter of {kinds}"
            )
        both = sorted(set(add) & set(delete))
        if both:
            raise UsageError(f"{', '.join(both)} given to both --add-config and --delete-config")
    if args.zookeeper:
        return _run_on_zookeeper(args.zookeeper, args.describe, entities, add, delete)
    handler = ENTITY_TYPES[entities[0].entity_type]
    config = command_config(args)
    from sluice.cli.tool_clients import Admin, ClientError

    try:
        admin = Admin(args.bootstrap_server, config, warner(PROG))
        try:
            if args.describe:
                handler.describe(admin, entities, args.all)
            else:
                print(handler.alter(admin, entities, add, delete))
        finally:
            admin.close()
    except ClientError as exc:
        raise ToolError(str(exc)) from exc
    return 0


def _run_on_zookeeper(
    connect: str, describe: bool, entities: list[Entity], add: dict[str, str], delete: list[str]
) -> int:
    """``--zookeeper``: users' SCRAM credentials, straight in ZooKeeper (kafka-configs
    keeps this path for brokers' own credentials, needed before any broker is up)."""
    (entity,) = entities if len(entities) == 1 else (None,)
    if entity is None or entity.entity_type != "users" or entity.name is None:
        raise UsageError(
            "--zookeeper is for users' SCRAM credentials only (one named user, or every "
            "user with --describe); use --bootstrap-server for everything else"
        )
    if describe:
        lines = describe_credentials_in_zookeeper(
            connect, None if entity.name == ALL else [entity.name]
        )
        for line in lines:
            print(line)
        return 0
    print(alter_credentials_in_zookeeper(connect, entity.name, add, delete))
    return 0


run = tool_command(PROG, _run)
