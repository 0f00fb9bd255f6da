from google.protobuf import struct_pb2 as _struct_pb2
from runner_host_sdk._proto.runnerhost.v1 import context_pb2 as _context_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AcceptedRunner(_message.Message):
    __slots__ = ["name", "runner_id"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    RUNNER_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    runner_id: str
    def __init__(self, runner_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class CancelRun(_message.Message):
    __slots__ = ["reason", "run_id"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    reason: str
    run_id: str
    def __init__(self, run_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ["active_run_ids"]
    ACTIVE_RUN_IDS_FIELD_NUMBER: _ClassVar[int]
    active_run_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, active_run_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ["manifests", "plugin_author", "plugin_name", "plugin_version", "protocol_version"]
    MANIFESTS_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_AUTHOR_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_NAME_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_VERSION_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    manifests: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    plugin_author: str
    plugin_name: str
    plugin_version: str
    protocol_version: str
    def __init__(self, plugin_author: _Optional[str] = ..., plugin_name: _Optional[str] = ..., plugin_version: _Optional[str] = ..., protocol_version: _Optional[str] = ..., manifests: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ...) -> None: ...

class HostMessage(_message.Message):
    __slots__ = ["cancel", "ping", "run", "welcome"]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    PING_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    cancel: CancelRun
    ping: Ping
    run: RunRequest
    welcome: Welcome
    def __init__(self, welcome: _Optional[_Union[Welcome, _Mapping]] = ..., run: _Optional[_Union[RunRequest, _Mapping]] = ..., cancel: _Optional[_Union[CancelRun, _Mapping]] = ..., ping: _Optional[_Union[Ping, _Mapping]] = ...) -> None: ...

class Ping(_message.Message):
    __slots__ = ["nonce"]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    nonce: int
    def __init__(self, nonce: _Optional[int] = ...) -> None: ...

class PluginMessage(_message.Message):
    __slots__ = ["heartbeat", "hello", "pong", "result", "results"]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    HELLO_FIELD_NUMBER: _ClassVar[int]
    PONG_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    heartbeat: Heartbeat
    hello: Hello
    pong: Pong
    result: RunResult
    results: ResultBatch
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., result: _Optional[_Union[RunResult, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., pong: _Optional[_Union[Pong, _Mapping]] = ..., results: _Optional[_Union[ResultBatch, _Mapping]] = ...) -> None: ...

class Pong(_message.Message):
    __slots__ = ["nonce"]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    nonce: int
    def __init__(self, nonce: _Optional[int] = ...) -> None: ...

class RejectedManifest(_message.Message):
    __slots__ = ["index", "name", "reason"]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    index: int
    name: str
    reason: str
    def __init__(self, index: _Optional[int] = ..., name: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ResultBatch(_message.Message):
    __slots__ = ["results"]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[RunResult]
    def __init__(self, results: _Optional[_Iterable[_Union[RunResult, _Mapping]]] = ...) -> None: ...

class RunRequest(_message.Message):
    __slots__ = ["context", "runner_id", "runner_name", "traceparent"]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    RUNNER_ID_FIELD_NUMBER: _ClassVar[int]
    RUNNER_NAME_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    context: _context_pb2.RunContext
    runner_id: str
    runner_name: str
    traceparent: str
    def __init__(self, runner_id: _Optional[str] = ..., runner_name: _Optional[str] = ..., context: _Optional[_Union[_context_pb2.RunContext, _Mapping]] = ..., traceparent: _Optional[str] = ...) -> None: ...

class RunResult(_message.Message):
    __slots__ = ["data", "run_id", "sequence", "timestamp", "type", "usage"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    data: _struct_pb2.Struct
    run_id: str
    sequence: int
    timestamp: int
    type: str
    usage: _struct_pb2.Struct
    def __init__(self, run_id: _Optional[str] = ..., type: _Optional[str] = ..., data: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., usage: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., sequence: _Optional[int] = ..., timestamp: _Optional[int] = ...) -> None: ...

class Welcome(_message.Message):
    __slots__ = ["heartbeat_interval_ms", "host_version", "protocol_version", "rejected", "runners", "session_id"]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    HOST_VERSION_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    RUNNERS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    heartbeat_interval_ms: int
    host_version: str
    protocol_version: str
    rejected: _containers.RepeatedCompositeFieldContainer[RejectedManifest]
    runners: _containers.RepeatedCompositeFieldContainer[AcceptedRunner]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., host_version: _Optional[str] = ..., protocol_version: _Optional[str] = ..., runners: _Optional[_Iterable[_Union[AcceptedRunner, _Mapping]]] = ..., rejected: _Optional[_Iterable[_Union[RejectedManifest, _Mapping]]] = ..., heartbeat_interval_ms: _Optional[int] = ...) -> None: ...
