"""The Kafka-script-style tools behind ``sluice topics``, ``console-producer`` and
``console-consumer``; :mod:`sluice.tools` registers them with the CLI.

Every use of a Kafka client library is in :mod:`sluice.tools_impl.client`.
"""
