"""kio glue: decode a request frame into its header and body, encode a response frame, build versioned messages.

Every Kafka message is a kio dataclass generated from Kafka's own JSON schemas; nothing here knows
a message's layout. The handlers describe a response once, as plain values with Kafka's field
names for the newest version; `build` keeps the fields the negotiated version has.
"""

from __future__ import annotations

import datetime
import io
import struct
from dataclasses import fields, is_dataclass
from typing import Any, Mapping, get_args

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

# The frame's own header: int32 size, then the request header starts with int16 api key, int16 version, int32 id.
_PREFIX = struct.Struct(">hhi")


class MalformedRequest(ValueError):
    """The bytes of a frame are not a request of the API and version its header names."""


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """(api key, api version, correlation id) of a request frame; MalformedRequest if it is shorter than that."""
    if len(frame) < _PREFIX.size:
        raise MalformedRequest(f"a request frame of {len(frame)} bytes has no header")
    return _PREFIX.unpack_from(frame, 0)


def request_class(api_key: int, version: int) -> type:
    """kio's request dataclass of an API version (KeyError-like kio errors for unknown ones)."""
    return load_request_schema(api_key, version)


def response_class(api_key: int, version: int) -> type:
    """kio's response dataclass of an API version."""
    return load_response_schema(api_key, version)


def decode_request(frame: bytes, api_key: int, version: int) -> tuple[Any, Any]:
    """(header, body) of a request frame of a known API version; MalformedRequest for bytes that do not parse."""
    cls = request_class(api_key, version)
    try:
        header, used = entity_reader(cls.__header_schema__)(frame, 0)
        body, size = entity_reader(cls)(frame, used)
    except Exception as e:  # kio raises its own errors, and ValueError/UnicodeDecodeError for bad values
        raise MalformedRequest(f"{cls.__name__} v{version}: {type(e).__name__}: {e}") from None
    if used + size != len(frame):
        raise MalformedRequest(f"{cls.__name__} v{version}: {len(frame) - used - size} bytes left after the body")
    return header, body


def encode_response(correlation_id: int, response: Any) -> bytes:
    """A whole response frame (size, response header, body) for a kio response dataclass."""
    header_cls = response.__header_schema__
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    entity_writer(header_cls)(buffer, header_cls(correlation_id=correlation_id))
    entity_writer(type(response))(buffer, response)
    data = buffer.getbuffer()
    struct.pack_into(">i", data, 0, len(data) - 4)
    return bytes(data)


def _entity_type(annotation: Any) -> type | None:
    """The kio dataclass a field holds (alone, optional, or as a tuple of them), or None for a primitive."""
    if is_dataclass(annotation):
        return annotation  # type: ignore[return-value]
    for arg in get_args(annotation):
        if is_dataclass(arg):
            return arg  # type: ignore[return-value]
        for inner in get_args(arg):
            if is_dataclass(inner):
                return inner  # type: ignore[return-value]
    return None


def _convert(field: Any, value: Any) -> Any:
    if value is None:
        return None
    kafka_type = field.metadata.get("kafka_type")
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=int(value))
    if kafka_type == "error_code":
        return ErrorCode(int(value))
    entity = _entity_type(field.type)
    if entity is None:
        return tuple(value) if isinstance(value, (list, tuple)) else value
    if isinstance(value, Mapping):
        return build(entity, value)
    return tuple(build(entity, item) for item in value)


def build(cls: type, values: Mapping[str, Any]) -> Any:
    """An instance of kio dataclass `cls` from plain values: fields the version lacks are dropped, nested
    entities are given as mappings (or lists of them), times in milliseconds and errors as ints."""
    kwargs = {f.name: _convert(f, values[f.name]) for f in fields(cls) if f.name in values}
    return cls(**kwargs)


def millis(value: Any) -> int:
    """Milliseconds of a kio duration field (a timedelta) or of a plain int."""
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)
