"""PLAINTEXT produce and consume with the ACL authorizer and 1,000 ACLs against none.

Each run starts a fresh ``sluice broker``, either without an authorizer ("none") or
with ``authorizer.class.name=kafka.security.authorizer.AclAuthorizer`` and --acls ACLs
loaded from its data directory ("acl"), the two alternating, and measures on it, with
confluent-kafka (bench/produce_consume.py's load generator):

* produce: --records records of --size bytes (acks=1, linger.ms=5, batch.size=1 MiB)
  for at most --seconds: MB/s and the broker's CPU seconds per GB;
* consume: the same records read back from offset 0 (assign(), no group): MB/s and the
  broker's CPU seconds per GB.

The ACLs: ``User:ANONYMOUS`` (the benchmark's clients) may do ALL on topics prefixed
``bench-`` and the rest are other principals' literal and prefixed topic ACLs, group
ACLs and a few DENYs, none of which apply to the benchmark's topics, so every
produce and fetch is authorized through a real match. ``allow.everyone.if.no.acl.found``
stays false. It prints every run, the medians of each mode and acl/none ratios (the
goal: within 5%). Figures only: nothing here asserts a time. Only 127.0.0.1 is used.

    sluice bench authorizer [--repeat 2] [--seconds 5] [--size 1024] [--acls 1000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from brokers import compile_sluice, log, sluice, wait_idle
from produce_consume import (
    BrokerHandle,
    Case,
    Result,
    Settings,
    create_topic,
    fmt,
    print_medians,
    run_consume,
    run_produce,
)
from sluice.security import KafkaPrincipal
from sluice.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from sluice.security.acl_store import ACL_FILE, FileAclStore
from sluice.security.authorizer import ACL_AUTHORIZER, AclAuthorizer

MODES = ("none", "acl")
METRICS = ["produce MB/s", "produce broker CPU-s/GB", "consume MB/s", "consume broker CPU-s/GB"]


def acl_bindings(count: int) -> list[AclBinding]:
    """``count`` ACLs: the benchmark client's, then other principals' (see the module)."""
    allow, deny = AclPermissionType.ALLOW, AclPermissionType.DENY
    anonymous = AccessControlEntry("User:ANONYMOUS", "*", AclOperation.ALL, allow)
    bindings = [AclBinding(ResourcePattern(ResourceType.TOPIC, "bench-", PatternType.PREFIXED),
                           anonymous)]  # fmt: skip
    ops = (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE)
    for i in range(count - 1):
        principal = f"User:team-{i % 97}"
        kind = i % 5
        if kind == 0:
            pattern = ResourcePattern(ResourceType.TOPIC, f"team-{i}.", PatternType.PREFIXED)
        elif kind == 1:
            pattern = ResourcePattern(ResourceType.GROUP, f"group-{i}")
        elif kind == 2:
            pattern = ResourcePattern(ResourceType.TOPIC, f"bench-{i}-other")  # not ours
        else:
            pattern = ResourcePattern(ResourceType.TOPIC, f"orders-{i}")
        permission = deny if i % 50 == 0 else allow
        entry = AccessControlEntry(principal, f"10.0.{i % 250}.1", ops[i % 3], permission)
        bindings.append(AclBinding(pattern, entry))
    return bindings


def seed(log_dir: Path, count: int) -> None:
    """Write the ACLs where the broker reads them at start."""
    log_dir.mkdir(parents=True, exist_ok=True)
    authorizer = AclAuthorizer(FileAclStore(log_dir / ACL_FILE))
    errors = authorizer.create_acls(acl_bindings(count))
    if any(errors):
        raise RuntimeError(f"seeding the ACLs failed: {[e for e in errors if e][:3]}")


def one_run(mode: str, args: argparse.Namespace) -> Result:
    with tempfile.TemporaryDirectory(prefix="bench-acl-") as tmp:
        overrides: dict[str, str] = {}
        if mode == "acl":
            log_dir = Path(tmp) / "logs"
            seed(log_dir, args.acls)
            overrides = {"log.dirs": str(log_dir), "authorizer.class.name": ACL_AUTHORIZER}
        with sluice(overrides=overrides) as (bootstrap, proc):
            handle = BrokerHandle(f"sluice-{mode}", bootstrap, proc)
            admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
            cfg = Settings(args.records, args.seconds, 1, 0.0, 0, 0)
            produced = run_produce(handle, create_topic(admin, 1), Case("produce", args.size),
                                   cfg)  # fmt: skip
            consumed = run_consume(handle, create_topic(admin, 1), Case("consume", args.size),
                                   cfg)  # fmt: skip
    return {
        "produce MB/s": produced["MB/s"],
        "produce broker CPU-s/GB": produced["broker CPU-s/GB"],
        "consume MB/s": consumed["MB/s"],
        "consume broker CPU-s/GB": consumed["broker CPU-s/GB"],
    }


def decision_costs(count: int) -> dict[str, float]:
    """In process, with ``count`` ACLs: the time of one decision from the cache (what each
    topic of a produce or fetch request costs) and of one worked out again."""
    authorizer = AclAuthorizer(_MemoryStore())
    authorizer.create_acls(acl_bindings(count))
    who, op, topic = KafkaPrincipal("User", "ANONYMOUS"), AclOperation.WRITE, "bench-0123456789ab"
    rounds = 200_000
    authorize = authorizer.authorize
    assert authorize(who, "127.0.0.1", op, ResourceType.TOPIC, topic)
    start = time.perf_counter_ns()
    for _ in range(rounds):
        authorize(who, "127.0.0.1", op, ResourceType.TOPIC, topic)
    cached = (time.perf_counter_ns() - start) / rounds
    decide = authorizer._decide
    start = time.perf_counter_ns()
    for _ in range(rounds // 10):
        decide(who, "127.0.0.1", op, ResourceType.TOPIC, topic)
    uncached = (time.perf_counter_ns() - start) / (rounds // 10)
    return {"cached ns": cached, "uncached ns": uncached}


class _MemoryStore:
    """ACLs kept in memory only, for :func:`decision_costs`."""

    def __init__(self) -> None:
        self.acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}

    def load(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        return dict(self.acls)

    def load_one(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        return self.acls.get(pattern, frozenset())

    def update(self, pattern, change):  # type: ignore[no-untyped-def]
        self.acls[pattern] = change(self.acls.get(pattern, frozenset()))
        return self.acls[pattern]


def print_table(runs: dict[str, list[Result]], acls: int) -> None:
    print_medians(
        f" (PLAINTEXT; acl: AclAuthorizer with {acls} ACLs)", runs, METRICS, "acl", "none"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sluice bench authorizer",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--repeat", type=int, default=2, help="runs per mode (default 2)")
    parser.add_argument("--seconds", type=float, default=5.0, help="produce time limit (5)")
    parser.add_argument("--records", type=int, default=2_000_000, help="most records (2e6)")
    parser.add_argument("--size", type=int, default=1024, help="record size in bytes (1024)")
    parser.add_argument("--acls", type=int, default=1000, help="ACLs of the acl mode (1000)")
    parser.add_argument("--idle-cpu", type=float, default=15.0, help="idle below this busy %%")
    parser.add_argument("--idle-wait", type=float, default=20.0, help="most s to wait for idle")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    compile_sluice()
    costs = decision_costs(args.acls)
    log(f"one decision with {args.acls} ACLs: {costs['cached ns']:.0f} ns from the cache, "
        f"{costs['uncached ns']:.0f} ns worked out")  # fmt: skip
    runs: dict[str, list[Result]] = {mode: [] for mode in MODES}
    for index in range(args.repeat):
        order = list(MODES) if index % 2 == 0 else list(reversed(MODES))
        for mode in order:
            seen = wait_idle(args.idle_cpu, args.idle_wait)
            result = one_run(mode, args)
            runs[mode].append(result)
            figures = "  ".join(f"{m} {fmt(result[m])}" for m in METRICS)
            log(f"{mode} run {index + 1} ({seen}): {figures}")
    print_table(runs, args.acls)
    return 0
