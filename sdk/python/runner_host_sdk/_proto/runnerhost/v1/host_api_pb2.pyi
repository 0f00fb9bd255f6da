from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CallToolRequest(_message.Message):
    __slots__ = ["parameters", "run_id", "tool_name"]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    parameters: _struct_pb2.Struct
    run_id: str
    tool_name: str
    def __init__(self, run_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., parameters: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class CallToolResponse(_message.Message):
    __slots__ = ["result"]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: _struct_pb2.Struct
    def __init__(self, result: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class CountTokensRequest(_message.Message):
    __slots__ = ["messages", "model_id", "run_id", "tools"]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    model_id: str
    run_id: str
    tools: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    def __init__(self, run_id: _Optional[str] = ..., model_id: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., tools: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ...) -> None: ...

class CountTokensResponse(_message.Message):
    __slots__ = ["tokens"]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    tokens: int
    def __init__(self, tokens: _Optional[int] = ...) -> None: ...

class EventGetRequest(_message.Message):
    __slots__ = ["event_id", "run_id"]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    run_id: str
    def __init__(self, run_id: _Optional[str] = ..., event_id: _Optional[str] = ...) -> None: ...

class EventGetResponse(_message.Message):
    __slots__ = ["event"]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: _struct_pb2.Struct
    def __init__(self, event: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class EventPageRequest(_message.Message):
    __slots__ = ["before_cursor", "conversation_id", "event_types", "limit", "run_id"]
    BEFORE_CURSOR_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPES_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    before_cursor: str
    conversation_id: str
    event_types: _containers.RepeatedScalarFieldContainer[str]
    limit: int
    run_id: str
    def __init__(self, run_id: _Optional[str] = ..., conversation_id: _Optional[str] = ..., event_types: _Optional[_Iterable[str]] = ..., before_cursor: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class EventPageResponse(_message.Message):
    __slots__ = ["has_more", "items", "next_cursor"]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    has_more: bool
    items: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    next_cursor: str
    def __init__(self, items: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., next_cursor: _Optional[str] = ..., has_more: bool = ...) -> None: ...

class GetToolDetailRequest(_message.Message):
    __slots__ = ["run_id", "tool_name"]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    tool_name: str
    def __init__(self, run_id: _Optional[str] = ..., tool_name: _Optional[str] = ...) -> None: ...

class GetToolDetailResponse(_message.Message):
    __slots__ = ["tool"]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    tool: _struct_pb2.Struct
    def __init__(self, tool: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class HistoryPageRequest(_message.Message):
    __slots__ = ["after_cursor", "before_cursor", "conversation_id", "direction", "include_attachments", "limit", "run_id"]
    AFTER_CURSOR_FIELD_NUMBER: _ClassVar[int]
    BEFORE_CURSOR_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    after_cursor: str
    before_cursor: str
    conversation_id: str
    direction: str
    include_attachments: bool
    limit: int
    run_id: str
    def __init__(self, run_id: _Optional[str] = ..., conversation_id: _Optional[str] = ..., before_cursor: _Optional[str] = ..., after_cursor: _Optional[str] = ..., limit: _Optional[int] = ..., direction: _Optional[str] = ..., include_attachments: bool = ...) -> None: ...

class HistoryPageResponse(_message.Message):
    __slots__ = ["has_more", "items", "next_cursor", "prev_cursor"]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    PREV_CURSOR_FIELD_NUMBER: _ClassVar[int]
    has_more: bool
    items: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    next_cursor: str
    prev_cursor: str
    def __init__(self, items: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., next_cursor: _Optional[str] = ..., prev_cursor: _Optional[str] = ..., has_more: bool = ...) -> None: ...

class HistorySearchRequest(_message.Message):
    __slots__ = ["filters", "query", "run_id", "top_k"]
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    filters: _struct_pb2.Struct
    query: str
    run_id: str
    top_k: int
    def __init__(self, run_id: _Optional[str] = ..., query: _Optional[str] = ..., filters: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., top_k: _Optional[int] = ...) -> None: ...

class HistorySearchResponse(_message.Message):
    __slots__ = ["items", "query", "total_count"]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COUNT_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    query: str
    total_count: int
    def __init__(self, items: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., total_count: _Optional[int] = ..., query: _Optional[str] = ...) -> None: ...

class InvokeModelRequest(_message.Message):
    __slots__ = ["extra_args", "messages", "model_id", "remove_think", "run_id", "timeout_ms", "tools"]
    EXTRA_ARGS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    REMOVE_THINK_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    extra_args: _struct_pb2.Struct
    messages: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    model_id: str
    remove_think: bool
    run_id: str
    timeout_ms: int
    tools: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    def __init__(self, run_id: _Optional[str] = ..., model_id: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., tools: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., extra_args: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., remove_think: bool = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class InvokeModelResponse(_message.Message):
    __slots__ = ["message", "usage"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    message: _struct_pb2.Struct
    usage: _struct_pb2.Struct
    def __init__(self, message: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., usage: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class PromptGetRequest(_message.Message):
    __slots__ = ["run_id"]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class PromptGetResponse(_message.Message):
    __slots__ = ["prompt"]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    prompt: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    def __init__(self, prompt: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ...) -> None: ...

class RerankItem(_message.Message):
    __slots__ = ["index", "relevance_score"]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_SCORE_FIELD_NUMBER: _ClassVar[int]
    index: int
    relevance_score: float
    def __init__(self, index: _Optional[int] = ..., relevance_score: _Optional[float] = ...) -> None: ...

class RerankRequest(_message.Message):
    __slots__ = ["documents", "extra_args", "model_id", "query", "run_id", "top_k"]
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    EXTRA_ARGS_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedScalarFieldContainer[str]
    extra_args: _struct_pb2.Struct
    model_id: str
    query: str
    run_id: str
    top_k: int
    def __init__(self, run_id: _Optional[str] = ..., model_id: _Optional[str] = ..., query: _Optional[str] = ..., documents: _Optional[_Iterable[str]] = ..., top_k: _Optional[int] = ..., extra_args: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class RerankResponse(_message.Message):
    __slots__ = ["results"]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[RerankItem]
    def __init__(self, results: _Optional[_Iterable[_Union[RerankItem, _Mapping]]] = ...) -> None: ...

class RetrieveKnowledgeRequest(_message.Message):
    __slots__ = ["filters", "kb_id", "query_text", "run_id", "top_k"]
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    KB_ID_FIELD_NUMBER: _ClassVar[int]
    QUERY_TEXT_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    filters: _struct_pb2.Struct
    kb_id: str
    query_text: str
    run_id: str
    top_k: int
    def __init__(self, run_id: _Optional[str] = ..., kb_id: _Optional[str] = ..., query_text: _Optional[str] = ..., top_k: _Optional[int] = ..., filters: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class RetrieveKnowledgeResponse(_message.Message):
    __slots__ = ["results"]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    def __init__(self, results: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ...) -> None: ...

class RunGetRequest(_message.Message):
    __slots__ = ["run_id"]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class RunGetResponse(_message.Message):
    __slots__ = ["cancel_requested", "deadline_at", "run_id", "started_at", "status", "status_reason"]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_AT_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STATUS_REASON_FIELD_NUMBER: _ClassVar[int]
    cancel_requested: bool
    deadline_at: float
    run_id: str
    started_at: float
    status: str
    status_reason: str
    def __init__(self, run_id: _Optional[str] = ..., status: _Optional[str] = ..., status_reason: _Optional[str] = ..., cancel_requested: bool = ..., deadline_at: _Optional[float] = ..., started_at: _Optional[float] = ...) -> None: ...

class StateDeleteRequest(_message.Message):
    __slots__ = ["key", "run_id", "scope"]
    KEY_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    key: str
    run_id: str
    scope: str
    def __init__(self, run_id: _Optional[str] = ..., scope: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class StateDeleteResponse(_message.Message):
    __slots__ = ["success"]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    success: bool
    def __init__(self, success: bool = ...) -> None: ...

class StateGetRequest(_message.Message):
    __slots__ = ["key", "run_id", "scope"]
    KEY_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    key: str
    run_id: str
    scope: str
    def __init__(self, run_id: _Optional[str] = ..., scope: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class StateGetResponse(_message.Message):
    __slots__ = ["value"]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    value: _struct_pb2.Value
    def __init__(self, value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class StateListRequest(_message.Message):
    __slots__ = ["limit", "prefix", "run_id", "scope"]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    limit: int
    prefix: str
    run_id: str
    scope: str
    def __init__(self, run_id: _Optional[str] = ..., scope: _Optional[str] = ..., prefix: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class StateListResponse(_message.Message):
    __slots__ = ["has_more", "keys"]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    has_more: bool
    keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, keys: _Optional[_Iterable[str]] = ..., has_more: bool = ...) -> None: ...

class StateSetRequest(_message.Message):
    __slots__ = ["key", "run_id", "scope", "value"]
    KEY_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    run_id: str
    scope: str
    value: _struct_pb2.Value
    def __init__(self, run_id: _Optional[str] = ..., scope: _Optional[str] = ..., key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class StateSetResponse(_message.Message):
    __slots__ = ["success"]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    success: bool
    def __init__(self, success: bool = ...) -> None: ...

class SteeringPullRequest(_message.Message):
    __slots__ = ["limit", "mode", "run_id", "wait_ms"]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    limit: int
    mode: str
    run_id: str
    wait_ms: int
    def __init__(self, run_id: _Optional[str] = ..., mode: _Optional[str] = ..., limit: _Optional[int] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class SteeringPullResponse(_message.Message):
    __slots__ = ["items"]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    def __init__(self, items: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ...) -> None: ...

class StorageDeleteRequest(_message.Message):
    __slots__ = ["area", "key", "run_id"]
    AREA_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    area: str
    key: str
    run_id: str
    def __init__(self, run_id: _Optional[str] = ..., area: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class StorageDeleteResponse(_message.Message):
    __slots__ = ["success"]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    success: bool
    def __init__(self, success: bool = ...) -> None: ...

class StorageGetRequest(_message.Message):
    __slots__ = ["area", "key", "run_id"]
    AREA_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    area: str
    key: str
    run_id: str
    def __init__(self, run_id: _Optional[str] = ..., area: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class StorageGetResponse(_message.Message):
    __slots__ = ["value"]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    value: bytes
    def __init__(self, value: _Optional[bytes] = ...) -> None: ...

class StorageListRequest(_message.Message):
    __slots__ = ["area", "limit", "prefix", "run_id"]
    AREA_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    area: str
    limit: int
    prefix: str
    run_id: str
    def __init__(self, run_id: _Optional[str] = ..., area: _Optional[str] = ..., prefix: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class StorageListResponse(_message.Message):
    __slots__ = ["has_more", "keys"]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    has_more: bool
    keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, keys: _Optional[_Iterable[str]] = ..., has_more: bool = ...) -> None: ...

class StorageSetRequest(_message.Message):
    __slots__ = ["area", "key", "run_id", "value"]
    AREA_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    area: str
    key: str
    run_id: str
    value: bytes
    def __init__(self, run_id: _Optional[str] = ..., area: _Optional[str] = ..., key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...

class StorageSetResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class StreamModelChunk(_message.Message):
    __slots__ = ["chunk", "usage"]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    chunk: _struct_pb2.Struct
    usage: _struct_pb2.Struct
    def __init__(self, chunk: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., usage: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...
