"""Client exceptions, named after the Java client's (``org.apache.kafka.common.errors``).

Every exception here is a :class:`~sluice.protocol.errors.KafkaError`, so it carries
the Kafka error code it stands for (``exc.code``) and Kafka's ``retriable`` flag.
:func:`exception_for` turns an error code from a response into the matching
exception: a named class for the codes a client acts on, :class:`ApiException`
(with the code set) for the rest. Client-side conditions without a wire code
(bad configuration, a closed producer, bad input) use the same names the Java
client gives them.
"""

from __future__ import annotations

from typing import Final

from sluice.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "ApiException",
    "AuthenticationException",
    "BufferExhaustedException",
    "ClusterAuthorizationException",
    "ConfigException",
    "CorruptRecordException",
    "DuplicateSequenceException",
    "InvalidMetadataException",
    "InvalidProducerEpochException",
    "InvalidRecordException",
    "InvalidRequiredAcksException",
    "InvalidTopicException",
    "KafkaException",
    "KafkaStorageException",
    "LeaderNotAvailableException",
    "NetworkException",
    "NotEnoughReplicasAfterAppendException",
    "NotEnoughReplicasException",
    "NotLeaderOrFollowerException",
    "OutOfOrderSequenceException",
    "ProducerFencedException",
    "RecordBatchTooLargeException",
    "RecordTooLargeException",
    "RetriableException",
    "SaslAuthenticationException",
    "SerializationException",
    "TimeoutException",
    "TopicAuthorizationException",
    "UnknownProducerIdException",
    "UnknownServerException",
    "UnknownTopicOrPartitionException",
    "UnsupportedSaslMechanismException",
    "UnsupportedVersionException",
    "exception_for",
]


class KafkaException(KafkaError):
    """Base class of every exception the Sluice clients raise (Java's KafkaException)."""


class ConfigException(KafkaException):
    """A configuration key is unknown or its value is invalid."""

    code = ErrorCode.invalid_config


class AuthenticationException(KafkaException):
    """The client could not authenticate (Java's AuthenticationException): not retried."""


class SaslAuthenticationException(AuthenticationException):
    """The broker refused the SASL credentials; the message is the broker's."""


class UnsupportedSaslMechanismException(AuthenticationException):
    """The broker does not serve the client's ``sasl.mechanism``."""


class SerializationException(KafkaException):
    """A key or value is not bytes (and no serializer turned it into bytes)."""

    code = ErrorCode.invalid_record


class ApiException(KafkaException):
    """An error code returned by a broker (the code is in ``exc.code``)."""


class RetriableException(ApiException):
    """A transient error: the same request may succeed if retried."""


class InvalidMetadataException(RetriableException):
    """The client's metadata is stale: refresh it before retrying."""


class TimeoutException(RetriableException):
    """An operation did not complete in time (request, delivery, max.block.ms)."""

    code = ErrorCode.request_timed_out


class BufferExhaustedException(TimeoutException):
    """The BufferPool had no memory for a batch within max.block.ms."""


class NetworkException(InvalidMetadataException):
    """The connection to a broker was lost before its response arrived."""

    code = ErrorCode.network_exception


class NotLeaderOrFollowerException(InvalidMetadataException):
    """The broker is not the leader of the partition (any more)."""

    code = ErrorCode.not_leader_or_follower


class LeaderNotAvailableException(InvalidMetadataException):
    """The partition has no leader at the moment (an election is in progress)."""

    code = ErrorCode.leader_not_available


class UnknownTopicOrPartitionException(InvalidMetadataException):
    """The broker does not host this topic-partition."""

    code = ErrorCode.unknown_topic_or_partition


class KafkaStorageException(InvalidMetadataException):
    """The partition's log directory is offline on the broker."""

    code = ErrorCode.kafka_storage_error


class NotEnoughReplicasException(RetriableException):
    """Fewer in-sync replicas than min.insync.replicas: the write was refused."""

    code = ErrorCode.not_enough_replicas


class NotEnoughReplicasAfterAppendException(RetriableException):
    """Written to the leader, but the ISR shrank below min.insync.replicas."""

    code = ErrorCode.not_enough_replicas_after_append


class CorruptRecordException(RetriableException):
    """The broker found a bad CRC or a malformed record batch."""

    code = ErrorCode.corrupt_message


class RecordTooLargeException(ApiException):
    """A record (or its batch) is larger than max.request.size, buffer.memory or the
    topic's max.message.bytes."""

    code = ErrorCode.message_too_large


class RecordBatchTooLargeException(ApiException):
    """The request's record batches exceed the broker's limit."""

    code = ErrorCode.record_list_too_large


class InvalidTopicException(ApiException):
    """The topic name is not a legal Kafka topic name."""

    code = ErrorCode.invalid_topic_exception


class InvalidRecordException(ApiException):
    """The broker rejected a record (for example a null key on a compacted topic)."""

    code = ErrorCode.invalid_record


class InvalidRequiredAcksException(ApiException):
    """acks was not 0, 1 or -1 (all)."""

    code = ErrorCode.invalid_required_acks


class TopicAuthorizationException(ApiException):
    """The client may not write to the topic."""

    code = ErrorCode.topic_authorization_failed


class ClusterAuthorizationException(ApiException):
    """The client may not perform a cluster action (such as InitProducerId)."""

    code = ErrorCode.cluster_authorization_failed


class UnsupportedVersionException(ApiException):
    """The broker does not support an API or version the client needs."""

    code = ErrorCode.unsupported_version


class OutOfOrderSequenceException(ApiException):
    """The broker saw a sequence gap from this idempotent producer."""

    code = ErrorCode.out_of_order_sequence_number


class UnknownProducerIdException(OutOfOrderSequenceException):
    """The broker has no state for this producer id (it expired or was deleted)."""

    code = ErrorCode.unknown_producer_id


class DuplicateSequenceException(ApiException):
    """The batch was already written (a retry the broker recognised)."""

    code = ErrorCode.duplicate_sequence_number


class InvalidProducerEpochException(ApiException):
    """The producer's epoch is older than the one the broker knows."""

    code = ErrorCode.invalid_producer_epoch


class ProducerFencedException(ApiException):
    """Another producer with the same transactional id has a newer epoch."""

    code = ErrorCode.producer_fenced


class UnknownServerException(ApiException):
    """The broker hit an unexpected error."""

    code = ErrorCode.unknown_server_error


_BY_CODE: Final[dict[ErrorCode, type[ApiException]]] = {
    cls.code: cls
    for cls in (
        TimeoutException,
        NetworkException,
        NotLeaderOrFollowerException,
        LeaderNotAvailableException,
        UnknownTopicOrPartitionException,
        KafkaStorageException,
        NotEnoughReplicasException,
        NotEnoughReplicasAfterAppendException,
        CorruptRecordException,
        RecordTooLargeException,
        RecordBatchTooLargeException,
        InvalidTopicException,
        InvalidRecordException,
        InvalidRequiredAcksException,
        TopicAuthorizationException,
        ClusterAuthorizationException,
        UnsupportedVersionException,
        OutOfOrderSequenceException,
        UnknownProducerIdException,
        DuplicateSequenceException,
        InvalidProducerEpochException,
        ProducerFencedException,
        UnknownServerException,
    )
}

_INVALID_METADATA: Final = frozenset(
    {
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.replica_not_available,
        ErrorCode.not_controller,
    }
)


def exception_for(code: ErrorCode | int, message: str | None = None) -> ApiException:
    """The exception for a Kafka error code from a response (``message`` if the broker
    sent one, else the code's name)."""
    code = ErrorCode(code)
    if code is ErrorCode.none:
        raise ValueError("error code NONE is not an error")
    cls = _BY_CODE.get(code)
    if cls is not None:
        return cls(message or "")
    if code in _INVALID_METADATA:
        return InvalidMetadataException(message or "", code=code)
    if code.retriable:
        return RetriableException(message or "", code=code)
    return ApiException(message or "", code=code)
