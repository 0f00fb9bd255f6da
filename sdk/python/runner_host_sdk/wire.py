"""Conversions between protobuf messages and plain JSON (snake_case names, like the protocol).

google.protobuf.Struct / Value become dicts and JSON values (integral numbers come back as int);
an unset message field or an unset ``optional`` scalar is ``None``; int64 is int.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from google.protobuf import struct_pb2
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message as ProtoMessage

Json = Any
JsonObject = dict[str, Any]


def from_value(value: struct_pb2.Value) -> Json:
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return from_struct(value.struct_value)
    if kind == "list_value":
        return [from_value(v) for v in value.list_value.values]
    if kind == "number_value":
        n = value.number_value
        return int(n) if math.isfinite(n) and n.is_integer() and abs(n) < 2**53 else n
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    return None


def from_struct(struct: struct_pb2.Struct) -> JsonObject:
    return {k: from_value(v) for k, v in struct.fields.items()}


def to_value(value: Json, out: struct_pb2.Value | None = None) -> struct_pb2.Value:
    out = out if out is not None else struct_pb2.Value()
    if value is None:
        out.null_value = struct_pb2.NULL_VALUE
    elif isinstance(value, bool):
        out.bool_value = value
    elif isinstance(value, (int, float)):
        out.number_value = float(value)
    elif isinstance(value, str):
        out.string_value = value
    elif isinstance(value, Mapping):
        out.struct_value.SetInParent()  # an empty object is {}, not unset
        to_struct(value, out.struct_value)
    elif isinstance(value, (list, tuple)):
        out.list_value.SetInParent()
        for item in value:
            to_value(item, out.list_value.values.add())
    else:
        raise TypeError(f"not a JSON value: {type(value).__name__}")
    return out


def to_struct(obj: Mapping[str, Json], out: struct_pb2.Struct | None = None) -> struct_pb2.Struct:
    out = out if out is not None else struct_pb2.Struct()
    for key, value in obj.items():
        to_value(value, out.fields[key])
    return out


def message_to_dict(message: ProtoMessage) -> JsonObject:
    """A protobuf message as plain JSON: every field present, unset messages/optionals as None."""
    out: JsonObject = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if field.label == FieldDescriptor.LABEL_REPEATED:
            out[field.name] = [_field_value(field, v) for v in value]
        elif field.message_type is not None or field.has_presence:
            out[field.name] = _field_value(field, value) if message.HasField(field.name) else None
        else:
            out[field.name] = _field_value(field, value)
    return out


def _field_value(field: FieldDescriptor, value: Any) -> Any:
    if field.message_type is None:
        return value
    name = field.message_type.full_name
    if name == "google.protobuf.Struct":
        return from_struct(value)
    if name == "google.protobuf.Value":
        return from_value(value)
    return message_to_dict(value)


def dict_to_message(cls: type[ProtoMessage], data: Mapping[str, Any]) -> ProtoMessage:
    """A protobuf message from plain JSON; None values are left unset; unknown keys raise."""
    message = cls()
    _fill(message, data)
    return message


def _fill(message: ProtoMessage, data: Mapping[str, Any]) -> None:
    fields = message.DESCRIPTOR.fields_by_name
    for key, value in data.items():
        if value is None:
            continue
        field = fields.get(key)
        if field is None:
            raise ValueError(f"{key}: not a field of {message.DESCRIPTOR.name}")
        target = getattr(message, key)
        if field.message_type is None:
            if field.label == FieldDescriptor.LABEL_REPEATED:
                target.extend(value)
            else:
                setattr(message, key, value)
            continue
        name = field.message_type.full_name
        if field.label == FieldDescriptor.LABEL_REPEATED:
            for item in value:
                _set_message(target.add(), name, item)
        else:
            _set_message(target, name, value)
            target.SetInParent()


def _set_message(target: ProtoMessage, name: str, value: Any) -> None:
    if name == "google.protobuf.Struct":
        to_struct(value, target)  # type: ignore[arg-type]
    elif name == "google.protobuf.Value":
        to_value(value, target)  # type: ignore[arg-type]
    else:
        _fill(target, value)
