"""Protocol codec benchmark: kio's decoder and encoder, and Sluice's additions around them.

Prints, for each case, operations per second and MB/s (payload bytes: the whole frame),
the best of several timed runs, and whether record batches are copied:

* decode Produce requests (v9 flexible, v3 legacy): one 1 MiB batch, and 8 partitions
  x 16 KiB; the full ``decode_request`` path and its parts (kio's native reader
  alone, Sluice's structural guard alone);
* encode Fetch responses (v13, v12 flexible, v11 legacy) with 8 partitions x 64 KiB,
  through kio's writer (``encode_response``) and the hand-written segment encoder
  (``encode_fetch_response``);
* decode Metadata and ApiVersions requests, and encode an ApiVersions response.

Figures only: nothing here asserts a time.

    python bench/protocol_codec.py [--repeat 5] [--budget 0.2]
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from kio.serial import entity_reader
from kio.static.primitive import i16, i32, i32Timedelta, i64

from sluice.protocol import (
    ErrorCode,
    api_versions_response,
    decode_request,
    encode_fetch_response,
    encode_request,
    encode_response,
)
from sluice.protocol.guard import check_request
from sluice.protocol.headers import parse_request_header
from sluice.server.apis import registry

SERVED = registry().versions  # what a broker accepts and advertises


KIB = 1024
MIB = 1024 * KIB


def _schema(api: str, version: int, kind: str) -> Any:
    return importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")


def produce_request(version: int, partitions: int, size: int) -> Any:
    m = _schema("produce", version, "request")
    blob = bytes(range(256)) * (size // 256)
    parts = tuple(m.PartitionProduceData(index=i32(p), records=blob) for p in range(partitions))
    return m.ProduceRequest(
        transactional_id=None,
        acks=i16(-1),
        timeout=i32Timedelta.parse(timedelta(seconds=30)),
        topic_data=(m.TopicProduceData(name="bench-topic", partition_data=parts),),
    )


def fetch_response(version: int, partitions: int, size: int) -> Any:
    m = _schema("fetch", version, "response")
    blob = bytes(range(256)) * (size // 256)
    parts = tuple(
        m.PartitionData(
            partition_index=i32(p),
            error_code=ErrorCode.none,
            high_watermark=i64(1_000_000),
            last_stable_offset=i64(1_000_000),
            log_start_offset=i64(0),
            aborted_transactions=None,
            preferred_read_replica=i32(-1),
            records=blob,
        )
        for p in range(partitions)
    )
    name: dict[str, Any] = (
        {"topic_id": uuid.UUID(int=42)} if version >= 13 else {"topic": "bench-topic"}
    )
    return m.FetchResponse(
        throttle_time=i32Timedelta.parse(timedelta(0)),
        error_code=ErrorCode.none,
        session_id=i32(0),
        responses=(m.FetchableTopicResponse(partitions=parts, **name),),
    )


def metadata_request(version: int, topics: int | None) -> Any:
    """A Metadata request for ``topics`` named topics, or all topics if None."""
    m = _schema("metadata", version, "request")
    extra: dict[str, Any] = {"topic_id": None} if version >= 10 else {}
    names = (
        None
        if topics is None
        else tuple(m.MetadataRequestTopic(name=f"topic-{t}", **extra) for t in range(topics))
    )
    fields: dict[str, Any] = {"topics": names}
    if version >= 4:
        fields["allow_auto_topic_creation"] = False
    if 8 <= version <= 10:
        fields["include_cluster_authorized_operations"] = False
    if version >= 8:
        fields["include_topic_authorized_operations"] = False
    return m.MetadataRequest(**fields)


def api_versions_request(version: int) -> Any:
    m = _schema("api_versions", version, "request")
    if version >= 3:
        return m.ApiVersionsRequest(client_software_name="bench", client_software_version="1.0")
    return m.ApiVersionsRequest()


def measure(fn: Callable[[], object], budget: float, repeat: int) -> float:
    """Best seconds per call over ``repeat`` runs of about ``budget`` seconds each.

    The minimum, not the mean: on a shared machine, slower runs measure the neighbours.
    """
    loops = 1
    while True:
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= budget / 4:
            break
        loops *= 2
    loops = max(1, int(loops * budget / max(elapsed, 1e-9)))
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        runs.append((time.perf_counter() - start) / loops)
    return min(runs)


def row(label: str, seconds: float, nbytes: int, note: str = "") -> None:
    ops = 1 / seconds
    mbs = nbytes * ops / 1e6
    print(f"  {label:<44} {ops:>11,.0f} ops/s {mbs:>9,.0f} MB/s {seconds * 1e6:>9.1f} us  {note}")


def bench_produce(args: argparse.Namespace) -> None:
    print("Decode Produce requests (frame without size prefix)")
    for version in (9, 3):
        for partitions, size in ((1, MIB), (8, 16 * KIB)):
            body = produce_request(version, partitions, size)
            frame = memoryview(encode_request(1, body))[4:]
            _, offset = parse_request_header(frame)
            body_type = type(body)
            reader = entity_reader(body_type)
            decoded = decode_request(frame, SERVED).body
            records = decoded.topic_data[0].partition_data[0].records  # type: ignore[attr-defined]
            note = (
                f"records: {type(records).__name__}, "
                f"{'view of the frame' if isinstance(records, memoryview) else 'copied'}"
            )
            label = f"v{version} {partitions} x {size // KIB} KiB"
            row(
                f"{label} decode_request",
                measure(lambda f=frame: decode_request(f, SERVED), args.budget, args.repeat),
                len(frame),
                note,
            )
            row(
                f"{label}   kio reader only",
                measure(lambda f=frame, r=reader, o=offset: r(f, o), args.budget, args.repeat),
                len(frame),
            )
            row(
                f"{label}   guard only",
                measure(
                    lambda f=frame, t=body_type, o=offset: check_request(t, f, o),
                    args.budget,
                    args.repeat,
                ),
                len(frame),
            )


def bench_fetch(args: argparse.Namespace) -> None:
    print("Encode Fetch responses, 8 partitions x 64 KiB records (framed)")
    for version in (13, 12, 11):
        response = fetch_response(version, 8, 64 * KIB)
        records = response.responses[0].partitions[0].records
        general = encode_response(1, response, use_kio=True)
        segments = encode_fetch_response(1, response)
        assert b"".join(segments) == general, "fast path differs from kio"
        shared = any(segment is records for segment in segments)
        row(
            f"v{version} kio encode_response",
            measure(
                lambda r=response: encode_response(1, r, use_kio=True), args.budget, args.repeat
            ),
            len(general),
            "records: copied into the output",
        )
        row(
            f"v{version} encode_fetch_response (segments)",
            measure(lambda r=response: encode_fetch_response(1, r), args.budget, args.repeat),
            len(general),
            f"records: {'referenced, not copied' if shared else 'copied'} "
            f"({len(segments)} segments)",
        )
        row(
            f"v{version} encode_fetch_response + join",
            measure(
                lambda r=response: b"".join(encode_fetch_response(1, r)), args.budget, args.repeat
            ),
            len(general),
        )


def bench_small(args: argparse.Namespace) -> None:
    print("Decode small requests")
    cases: list[tuple[str, Any]] = [
        ("Metadata v12, 3 topics", metadata_request(12, 3)),
        ("Metadata v4, 3 topics", metadata_request(4, 3)),
        ("Metadata v1, all topics", metadata_request(1, None)),
        ("ApiVersions v3", api_versions_request(3)),
        ("ApiVersions v0", api_versions_request(0)),
    ]
    for label, body in cases:
        frame = memoryview(encode_request(1, body))[4:]
        row(
            label,
            measure(lambda f=frame: decode_request(f, SERVED), args.budget, args.repeat),
            len(frame),
        )
    print("Encode small responses")
    for version in (3, 0):
        response = api_versions_response(SERVED, version)
        size = len(encode_response(1, response))
        row(
            f"ApiVersions v{version} ({len(SERVED)} APIs)",
            measure(lambda r=response: encode_response(1, r), args.budget, args.repeat),
            size,
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per case")
    parser.add_argument("--budget", type=float, default=0.2, help="seconds per timed run")
    args = parser.parse_args(argv)
    import kio

    print(f"Python {sys.version.split()[0]}, kio {kio.__version__}; best of {args.repeat} runs")
    bench_produce(args)
    bench_fetch(args)
    bench_small(args)


if __name__ == "__main__":
    main()
