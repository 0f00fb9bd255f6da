"""The host API of one run (HostApiService, see docs/protocol.md), typed errors included.

Every call carries the run's id, the plugin token and the run's ``traceparent`` (the W3C trace
context of its RunRequest, as gRPC metadata, so that the host's spans of the call join the run's
trace), ends at the run's deadline and is abandoned when the run is aborted (it then raises the
run's RunAbortedError). The SDK checks nothing
locally: a call the run was not granted is the host's UnauthorizedError.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Optional, Protocol, Sequence, Union

import grpc

from ._proto.runnerhost.v1 import host_api_pb2, host_api_pb2_grpc
from .errors import HostApiError, RunAbortedError, host_api_error_from_grpc
from .types import JsonObject, Message, MessageChunk, message_text
from .wire import dict_to_message, message_to_dict

UNARY_METHODS = tuple(
    m.name for m in host_api_pb2.DESCRIPTOR.services_by_name["HostApiService"].methods if m.name != "StreamModel"
)


class HostApiTransport(Protocol):
    """Carries host API calls as plain JSON; raises HostApiError. ``traceparent``: the run's W3C
    trace context, sent as ``traceparent`` metadata (None: the run has none)."""

    async def unary(self, method: str, request: JsonObject, timeout: Optional[float], traceparent: Optional[str] = None) -> JsonObject: ...

    def stream_model(self, request: JsonObject, timeout: Optional[float], traceparent: Optional[str] = None) -> AsyncIterator[JsonObject]: ...


def _request_class(method: str) -> Any:
    service = host_api_pb2.DESCRIPTOR.services_by_name["HostApiService"]
    return getattr(host_api_pb2, service.methods_by_name[method].input_type.name)


class GrpcHostApiTransport:
    """The host API over a grpc.aio channel, the plugin token (and the run's traceparent) in the metadata."""

    def __init__(self, channel: grpc.aio.Channel, token: str) -> None:
        self._stub = host_api_pb2_grpc.HostApiServiceStub(channel)
        self._metadata = (("authorization", f"Bearer {token}"),)

    def metadata(self, traceparent: Optional[str] = None) -> tuple[tuple[str, str], ...]:
        """The call's metadata: the plugin token, and the run's traceparent when it has one."""
        return self._metadata + ((("traceparent", traceparent),) if traceparent else ())

    async def unary(self, method: str, request: JsonObject, timeout: Optional[float], traceparent: Optional[str] = None) -> JsonObject:
        if method not in UNARY_METHODS:
            raise ValueError(f"method: HostApiService has no unary RPC {method!r}")
        message = dict_to_message(_request_class(method), request)
        try:
            response = await getattr(self._stub, method)(message, metadata=self.metadata(traceparent), timeout=timeout)
        except grpc.aio.AioRpcError as e:
            raise host_api_error_from_grpc(method, e.code(), e.details() or "", e.trailing_metadata()) from None
        return message_to_dict(response)

    async def stream_model(self, request: JsonObject, timeout: Optional[float], traceparent: Optional[str] = None) -> AsyncIterator[JsonObject]:
        call = self._stub.StreamModel(
            dict_to_message(host_api_pb2.InvokeModelRequest, request), metadata=self.metadata(traceparent), timeout=timeout
        )
        try:
            async for item in call:
                yield message_to_dict(item)
        except grpc.aio.AioRpcError as e:
            raise host_api_error_from_grpc("StreamModel", e.code(), e.details() or "", e.trailing_metadata()) from None
        finally:
            call.cancel()


class ModelStream:
    """A streamed model answer: ``async for chunk in stream``; ``text`` and ``usage`` once done."""

    def __init__(self, items: AsyncIterator[JsonObject], guard: Callable[[Awaitable[Any]], Awaitable[Any]]) -> None:
        self._items = items
        self._guard = guard
        self.text = ""
        self.usage: Optional[JsonObject] = None

    def __aiter__(self) -> AsyncIterator[MessageChunk]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[MessageChunk]:
        try:
            while True:
                try:
                    item = await self._guard(self._items.__anext__())
                except StopAsyncIteration:
                    return
                if item.get("usage"):
                    self.usage = item["usage"]
                chunk = item.get("chunk")
                if chunk:
                    self.text += message_text(chunk)
                    yield chunk  # type: ignore[misc]
        finally:
            await self._items.aclose()  # type: ignore[attr-defined]

    async def collect(self) -> str:
        """Consumes the stream; returns the whole text."""
        async for _ in self:
            pass
        return self.text


def _messages(messages: Union[Sequence[Message], str]) -> list[Message]:
    return [{"role": "user", "content": messages}] if isinstance(messages, str) else list(messages)


def _model_args(tools: Optional[list[JsonObject]], extra_args: Optional[JsonObject], remove_think: Optional[bool], timeout_ms: Optional[int]) -> JsonObject:
    return {"tools": tools, "extra_args": extra_args, "remove_think": remove_think, "timeout_ms": timeout_ms}


class _Group:
    def __init__(self, api: "RunHostApi") -> None:
        self._api = api


class Models(_Group):
    async def invoke(
        self,
        model_id: str,
        messages: Union[Sequence[Message], str],
        *,
        tools: Optional[list[JsonObject]] = None,
        extra_args: Optional[JsonObject] = None,
        remove_think: Optional[bool] = None,
        timeout_ms: Optional[int] = None,
    ) -> JsonObject:
        """InvokeModel: ``{"message": ..., "usage": ...}``. A string is one user message."""
        r = await self._api.call(
            "InvokeModel",
            {"model_id": model_id, "messages": _messages(messages), **_model_args(tools, extra_args, remove_think, timeout_ms)},
        )
        return {"message": r.get("message") or {"role": "assistant", "content": ""}, "usage": r.get("usage")}

    def stream(
        self,
        model_id: str,
        messages: Union[Sequence[Message], str],
        *,
        tools: Optional[list[JsonObject]] = None,
        extra_args: Optional[JsonObject] = None,
        remove_think: Optional[bool] = None,
        timeout_ms: Optional[int] = None,
    ) -> ModelStream:
        """StreamModel: iterate the chunks."""
        request = {
            "run_id": self._api.run_id,
            "model_id": model_id,
            "messages": _messages(messages),
            **_model_args(tools, extra_args, remove_think, timeout_ms),
        }
        api = self._api
        return ModelStream(api._transport.stream_model(request, api._timeout(), api.traceparent), api._guard)

    async def count_tokens(self, model_id: str, messages: Union[Sequence[Message], str], tools: Optional[list[JsonObject]] = None) -> int:
        r = await self._api.call("CountTokens", {"model_id": model_id, "messages": _messages(messages), "tools": tools})
        return int(r["tokens"])

    async def rerank(self, model_id: str, query: str, documents: list[str], top_k: Optional[int] = None) -> list[JsonObject]:
        r = await self._api.call("Rerank", {"model_id": model_id, "query": query, "documents": documents, "top_k": top_k})
        return list(r["results"])


class Tools(_Group):
    async def detail(self, name: str) -> Optional[JsonObject]:
        return (await self._api.call("GetToolDetail", {"tool_name": name})).get("tool")

    async def call(self, name: str, parameters: Optional[JsonObject] = None) -> JsonObject:
        r = await self._api.call("CallTool", {"tool_name": name, "parameters": parameters or {}})
        return r.get("result") or {}


class Knowledge(_Group):
    async def retrieve(self, kb_id: str, query: str, *, top_k: Optional[int] = None, filters: Optional[JsonObject] = None) -> list[JsonObject]:
        r = await self._api.call("RetrieveKnowledge", {"kb_id": kb_id, "query_text": query, "top_k": top_k, "filters": filters})
        return list(r["results"])


class History(_Group):
    async def page(self, **options: Any) -> JsonObject:
        """HistoryPage: conversation_id, before_cursor, after_cursor, limit, direction, include_attachments."""
        return await self._api.call("HistoryPage", options)

    async def search(self, query: str, *, filters: Optional[JsonObject] = None, top_k: Optional[int] = None) -> JsonObject:
        return await self._api.call("HistorySearch", {"query": query, "filters": filters, "top_k": top_k})


class Events(_Group):
    async def get(self, event_id: str) -> Optional[JsonObject]:
        return (await self._api.call("EventGet", {"event_id": event_id})).get("event")

    async def page(self, **options: Any) -> JsonObject:
        """EventPage: conversation_id, event_types, before_cursor, limit."""
        return await self._api.call("EventPage", options)


class State(_Group):
    async def get(self, scope: str, key: str) -> Any:
        """The value, or None when the key is absent."""
        return (await self._api.call("StateGet", {"scope": scope, "key": key})).get("value")

    async def set(self, scope: str, key: str, value: Any) -> None:
        await self._api.call("StateSet", {"scope": scope, "key": key, "value": value})

    async def delete(self, scope: str, key: str) -> bool:
        return bool((await self._api.call("StateDelete", {"scope": scope, "key": key}))["success"])

    async def list(self, scope: str, *, prefix: Optional[str] = None, limit: Optional[int] = None) -> JsonObject:
        return await self._api.call("StateList", {"scope": scope, "prefix": prefix, "limit": limit})


class Storage(_Group):
    async def get(self, area: str, key: str) -> Optional[bytes]:
        """The bytes, or None when the key is absent (the host answers not_found)."""
        try:
            return bytes((await self._api.call("StorageGet", {"area": area, "key": key}))["value"])
        except HostApiError as e:
            if e.code == "not_found":
                return None
            raise

    async def set(self, area: str, key: str, value: Union[bytes, str]) -> None:
        data = value.encode() if isinstance(value, str) else value
        await self._api.call("StorageSet", {"area": area, "key": key, "value": data})

    async def delete(self, area: str, key: str) -> bool:
        return bool((await self._api.call("StorageDelete", {"area": area, "key": key}))["success"])

    async def list(self, area: str, *, prefix: Optional[str] = None, limit: Optional[int] = None) -> JsonObject:
        return await self._api.call("StorageList", {"area": area, "prefix": prefix, "limit": limit})


class Prompt(_Group):
    async def get(self) -> list[Message]:
        return list((await self._api.call("PromptGet", {}))["prompt"])


class Steering(_Group):
    async def pull(self, *, mode: Optional[str] = None, limit: Optional[int] = None, wait_ms: Optional[int] = None) -> list[JsonObject]:
        """The follow-ups steered into this run since the last pull (RunIO.turns() is the loop)."""
        return list((await self._api.call("SteeringPull", {"mode": mode, "limit": limit, "wait_ms": wait_ms}))["items"])


class Run(_Group):
    async def get(self) -> JsonObject:
        return await self._api.call("RunGet", {})


class RunHostApi:
    """The host API bound to one run: ``models``, ``tools``, ``knowledge``, ``history``, ``events``,
    ``state``, ``storage``, ``prompt``, ``steering``, ``run``, and ``call(method, request)``."""

    def __init__(
        self,
        transport: HostApiTransport,
        run_id: str,
        aborted: asyncio.Event,
        abort_reason: Callable[[], BaseException],
        deadline: Optional[float] = None,
        traceparent: Optional[str] = None,
    ) -> None:
        self._transport = transport
        self.run_id = run_id
        #: The run's W3C trace context (RunRequest.traceparent), sent with each of its calls.
        self.traceparent = traceparent or None
        self._aborted = aborted
        self._abort_reason = abort_reason
        self._deadline = deadline
        self.models = Models(self)
        self.tools = Tools(self)
        self.knowledge = Knowledge(self)
        self.history = History(self)
        self.events = Events(self)
        self.state = State(self)
        self.storage = Storage(self)
        self.prompt = Prompt(self)
        self.steering = Steering(self)
        self.run = Run(self)

    async def call(self, method: str, request: JsonObject) -> JsonObject:
        """Any unary RPC of HostApiService by name, with this run's id."""
        full = {k: v for k, v in request.items() if v is not None}
        full["run_id"] = self.run_id
        return await self._guard(self._transport.unary(method, full, self._timeout(), self.traceparent))

    def _timeout(self) -> Optional[float]:
        return None if self._deadline is None else max(0.001, self._deadline - time.time())

    async def _guard(self, awaitable: Awaitable[Any]) -> Any:
        """Awaits a call unless the run is aborted first (then the call is cancelled)."""
        if self._aborted.is_set():
            if asyncio.iscoroutine(awaitable):
                awaitable.close()
            raise self._abort_reason()
        call = asyncio.ensure_future(awaitable)
        waiter = asyncio.ensure_future(self._aborted.wait())
        try:
            await asyncio.wait({call, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            if not call.done():
                call.cancel()
        if call.done() and not call.cancelled():
            return call.result()
        raise self._abort_reason()


def abort_reason_of(reason: Optional[BaseException]) -> BaseException:
    return reason if reason is not None else RunAbortedError("stopped", "the run was aborted")
