"""The record-batch format (magic v2): the one definition of it in Sluice.

* :mod:`.batch`: the 61-byte header layout, its checks and in-place rewrites;
* :mod:`.builder`: writing batches (the producer's ``MemoryRecordsBuilder``,
  :func:`~.builder.build_batch` for internal records and markers);
* :mod:`.reader`: decoding the records of a batch;
* :mod:`.compression`: the codecs, written as the Java client writes them;
* :mod:`.varint`: signed (zig-zag) and unsigned varints;
* :mod:`.crc`: CRC-32C;
* :mod:`.errors`: the format's errors with Kafka's codes.

The broker, the clients and the coordinators all use these modules; the broker's
append and fetch paths only ever touch headers.
"""
