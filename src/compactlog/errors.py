"""The one error hierarchy of compactlog.

Every error the package raises on purpose derives from :class:`CompactlogError`. Errors that can
reach a Kafka client carry the Kafka protocol error code in ``error_code`` (the numbers are
Kafka's, from ``org.apache.kafka.common.protocol.Errors``), so the broker can answer with them
unchanged and the CLI can print them.

Families:

* corrupt data: :class:`CorruptRecordError` (bytes that do not follow the record format);
* storage I/O: :class:`StorageError` (the filesystem failed us);
* configuration: :class:`ConfigError` (a config name or value is not acceptable);
* protocol: :class:`ProtocolError` (a peer sent bytes that are not a Kafka request or response
  we can read) and :class:`UnsupportedVersionError`;
* idempotent producers: :class:`ProducerStateError` and its subclasses (sequence and epoch
  checks of the log's producer state);
* requests: everything else here, each the local twin of one Kafka error code.

Kafka's error codes are here too, in one table (:data:`ERROR_NAMES`), so the storage layer, the
protocol and the broker name a code the same way.
"""

from __future__ import annotations

# --------------------------------------------------------------------------------------------
# Kafka's error codes (org.apache.kafka.common.protocol.Errors): the one table. The numbers are
# Kafka's and must never change; the errors below carry them in ``error_code`` and the broker
# answers with them. ERROR_NAMES gives Kafka's name of each, for log lines and messages.

UNKNOWN_SERVER_ERROR = -1
NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_FETCH_SIZE = 4
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
MESSAGE_TOO_LARGE = 10
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
INVALID_TOPIC_EXCEPTION = 17
RECORD_LIST_TOO_LARGE = 18
INVALID_REQUIRED_ACKS = 21
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
INVALID_COMMIT_OFFSET_SIZE = 28
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
INVALID_TIMESTAMP = 32
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
NOT_CONTROLLER = 41
INVALID_REQUEST = 42
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
POLICY_VIOLATION = 44
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
SECURITY_DISABLED = 54
KAFKA_STORAGE_ERROR = 56
UNKNOWN_PRODUCER_ID = 59
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
UNSUPPORTED_COMPRESSION_TYPE = 76
OFFSET_NOT_AVAILABLE = 78
MEMBER_ID_REQUIRED = 79
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82
ELECTION_NOT_NEEDED = 84
NO_REASSIGNMENT_IN_PROGRESS = 85
GROUP_SUBSCRIBED_TO_TOPIC = 86
INVALID_RECORD = 87
UNKNOWN_TOPIC_ID = 100

ERROR_NAMES: dict[int, str] = {
    value: name for name, value in dict(globals()).items() if name.isupper() and type(value) is int
}


def error_name(code: int) -> str:
    """Kafka's name of ``code`` (``"UNKNOWN_TOPIC_OR_PARTITION"``), or ``"ERROR_<n>"``."""
    return ERROR_NAMES.get(code, f"ERROR_{code}")


class CompactlogError(Exception):
    """Base of every error compactlog raises on purpose."""

    error_code: int = UNKNOWN_SERVER_ERROR


class CorruptRecordError(CompactlogError):
    """Bytes that are not a valid record batch; the message names the field and the numbers."""

    error_code = CORRUPT_MESSAGE


class UnsupportedCompressionError(CorruptRecordError):
    """A batch names a compression codec outside 0-4 (or one we cannot decode)."""

    error_code = UNSUPPORTED_COMPRESSION_TYPE


class StorageError(CompactlogError):
    """The filesystem failed (ENOSPC, EIO, ...); the log directory may need to go offline."""

    error_code = KAFKA_STORAGE_ERROR


class ConfigError(CompactlogError):
    """An unknown config name or a value outside its valid range.

    ``kafka_message``, when set, is Kafka's own sentence for the same refusal (its
    ``ConfigException`` text), which the broker sends to clients so that Kafka's tools print
    what they print against Kafka; ``str()`` stays compactlog's more specific sentence.
    """

    error_code = INVALID_CONFIG

    def __init__(self, message: str, *, kafka_message: str | None = None) -> None:
        super().__init__(message)
        self.kafka_message = kafka_message


class InvalidTopicError(CompactlogError):
    """A topic name that Kafka would refuse (characters, length, ``.``/``..``)."""

    error_code = INVALID_TOPIC_EXCEPTION


class TopicExistsError(CompactlogError):
    error_code = TOPIC_ALREADY_EXISTS


class UnknownTopicOrPartitionError(CompactlogError):
    error_code = UNKNOWN_TOPIC_OR_PARTITION


class InvalidPartitionsError(CompactlogError):
    error_code = INVALID_PARTITIONS


class InvalidRecordError(CompactlogError):
    """A record the log refuses as a whole batch (for example a null key on a compacted topic).

    ``record_errors`` names the offending records when the refusal is about records rather than
    the batch: (index in the batch, Kafka's message for it), which Produce v8+ reports
    (KIP-467) and Kafka's clients raise.
    """

    error_code = INVALID_RECORD

    def __init__(self, message: str, record_errors: tuple[tuple[int, str], ...] = ()) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class InvalidTimestampError(CompactlogError):
    error_code = INVALID_TIMESTAMP


class MessageTooLargeError(CompactlogError):
    """A batch larger than the topic's ``max.message.bytes``."""

    error_code = MESSAGE_TOO_LARGE


class RecordBatchTooLargeError(CompactlogError):
    """A batch larger than ``segment.bytes``: it can never fit in a segment."""

    error_code = RECORD_LIST_TOO_LARGE


class OffsetOutOfRangeError(CompactlogError):
    """A read below the log start offset or above the log end offset."""

    error_code = OFFSET_OUT_OF_RANGE


class PolicyViolationError(CompactlogError):
    error_code = POLICY_VIOLATION


class InvalidRequestError(CompactlogError):
    error_code = INVALID_REQUEST


class InvalidArgumentError(InvalidRequestError, TypeError):
    """A library call got an argument of the wrong type (a float offset, a str where bytes go);
    the message names the argument. Also a ``TypeError``, as Python callers expect."""


class ProtocolError(CompactlogError):
    """A peer sent bytes that are not a well-formed Kafka request or response (a bad length,
    a truncated field, a frame over the size limit)."""

    error_code = INVALID_REQUEST


class UnsupportedVersionError(ProtocolError):
    """A request's API version is not one this broker implements."""

    error_code = UNSUPPORTED_VERSION


class ProducerStateError(CompactlogError):
    """An idempotent producer's batch does not follow its producer state."""


class OutOfOrderSequenceError(ProducerStateError):
    error_code = OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceError(ProducerStateError):
    """The batch was appended before (a retry): Kafka answers with the offset it got then."""

    error_code = DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(ProducerStateError):
    error_code = INVALID_PRODUCER_EPOCH


class UnknownProducerIdError(ProducerStateError):
    error_code = UNKNOWN_PRODUCER_ID


# --------------------------------------------------------------------------------------------
# Errors of the storage layer


class UnsupportedFileError(CompactlogError):
    """A file that ``dump_log_file`` cannot read (not a log, index or checkpoint file)."""


class CorruptSnapshotError(CorruptRecordError):
    """A ``.snapshot`` file that cannot be trusted; the state is rebuilt from the log instead."""


class MalformedCheckpointError(CompactlogError):
    """A checkpoint file that does not follow the format; callers treat it as missing."""


class CorruptIndexError(CompactlogError):
    """An index file that is not a valid index of its segment; it is rebuilt from the log."""


class OffsetOverflowError(CompactlogError):
    """An offset that cannot be stored relative to its segment's base offset."""


# --------------------------------------------------------------------------------------------
# Errors of the log cleaner


class AbortedTransactionsError(CompactlogError):
    """The log records aborted transactions (a ``.txnindex`` Kafka wrote), which this cleaner
    cannot remove yet: the partition is marked uncleanable instead of cleaned wrongly."""


class CleaningAbortedError(CompactlogError):
    """The round was aborted (the partition was paused, truncated or deleted)."""


class OffsetMapFullError(CompactlogError):
    """A ``put`` of a new entry when every slot is taken (Kafka's ``require`` in ``put``)."""


class OffsetMapRangeError(CompactlogError):
    """A ``put`` into a :class:`CompactOffsetMap` of an offset it cannot store relative to its
    base offset (outside ``[base_offset, base_offset + 2^32)``)."""


class IllegalCleaningStateError(CompactlogError):
    """A cleaning-state transition that Kafka refuses (Kafka's ``IllegalStateException``)."""


# --------------------------------------------------------------------------------------------
# Errors of the Spark pipeline (the compactlog[spark] extra)


class SinkError(CompactlogError, ValueError):
    """A write the sink refuses: bad columns or options, a missing topic, overwrite mode."""

    error_code = INVALID_REQUEST


class ReportFileError(CompactlogError):
    """A file given as a report that :func:`write_json` did not write (or cannot be read)."""


class SparkSourceError(CompactlogError):
    """A bad option or an unreadable log, named."""


class SnapshotError(CompactlogError):
    """A snapshot that cannot be built or read here; the message says what to do."""


class PipelineError(CompactlogError):
    """The pipeline's own check failed: the result is not what the workload implies."""
