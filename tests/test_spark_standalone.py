"""The standalone Spark cluster helper's pure parts (commands, environment, the master's
status, session settings) and the source's task lines, without starting Spark; the
cluster itself runs in tests/spark/test_spark_standalone_cluster.py (slow)."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("pyspark")

from sluice.base import TopicPartition
from sluice.client.net.cluster import Cluster, Node
from sluice.spark.standalone import (
    MasterStatus,
    StandaloneSparkCluster,
    daemon_environment,
    find_spark_home,
    master_command,
    worker_command,
)
from sluice.spark.task_log import (
    LOG_LEVEL_ENV,
    BrokerFetches,
    fetch_counts,
    log_task_read,
    parse_task_reads,
)

HOME = Path("/opt/pyspark")


def test_spark_home_is_the_pyspark_package_with_its_launcher_and_jars() -> None:
    home = find_spark_home()
    assert (home / "bin" / "spark-class").is_file()
    assert any((home / "jars").glob("spark-core_*.jar"))


def test_master_and_worker_command_lines() -> None:
    assert master_command(HOME, 7077, 8080) == [
        "/opt/pyspark/bin/spark-class", "org.apache.spark.deploy.master.Master",
        "--host", "127.0.0.1", "--port", "7077", "--webui-port", "8080",
    ]  # fmt: skip
    command = worker_command(HOME, "spark://127.0.0.1:7077", 7078, 8081, cores=1,
                             memory="1g", work_dir=Path("/w/worker-0"))  # fmt: skip
    assert command == [
        "/opt/pyspark/bin/spark-class", "org.apache.spark.deploy.worker.Worker",
        "--host", "127.0.0.1", "--port", "7078", "--webui-port", "8081",
        "--cores", "1", "--memory", "1g", "--work-dir", "/w/worker-0", "spark://127.0.0.1:7077",
    ]  # fmt: skip


def test_daemon_environment_is_its_own_and_drops_a_drivers_gateway() -> None:
    base = {"PATH": "/bin", "PYSPARK_GATEWAY_PORT": "4242", "PYSPARK_GATEWAY_SECRET": "s",
            "SPARK_ENV_LOADED": "1", "SPARK_CONF_DIR": "/etc/spark"}  # fmt: skip
    env = daemon_environment(base, HOME, Path("/w/conf"), "256m", "/usr/lib/jvm/java-17")
    assert env == {
        "PATH": "/bin", "SPARK_HOME": "/opt/pyspark", "SPARK_CONF_DIR": "/w/conf",
        "SPARK_DAEMON_MEMORY": "256m", "SPARK_LOCAL_IP": "127.0.0.1",
        "JAVA_HOME": "/usr/lib/jvm/java-17",
    }  # fmt: skip


def test_master_status_from_its_json_page() -> None:
    doc = {
        "url": "spark://127.0.0.1:27077", "status": "ALIVE", "aliveworkers": 2,
        "workers": [
            {"id": "worker-20261128171639-127.0.0.1-27102", "host": "127.0.0.1", "port": 27102,
             "state": "ALIVE", "cores": 1, "coresused": 1, "memory": 768},
            {"id": "worker-20261128171640-127.0.0.1-27101", "host": "127.0.0.1", "port": 27101,
             "state": "DEAD", "cores": 1, "coresused": 0, "memory": 768},
        ],
        "activeapps": [{"id": "app-20261128171655-0000", "name": "try"}],
    }  # fmt: skip
    status = MasterStatus.from_json(doc)
    assert status.status == "ALIVE" and status.url == "spark://127.0.0.1:27077"
    assert status.alive_ports() == {27102}
    assert status.workers[0].cores_used == 1 and status.workers[1].memory_mb == 768
    assert status.active_apps == ("app-20261128171655-0000",)
    assert MasterStatus.from_json({"status": "ALIVE"}).alive_ports() == set()


@pytest.mark.integration  # picking the ports binds sockets
def test_session_settings_ship_sluice_to_the_executors(tmp_path: Path) -> None:
    import sluice

    cluster = StandaloneSparkCluster(workers=2, cores_per_worker=1, work_dir=tmp_path,
                                     python="/venv/bin/python")  # fmt: skip
    conf = cluster.session_conf()
    assert cluster.master_url == f"spark://127.0.0.1:{cluster.master_port}"
    assert conf["spark.cores.max"] == "2" and conf["spark.executor.cores"] == "1"
    assert conf["spark.pyspark.python"] == "/venv/bin/python"
    shipped = Path(conf["spark.executorEnv.PYTHONPATH"])
    assert (shipped / "sluice" / "__init__.py").resolve() == Path(sluice.__file__).resolve()
    assert conf[f"spark.executorEnv.{LOG_LEVEL_ENV}"] == "INFO"
    assert conf["spark.scheduler.minRegisteredResourcesRatio"] == "1.0"
    quiet = StandaloneSparkCluster(work_dir=tmp_path, task_log_level=None).session_conf()
    assert f"spark.executorEnv.{LOG_LEVEL_ENV}" not in quiet
    with pytest.raises(ValueError):
        StandaloneSparkCluster(workers=0)


def _consumer(fetches: dict[tuple[str, int], dict[int, int]]) -> SimpleNamespace:
    nodes = [Node(1, "127.0.0.1", 9092), Node(2, "127.0.0.1", 9093)]
    client = SimpleNamespace(cluster=Cluster("c", nodes, ()))
    counts = {TopicPartition(*tp): by_node for tp, by_node in fetches.items()}
    return SimpleNamespace(fetcher=SimpleNamespace(client=client, partition_fetches=counts))


def test_a_task_line_names_the_brokers_it_fetched_from_and_parses_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="sluice.spark")
    # a consumer kept from earlier tasks: only this task's fetches of its partition count
    consumer = _consumer({("shop-clicks-7a-2", 2): {1: 9}, ("t", 0): {2: 5}})
    before = fetch_counts(consumer, "shop-clicks-7a-2", 2)  # type: ignore[arg-type]
    assert before == {1: 9}
    consumer.fetcher.partition_fetches[TopicPartition("shop-clicks-7a-2", 2)][1] = 13
    log_task_read("shop-clicks-7a-2", 2, 100, 1600, consumer, before)  # type: ignore[arg-type]
    moved = _consumer({("t", 0): {2: 1, 1: 3}})
    log_task_read("t", 0, 0, 10, moved, {})  # type: ignore[arg-type]
    text = "\n".join(f"2026-11-28 17:00:00 INFO {r.name}: {r.getMessage()}" for r in caplog.records)
    first, second = parse_task_reads("other line\n" + text)
    assert (first.topic, first.partition, first.start, first.end) == (
        "shop-clicks-7a-2",
        2,
        100,
        1600,
    )
    assert first.brokers == (BrokerFetches(1, "127.0.0.1", 9092, 4),)
    assert first.pid > 0 and first.broker_ids == {1}
    assert second.broker_ids == {1, 2}
    assert second.brokers[1] == BrokerFetches(2, "127.0.0.1", 9093, 1)


def test_task_lines_are_off_without_the_level(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="sluice.spark")
    log_task_read("t", 0, 0, 10, _consumer({("t", 0): {1: 1}}), {})  # type: ignore[arg-type]
    assert parse_task_reads("\n".join(r.getMessage() for r in caplog.records)) == []
