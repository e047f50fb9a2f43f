"""Kafka error codes (kio's enum) and the protocol exceptions."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode as KioErrorCode

from sluice.protocol import (
    ErrorCode,
    FrameSizeError,
    FrameTooLargeError,
    KafkaError,
    MalformedRequestError,
    NegativeFrameSizeError,
    ProtocolError,
    RequestHeader,
    UnknownApiKeyError,
    UnsupportedApiVersionsError,
    UnsupportedVersionError,
    error_code,
)

KAFKA_CODES = {
    "UNKNOWN_SERVER_ERROR": -1,
    "NONE": 0,
    "OFFSET_OUT_OF_RANGE": 1,
    "CORRUPT_MESSAGE": 2,
    "UNKNOWN_TOPIC_OR_PARTITION": 3,
    "INVALID_FETCH_SIZE": 4,
    "LEADER_NOT_AVAILABLE": 5,
    "NOT_LEADER_OR_FOLLOWER": 6,
    "REQUEST_TIMED_OUT": 7,
    "MESSAGE_TOO_LARGE": 10,
    "NOT_COORDINATOR": 16,
    "INVALID_TOPIC_EXCEPTION": 17,
    "RECORD_LIST_TOO_LARGE": 18,
    "NOT_ENOUGH_REPLICAS": 19,
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": 20,
    "INVALID_REQUIRED_ACKS": 21,
    "ILLEGAL_GENERATION": 22,
    "UNKNOWN_MEMBER_ID": 25,
    "REBALANCE_IN_PROGRESS": 27,
    "TOPIC_AUTHORIZATION_FAILED": 29,
    "UNSUPPORTED_SASL_MECHANISM": 33,
    "ILLEGAL_SASL_STATE": 34,
    "UNSUPPORTED_VERSION": 35,
    "TOPIC_ALREADY_EXISTS": 36,
    "INVALID_PARTITIONS": 37,
    "INVALID_REPLICATION_FACTOR": 38,
    "INVALID_REQUEST": 42,
    "UNSUPPORTED_FOR_MESSAGE_FORMAT": 43,
    "OUT_OF_ORDER_SEQUENCE_NUMBER": 45,
    "DUPLICATE_SEQUENCE_NUMBER": 46,
    "INVALID_PRODUCER_EPOCH": 47,
    "SASL_AUTHENTICATION_FAILED": 58,
    "UNKNOWN_PRODUCER_ID": 59,
    "KAFKA_STORAGE_ERROR": 56,
    "FENCED_LEADER_EPOCH": 74,
    "UNKNOWN_LEADER_EPOCH": 75,
    "GROUP_ID_NOT_FOUND": 69,
    "MEMBER_ID_REQUIRED": 79,
    "PRODUCER_FENCED": 90,
    "UNKNOWN_TOPIC_ID": 100,
    "TRANSACTION_ABORTABLE": 120,
}


def test_error_code_is_kios_enum() -> None:
    assert ErrorCode is KioErrorCode


@pytest.mark.parametrize(("name", "value"), KAFKA_CODES.items())
def test_kafka_names_and_values(name: str, value: int) -> None:
    code = error_code(name)
    assert int(code) == value
    assert code is ErrorCode(value)
    assert code.name == name.lower()
    assert error_code(value) is code


def test_every_code_up_to_120_exists() -> None:
    values = {int(code) for code in ErrorCode}
    assert set(range(-1, 121)) <= values


def test_retriable_flags_follow_kafka() -> None:
    retriable = {
        "NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS",
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "UNKNOWN_TOPIC_OR_PARTITION", "CORRUPT_MESSAGE",
        "LEADER_NOT_AVAILABLE", "NOT_COORDINATOR", "KAFKA_STORAGE_ERROR",
        "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH",
    }  # fmt: skip
    fatal = {
        "NONE", "OFFSET_OUT_OF_RANGE", "MESSAGE_TOO_LARGE", "UNSUPPORTED_VERSION",
        "TOPIC_ALREADY_EXISTS", "INVALID_REQUEST", "INVALID_PARTITIONS",
        "INVALID_REPLICATION_FACTOR", "UNKNOWN_SERVER_ERROR", "TRANSACTION_ABORTABLE",
    }  # fmt: skip
    assert all(error_code(name).retriable for name in retriable)
    assert not any(error_code(name).retriable for name in fatal)


def test_error_code_lookup_failures() -> None:
    with pytest.raises(ValueError):
        error_code("NO_SUCH_ERROR")
    with pytest.raises(ValueError):
        error_code(30000)


def test_kafka_error_carries_a_code() -> None:
    plain = KafkaError()
    assert plain.code is ErrorCode.unknown_server_error
    assert str(plain) == "UNKNOWN_SERVER_ERROR"
    specific = KafkaError("leader moved", code=ErrorCode.not_leader_or_follower)
    assert specific.code is ErrorCode.not_leader_or_follower
    assert specific.retriable
    assert str(specific) == "leader moved"
    assert KafkaError.code is ErrorCode.unknown_server_error  # class default untouched

    class TopicExists(KafkaError):
        code = ErrorCode.topic_already_exists

    assert TopicExists().code is ErrorCode.topic_already_exists
    assert not TopicExists().retriable


def test_protocol_errors_close_the_connection() -> None:
    header = RequestHeader(18, 9, 1, None, 2)
    errors = [
        NegativeFrameSizeError(-1, 10),
        FrameTooLargeError(11, 10),
        MalformedRequestError("short"),
        UnknownApiKeyError(999),
        UnsupportedVersionError(header, (0, 4)),
        UnsupportedApiVersionsError(header, (0, 4), b"framed"),
    ]
    for error in errors:
        assert isinstance(error, ProtocolError)
        assert isinstance(error, KafkaError)
    assert isinstance(errors[0], FrameSizeError) and isinstance(errors[1], FrameSizeError)
    assert errors[1].code is ErrorCode.invalid_request
    assert errors[4].code is ErrorCode.unsupported_version
    assert "104857600" not in str(errors[1]) and "10 bytes" in str(errors[1])
    assert errors[5].response == b"framed"
