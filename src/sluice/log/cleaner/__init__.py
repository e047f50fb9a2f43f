"""Log compaction, Kafka's log cleaner: ``log_cleaner`` (``LogCleaner``, the cleaner
manager's choice of logs and its thread), ``cleaning_pass`` (one pass over one log),
``files`` (its checkpoint and the swap of cleaned segments, completed or rolled back at
start) and ``records`` (the record-level filtering of a batch, and the produce-time rule
that a compacted topic's records have keys).

Nothing is imported here: the log's append and recovery paths use ``files`` and
``records`` from the first request on, while a broker loads ``log_cleaner`` only once it
serves (its start-up imports stay small).
"""
