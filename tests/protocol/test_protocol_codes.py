"""Error codes and API tables: Kafka's numbers, checked against kafka-python and our errors."""

from __future__ import annotations

import warnings

import pytest

from compactlog import errors
from compactlog.protocol import (
    ADVERTISED,
    API_KEYS,
    API_NAMES,
    ERROR_NAMES,
    REQUESTS,
    RESPONSES,
    SUPPORTED,
    ApiKey,
    error_name,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.errors as kp_errors
    from kafka.protocol.api_key import ApiKey as KpApiKey


def test_error_codes_match_kafka_python() -> None:
    kafka_python = {
        cls.errno: cls.message
        for cls in vars(kp_errors).values()
        if isinstance(cls, type) and isinstance(getattr(cls, "errno", None), int)
    }
    # kafka-python keeps older names for these; ours are Errors.java's current ones.
    older_names = {
        -1: "UNKNOWN",
        0: "NO_ERROR",
        6: "NOT_LEADER_FOR_PARTITION",
        10: "MESSAGE_SIZE_TOO_LARGE",
        17: "INVALID_TOPIC",
        39: "INVALID_REPLICATION_ASSIGNMENT",
    }
    for code, name in ERROR_NAMES.items():
        assert kafka_python.get(code) == older_names.get(code, name), code


def test_every_error_carries_a_code_of_the_one_table() -> None:
    classes = [v for v in vars(errors).values() if isinstance(v, type)]
    compactlog_errors = [c for c in classes if issubclass(c, errors.CompactlogError)]
    assert len(compactlog_errors) > 20
    for cls in compactlog_errors:
        assert cls.error_code in ERROR_NAMES, cls.__name__


def test_error_name() -> None:
    assert error_name(87) == "INVALID_RECORD"
    assert error_name(0) == "NONE"
    assert error_name(12345) == "ERROR_12345"


def test_api_names_match_kafka_python() -> None:
    for key, name in API_NAMES.items():
        assert KpApiKey(key).name == name
        assert (
            API_KEYS[name]
            == key
            == ApiKey["".join("_" + c if c.isupper() else c.upper() for c in name).lstrip("_")]
        )


@pytest.mark.parametrize("key", sorted(SUPPORTED))
def test_every_supported_version_is_compiled(key: int) -> None:
    lo, hi = SUPPORTED[key]
    for v in range(lo, hi + 1):
        assert REQUESTS[key].has_version(v)
        assert RESPONSES[key].has_version(v)
    assert REQUESTS[key].name == API_NAMES[key] + "Request"
    assert RESPONSES[key].name == API_NAMES[key] + "Response"
    assert ADVERTISED[key][1] == hi


#: The advertised set of spec section 1.5, which all four Python-side clients were measured with.
SPEC_MINIMAL_SET = {
    0: (0, 7), 1: (4, 11), 2: (1, 3), 3: (1, 4), 8: (2, 3), 9: (1, 3), 10: (0, 1),
    11: (0, 5), 12: (0, 1), 13: (0, 1), 14: (0, 3), 15: (0, 4), 16: (0, 2), 18: (0, 2),
    19: (2, 3), 20: (1, 3), 21: (0, 1), 22: (0, 1), 32: (1, 2), 33: (0, 1), 44: (0, 0),
}  # fmt: skip


def test_advertised_set() -> None:
    """The minimal set's lower bounds (old librdkafka checks for exact versions, spec 1.4 item 1)
    with the admin APIs raised to what Kafka 4.4's tools use, and admin APIs more."""
    assert ADVERTISED == {
        0: (0, 8), 1: (4, 11), 2: (1, 11), 3: (1, 13), 8: (2, 3), 9: (1, 3), 10: (0, 1),
        11: (0, 5), 12: (0, 1), 13: (0, 1), 14: (0, 3), 15: (0, 6), 16: (0, 5), 18: (0, 2),
        19: (2, 7), 20: (1, 6), 21: (0, 2), 22: (0, 1), 29: (0, 3), 30: (0, 3), 31: (0, 3),
        32: (1, 4), 33: (0, 2), 35: (1, 5),
        37: (0, 3), 42: (0, 2), 43: (0, 2), 44: (0, 1), 45: (0, 1), 46: (0, 0), 47: (0, 0),
        60: (0, 2), 61: (0, 0), 75: (0, 0), 17: (0, 1), 36: (0, 2), 50: (0, 0), 51: (0, 0),
        48: (0, 1),
    }  # fmt: skip
    for key, (lo, hi) in SPEC_MINIMAL_SET.items():
        assert ADVERTISED[key][0] == lo, key
        assert ADVERTISED[key][1] >= hi, key


#: The APIs whose versions stay where the weakest client stops (spec 1.5): produce, fetch, the
#: group protocol, ApiVersions and InitProducerId.
DATA_AND_GROUP_APIS = (0, 1, 8, 9, 10, 11, 12, 13, 14, 18, 22)


def test_no_data_or_group_api_is_flexible() -> None:
    """The produce, fetch and group APIs need no flexible version (spec 1.5); only the admin
    APIs go as far as Kafka 4.4's tools (ApiVersions 3-4 is compiled but outside SUPPORTED)."""
    for key in DATA_AND_GROUP_APIS:
        lo, hi = SUPPORTED[key]
        for v in range(lo, hi + 1):
            assert not REQUESTS[key].is_flexible(v), (key, v)
