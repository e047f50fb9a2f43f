"""Helpers shared by the test suite, one module per topic.

Tests import them as ``from support.<module> import ...``: pyproject.toml's pytest
``pythonpath`` puts ``tests/`` on the path. Fixtures built on them live in
tests/conftest.py (and a directory's conftest.py for what only it uses).

- ``waiting``: :func:`~support.waiting.wait_until`, the one way to wait for a condition
  (a deadline, never a bare sleep), and its asyncio twin.
- ``brokers``: a ``sluice broker`` process (:class:`~support.brokers.BrokerProcess`) and
  its data files; embedded brokers are the ``broker`` fixture.
- ``zookeeper``: a throwaway ZooKeeper server, or a skip saying what to install.
- ``metastore``: coordination-store factories, watch-event sinks, barriers.
- ``records``: record batches built and read independently of ``sluice`` (test oracles).
- ``logs``: logs on disk, a manual clock, page-cache retries, manual file work.
- ``cleaner``: the log cleaner on compacted logs, and reading back what survived.
- ``clients``: real clients (confluent-kafka, kafka-python) creating, producing, reading.
- ``groups``: real consumers in groups, on threads or in killable processes.
- ``group_coordinator``: the sans-I/O group coordinator on a manual clock.
- ``mock_client``: Kafka's MockClient for the producer's Sender.
- ``wire``: raw Kafka frames over a socket or asyncio streams.
- ``cluster``: clusters under load: numbered producers, leader views, audits (on
  ``sluice chaos``'s clients and checker).
- ``controller``: an in-process cluster of controllers on one coordination tree.
- ``bench``: importing the harness scripts in bench/.
- ``txn_transform``: a consume-transform-produce program run as a subprocess.
"""
