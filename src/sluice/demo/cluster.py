"""``sluice demo --cluster``: the demo on a Sluice cluster and a Spark cluster, all local
processes.

- Three ``sluice broker`` processes on a real ZooKeeper
  (:class:`~sluice.testing.EmbeddedCluster` with ``zookeeper=True``): topics get three
  replicas and ``min.insync.replicas=2``.
- A Spark standalone master and two workers of one core each
  (:class:`~sluice.spark.standalone.StandaloneSparkCluster`), started from the PySpark
  installation; the demo's queries run in two executors, JVMs of their own, whose Python
  workers read each partition from its leader.

:meth:`DemoCluster.stop` stops the Spark session, the workers (their executors with
them), the master, the brokers and ZooKeeper; the demo calls it on every way out,
Ctrl-C included. The executors' logs stay in ``DIR/spark-cluster``.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sluice.client import Admin
from sluice.testing import EmbeddedCluster

__all__ = ["DemoCluster"]

_BROKERS = [1, 2, 3]


class DemoCluster:
    """The demo's clusters; :meth:`start` returns the bootstrap servers and the session."""

    def __init__(self, out_dir: Path, say: Callable[[str], None]) -> None:
        self.spark_dir = out_dir / "spark-cluster"
        self.say = say
        self.sluice: EmbeddedCluster | None = None
        self.spark_cluster: Any = None
        self.spark: Any = None

    def start(self, **spark_conf: str) -> tuple[str, Any]:
        """Start both clusters and a Spark session on them (``spark_conf`` added to its
        settings); returns the bootstrap servers and the session."""
        from sluice.spark.standalone import StandaloneSparkCluster

        self.say("starting ZooKeeper and 3 Sluice brokers (processes)")
        overrides = {"default.replication.factor": 3, "min.insync.replicas": 2,
                     "transaction.state.log.num.partitions": 1}  # fmt: skip
        self.sluice = EmbeddedCluster(brokers=3, broker_ids=_BROKERS, overrides=overrides,
                                      zookeeper=True)  # fmt: skip
        self.sluice.start_all()
        bootstrap = self.sluice.bootstrap_servers
        self.say(f"Sluice cluster: brokers {_BROKERS} on {bootstrap}")
        self.say("starting a Spark standalone master and 2 workers (1 core each)")
        shutil.rmtree(self.spark_dir, ignore_errors=True)
        self.spark_cluster = StandaloneSparkCluster(workers=2, work_dir=self.spark_dir)
        self.spark_cluster.start()
        self.say(f"Spark master {self.spark_cluster.master_url}, workers up; starting the "
                 "application")  # fmt: skip
        self.spark = self.spark_cluster.session("sluice-demo", **spark_conf)
        self.say(f"Spark {self.spark.version} ready on {self.spark_cluster.master_url}")
        return bootstrap, self.spark

    def read_summary(self, topic: str) -> list[str]:
        """One line per partition of ``topic``: the brokers its read tasks fetched from
        (from the executors' logs), beside its leader now."""
        if self.sluice is None or self.spark_cluster is None:
            return []
        with Admin({"bootstrap.servers": self.sluice.bootstrap_servers}) as admin:
            leaders = {p.partition: p.leader for p in admin.describe_topics([topic])[topic]
                       .partitions}  # fmt: skip
        tasks: dict[int, list[tuple[str, frozenset[int]]]] = {}
        for path, reads in self.spark_cluster.task_reads().items():
            executor = f"executor {path.parent.name}"
            for read in reads:
                if read.topic == topic:
                    tasks.setdefault(read.partition, []).append((executor, read.broker_ids))
        lines = []
        for partition in sorted(leaders):
            found = tasks.get(partition, [])
            brokers = sorted(set().union(*(b for _, b in found))) if found else []
            executors = sorted({e for e, _ in found})
            lines.append(
                f"{topic}-{partition}: {len(found)} read tasks in {', '.join(executors) or '-'}, "
                f"fetched from broker {', '.join(map(str, brokers)) or '-'} "
                f"(leader: broker {leaders[partition]})"
            )
        return lines

    def stop(self) -> None:
        if self.spark is not None:
            self.spark.stop()
            self.spark = None
        if self.spark_cluster is not None:
            self.spark_cluster.stop()
            self.spark_cluster = None
        if self.sluice is not None:
            self.sluice.stop()
            self.sluice = None
