"""Replication's state, sans I/O: ``Partition`` (leader and follower state, ISR, high
watermark), ``ReplicaManager`` (appends, reads, acks, the produce and fetch purgatories),
``DelayedProduce``/``DelayedFetch``, incremental fetch sessions, producer id blocks, and
the ``MetadataCache`` every request's metadata comes from (fed by the local topic registry
on one broker, by the controller's UpdateMetadata in a cluster). The broker's asyncio
shell (``sluice.server``) drives them; nothing here opens a socket or runs a loop.
"""
