"""The Kafka-script-style tools behind ``sluice topics``, ``console-producer``,
``console-consumer`` and ``consumer-groups``; :mod:`sluice.tools` registers them.

Every use of a Kafka client (Sluice's own) is in :mod:`sluice.tools_impl.client`.
"""
