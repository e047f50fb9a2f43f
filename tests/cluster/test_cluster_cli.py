"""``sluice cluster start``: ZooKeeper plus brokers on loopback, usable by any client,
and SIGTERM tears everything down (processes gone, temporary data removed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from support.waiting import wait_until


def test_cluster_start_serves_and_tears_down(cluster_prerequisites: None) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "sluice", "cluster", "start", "--brokers", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("Ctrl-C"):
                break
        fields = dict(line.split(":", 1) for line in lines if ":" in line)
        bootstrap = fields["bootstrap servers"].strip()
        data_dir = Path(fields["data and logs in"].strip())
        assert data_dir.is_dir()
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        admin.create_topics([NewTopic("tryout", 2, 2)])["tryout"].result(15)
        wait_until(  # both partitions listed (a broker may not know the new topic yet)
            lambda: [
                len(p.isrs)
                for p in admin.list_topics("tryout", timeout=5).topics["tryout"].partitions.values()
            ] == [2, 2],
            30, "two in-sync replicas",
        )  # fmt: skip
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, "".join(lines) + out
    assert "stopping the cluster" in out
    assert not data_dir.exists()
