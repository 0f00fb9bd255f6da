from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ActorContext(_message.Message):
    __slots__ = ["actor_id", "actor_name", "actor_type", "metadata"]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    ACTOR_NAME_FIELD_NUMBER: _ClassVar[int]
    ACTOR_TYPE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    actor_name: str
    actor_type: str
    metadata: _struct_pb2.Struct
    def __init__(self, actor_type: _Optional[str] = ..., actor_id: _Optional[str] = ..., actor_name: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class AvailableApis(_message.Message):
    __slots__ = ["event_get", "event_page", "history_page", "history_search", "prompt_get", "run_get", "state", "steering_pull", "storage"]
    EVENT_GET_FIELD_NUMBER: _ClassVar[int]
    EVENT_PAGE_FIELD_NUMBER: _ClassVar[int]
    HISTORY_PAGE_FIELD_NUMBER: _ClassVar[int]
    HISTORY_SEARCH_FIELD_NUMBER: _ClassVar[int]
    PROMPT_GET_FIELD_NUMBER: _ClassVar[int]
    RUN_GET_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STEERING_PULL_FIELD_NUMBER: _ClassVar[int]
    STORAGE_FIELD_NUMBER: _ClassVar[int]
    event_get: bool
    event_page: bool
    history_page: bool
    history_search: bool
    prompt_get: bool
    run_get: bool
    state: bool
    steering_pull: bool
    storage: bool
    def __init__(self, prompt_get: bool = ..., history_page: bool = ..., history_search: bool = ..., event_get: bool = ..., event_page: bool = ..., state: bool = ..., storage: bool = ..., steering_pull: bool = ..., run_get: bool = ...) -> None: ...

class ContentElement(_message.Message):
    __slots__ = ["file_base64", "file_name", "file_url", "image_base64", "image_url", "text", "type"]
    FILE_BASE64_FIELD_NUMBER: _ClassVar[int]
    FILE_NAME_FIELD_NUMBER: _ClassVar[int]
    FILE_URL_FIELD_NUMBER: _ClassVar[int]
    IMAGE_BASE64_FIELD_NUMBER: _ClassVar[int]
    IMAGE_URL_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    file_base64: str
    file_name: str
    file_url: str
    image_base64: str
    image_url: ImageUrl
    text: str
    type: str
    def __init__(self, type: _Optional[str] = ..., text: _Optional[str] = ..., image_url: _Optional[_Union[ImageUrl, _Mapping]] = ..., image_base64: _Optional[str] = ..., file_url: _Optional[str] = ..., file_base64: _Optional[str] = ..., file_name: _Optional[str] = ...) -> None: ...

class ContextAccess(_message.Message):
    __slots__ = ["available_apis", "conversation_id", "event_seq", "has_history_before", "inline_policy", "latest_cursor", "thread_id", "transcript_seq"]
    AVAILABLE_APIS_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_SEQ_FIELD_NUMBER: _ClassVar[int]
    HAS_HISTORY_BEFORE_FIELD_NUMBER: _ClassVar[int]
    INLINE_POLICY_FIELD_NUMBER: _ClassVar[int]
    LATEST_CURSOR_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSCRIPT_SEQ_FIELD_NUMBER: _ClassVar[int]
    available_apis: AvailableApis
    conversation_id: str
    event_seq: int
    has_history_before: bool
    inline_policy: InlineContextPolicy
    latest_cursor: str
    thread_id: str
    transcript_seq: int
    def __init__(self, conversation_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., latest_cursor: _Optional[str] = ..., event_seq: _Optional[int] = ..., transcript_seq: _Optional[int] = ..., has_history_before: bool = ..., inline_policy: _Optional[_Union[InlineContextPolicy, _Mapping]] = ..., available_apis: _Optional[_Union[AvailableApis, _Mapping]] = ...) -> None: ...

class ConversationContext(_message.Message):
    __slots__ = ["bot_id", "conversation_id", "launcher_id", "launcher_type", "sender_id", "session_id", "thread_id", "workspace_id"]
    BOT_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    LAUNCHER_ID_FIELD_NUMBER: _ClassVar[int]
    LAUNCHER_TYPE_FIELD_NUMBER: _ClassVar[int]
    SENDER_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    bot_id: str
    conversation_id: str
    launcher_id: str
    launcher_type: str
    sender_id: str
    session_id: str
    thread_id: str
    workspace_id: str
    def __init__(self, conversation_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., launcher_type: _Optional[str] = ..., launcher_id: _Optional[str] = ..., sender_id: _Optional[str] = ..., bot_id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class DeliveryContext(_message.Message):
    __slots__ = ["max_message_size", "platform_capabilities", "reply_target", "supports_edit", "supports_reaction", "supports_streaming", "surface"]
    MAX_MESSAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    REPLY_TARGET_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_EDIT_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_REACTION_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_STREAMING_FIELD_NUMBER: _ClassVar[int]
    SURFACE_FIELD_NUMBER: _ClassVar[int]
    max_message_size: int
    platform_capabilities: _struct_pb2.Struct
    reply_target: _struct_pb2.Struct
    supports_edit: bool
    supports_reaction: bool
    supports_streaming: bool
    surface: str
    def __init__(self, surface: _Optional[str] = ..., reply_target: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., supports_streaming: bool = ..., supports_edit: bool = ..., supports_reaction: bool = ..., max_message_size: _Optional[int] = ..., platform_capabilities: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class EventContext(_message.Message):
    __slots__ = ["data", "event_id", "event_time", "event_type", "raw_ref", "source", "source_event_type"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    RAW_REF_FIELD_NUMBER: _ClassVar[int]
    SOURCE_EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    data: _struct_pb2.Struct
    event_id: str
    event_time: int
    event_type: str
    raw_ref: RawEventRef
    source: str
    source_event_type: str
    def __init__(self, event_id: _Optional[str] = ..., event_type: _Optional[str] = ..., event_time: _Optional[int] = ..., source: _Optional[str] = ..., source_event_type: _Optional[str] = ..., raw_ref: _Optional[_Union[RawEventRef, _Mapping]] = ..., data: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ImageUrl(_message.Message):
    __slots__ = ["url"]
    URL_FIELD_NUMBER: _ClassVar[int]
    url: str
    def __init__(self, url: _Optional[str] = ...) -> None: ...

class InlineContextPolicy(_message.Message):
    __slots__ = ["delivered_count", "messages_complete", "mode", "reason", "source_total_count"]
    DELIVERED_COUNT_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_COMPLETE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SOURCE_TOTAL_COUNT_FIELD_NUMBER: _ClassVar[int]
    delivered_count: int
    messages_complete: bool
    mode: str
    reason: str
    source_total_count: int
    def __init__(self, mode: _Optional[str] = ..., delivered_count: _Optional[int] = ..., source_total_count: _Optional[int] = ..., messages_complete: bool = ..., reason: _Optional[str] = ...) -> None: ...

class Input(_message.Message):
    __slots__ = ["attachments", "contents", "interaction", "text"]
    ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    CONTENTS_FIELD_NUMBER: _ClassVar[int]
    INTERACTION_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    attachments: _containers.RepeatedCompositeFieldContainer[InputAttachment]
    contents: _containers.RepeatedCompositeFieldContainer[ContentElement]
    interaction: _struct_pb2.Struct
    text: str
    def __init__(self, text: _Optional[str] = ..., contents: _Optional[_Iterable[_Union[ContentElement, _Mapping]]] = ..., attachments: _Optional[_Iterable[_Union[InputAttachment, _Mapping]]] = ..., interaction: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class InputAttachment(_message.Message):
    __slots__ = ["content", "id", "mime_type", "name", "path", "size", "source", "type", "url"]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    content: str
    id: str
    mime_type: str
    name: str
    path: str
    size: int
    source: str
    type: str
    url: str
    def __init__(self, type: _Optional[str] = ..., mime_type: _Optional[str] = ..., size: _Optional[int] = ..., name: _Optional[str] = ..., source: _Optional[str] = ..., url: _Optional[str] = ..., path: _Optional[str] = ..., content: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class KnowledgeBaseResource(_message.Message):
    __slots__ = ["kb_id", "kb_name", "kb_type", "operations"]
    KB_ID_FIELD_NUMBER: _ClassVar[int]
    KB_NAME_FIELD_NUMBER: _ClassVar[int]
    KB_TYPE_FIELD_NUMBER: _ClassVar[int]
    OPERATIONS_FIELD_NUMBER: _ClassVar[int]
    kb_id: str
    kb_name: str
    kb_type: str
    operations: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, kb_id: _Optional[str] = ..., kb_name: _Optional[str] = ..., kb_type: _Optional[str] = ..., operations: _Optional[_Iterable[str]] = ...) -> None: ...

class ModelResource(_message.Message):
    __slots__ = ["model_id", "model_type", "operations", "provider"]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_TYPE_FIELD_NUMBER: _ClassVar[int]
    OPERATIONS_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    model_type: str
    operations: _containers.RepeatedScalarFieldContainer[str]
    provider: str
    def __init__(self, model_id: _Optional[str] = ..., model_type: _Optional[str] = ..., provider: _Optional[str] = ..., operations: _Optional[_Iterable[str]] = ...) -> None: ...

class RawEventRef(_message.Message):
    __slots__ = ["ref_id", "storage_key"]
    REF_ID_FIELD_NUMBER: _ClassVar[int]
    STORAGE_KEY_FIELD_NUMBER: _ClassVar[int]
    ref_id: str
    storage_key: str
    def __init__(self, ref_id: _Optional[str] = ..., storage_key: _Optional[str] = ...) -> None: ...

class Resources(_message.Message):
    __slots__ = ["knowledge_bases", "models", "platform_capabilities", "storage", "tools"]
    KNOWLEDGE_BASES_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    STORAGE_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    knowledge_bases: _containers.RepeatedCompositeFieldContainer[KnowledgeBaseResource]
    models: _containers.RepeatedCompositeFieldContainer[ModelResource]
    platform_capabilities: _struct_pb2.Struct
    storage: StorageResource
    tools: _containers.RepeatedCompositeFieldContainer[ToolResource]
    def __init__(self, models: _Optional[_Iterable[_Union[ModelResource, _Mapping]]] = ..., tools: _Optional[_Iterable[_Union[ToolResource, _Mapping]]] = ..., knowledge_bases: _Optional[_Iterable[_Union[KnowledgeBaseResource, _Mapping]]] = ..., storage: _Optional[_Union[StorageResource, _Mapping]] = ..., platform_capabilities: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class RunContext(_message.Message):
    __slots__ = ["actor", "config", "context", "conversation", "delivery", "event", "input", "metadata", "resources", "run_id", "runtime", "state", "subject", "trigger"]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    actor: ActorContext
    config: _struct_pb2.Struct
    context: ContextAccess
    conversation: ConversationContext
    delivery: DeliveryContext
    event: EventContext
    input: Input
    metadata: _struct_pb2.Struct
    resources: Resources
    run_id: str
    runtime: RuntimeContext
    state: RunState
    subject: SubjectContext
    trigger: Trigger
    def __init__(self, run_id: _Optional[str] = ..., trigger: _Optional[_Union[Trigger, _Mapping]] = ..., event: _Optional[_Union[EventContext, _Mapping]] = ..., conversation: _Optional[_Union[ConversationContext, _Mapping]] = ..., actor: _Optional[_Union[ActorContext, _Mapping]] = ..., subject: _Optional[_Union[SubjectContext, _Mapping]] = ..., input: _Optional[_Union[Input, _Mapping]] = ..., delivery: _Optional[_Union[DeliveryContext, _Mapping]] = ..., resources: _Optional[_Union[Resources, _Mapping]] = ..., context: _Optional[_Union[ContextAccess, _Mapping]] = ..., state: _Optional[_Union[RunState, _Mapping]] = ..., runtime: _Optional[_Union[RuntimeContext, _Mapping]] = ..., config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class RunState(_message.Message):
    __slots__ = ["actor", "conversation", "runner", "subject"]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    RUNNER_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    actor: _struct_pb2.Struct
    conversation: _struct_pb2.Struct
    runner: _struct_pb2.Struct
    subject: _struct_pb2.Struct
    def __init__(self, conversation: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., actor: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., subject: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., runner: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class RuntimeContext(_message.Message):
    __slots__ = ["deadline_at", "host", "locale", "metadata", "protocol_version", "timezone", "trace_id"]
    DEADLINE_AT_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    LOCALE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    TIMEZONE_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    deadline_at: float
    host: str
    locale: str
    metadata: _struct_pb2.Struct
    protocol_version: str
    timezone: str
    trace_id: str
    def __init__(self, host: _Optional[str] = ..., protocol_version: _Optional[str] = ..., trace_id: _Optional[str] = ..., deadline_at: _Optional[float] = ..., locale: _Optional[str] = ..., timezone: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class StorageResource(_message.Message):
    __slots__ = ["binding_storage", "plugin_storage", "workspace_storage"]
    BINDING_STORAGE_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_STORAGE_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_STORAGE_FIELD_NUMBER: _ClassVar[int]
    binding_storage: bool
    plugin_storage: bool
    workspace_storage: bool
    def __init__(self, plugin_storage: bool = ..., workspace_storage: bool = ..., binding_storage: bool = ...) -> None: ...

class SubjectContext(_message.Message):
    __slots__ = ["data", "subject_id", "subject_type"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_TYPE_FIELD_NUMBER: _ClassVar[int]
    data: _struct_pb2.Struct
    subject_id: str
    subject_type: str
    def __init__(self, subject_type: _Optional[str] = ..., subject_id: _Optional[str] = ..., data: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ToolResource(_message.Message):
    __slots__ = ["annotations", "description", "operations", "output_schema", "parameters", "source", "source_id", "title", "tool_name", "tool_type"]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    OPERATIONS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    annotations: _struct_pb2.Struct
    description: str
    operations: _containers.RepeatedScalarFieldContainer[str]
    output_schema: _struct_pb2.Struct
    parameters: _struct_pb2.Struct
    source: str
    source_id: str
    title: str
    tool_name: str
    tool_type: str
    def __init__(self, tool_name: _Optional[str] = ..., tool_type: _Optional[str] = ..., description: _Optional[str] = ..., operations: _Optional[_Iterable[str]] = ..., parameters: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., source: _Optional[str] = ..., source_id: _Optional[str] = ..., title: _Optional[str] = ..., annotations: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., output_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class Trigger(_message.Message):
    __slots__ = ["source", "timestamp", "type"]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    source: str
    timestamp: int
    type: str
    def __init__(self, type: _Optional[str] = ..., source: _Optional[str] = ..., timestamp: _Optional[int] = ...) -> None: ...
