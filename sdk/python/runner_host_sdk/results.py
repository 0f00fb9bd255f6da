"""Results of runs: per-run sequencing and the terminal rule (RunResults), and batching of the
results of every run into frames (Outbox).

Invariants (tests/test_results.py checks them on random programs): a run's results carry
sequence 1, 2, 3, ... in emission order; exactly one terminal result, nothing after it; results
emitted in the same event-loop iteration leave in one frame, in emission order, never more than
``max_batch`` results and never more than ``max_frame_bytes`` bytes of protobuf per frame (the
host's gRPC server refuses a larger message, which breaks the stream). A result that cannot fit a
frame alone is never sent: its run fails ``runner.result_too_large`` instead. See
docs/runner-sdk.md.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any, Awaitable, Callable, Optional, Union

from .types import Message, RunResult, TERMINAL_RESULT_TYPES

FrameWriter = Callable[[list[RunResult]], Awaitable[None]]
DEFAULT_MAX_BATCH = 256
#: Bytes of protobuf per frame at most: well below the host's gRPC receive limit (the larger of
#: HOSTAPI_MAX_PAYLOAD_BYTES and STORAGE_MAX_VALUE_BYTES plus 1 MiB, 11 MiB by default) and far
#: above one result the host keeps (MAX_RESULT_BYTES, 1 MiB of JSON by default).
DEFAULT_MAX_FRAME_BYTES = 4 * 1024 * 1024
#: The smallest ``max_frame_bytes``: room for the run.failed that replaces a result too large.
MIN_MAX_FRAME_BYTES = 4096
#: A frame's own bytes around its results: the PluginMessage field tag and its length varint.
FRAME_OVERHEAD_BYTES = 6
#: The error code of a run whose result could not fit one frame (the runner's own failure).
RESULT_TOO_LARGE = "runner.result_too_large"


def _varint_bytes(n: int) -> int:
    if n < 0:
        return 10  # a negative int64 is always ten bytes
    bytes_ = 1
    while n >= 128:
        n >>= 7
        bytes_ += 1
    return bytes_


def _delimited(length: int) -> int:
    """A length-delimited field (tag < 16: one byte) holding ``length`` bytes."""
    return 1 + _varint_bytes(length) + length


def _utf8(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _value_bytes(value: Any) -> int:
    if isinstance(value, bool):
        return 2
    if isinstance(value, (int, float)):
        return 9  # double: tag + 8 bytes
    if isinstance(value, str):
        return _delimited(_utf8(value))
    if isinstance(value, Mapping):
        return _delimited(_struct_bytes(value))
    if isinstance(value, (list, tuple)):
        return _delimited(sum(_delimited(_value_bytes(item)) for item in value))
    return 2  # None (and what to_value refuses: the write reports it)


def _struct_bytes(obj: Mapping[str, Any]) -> int:
    return sum(_delimited(_delimited(_utf8(str(k))) + _delimited(_value_bytes(v))) for k, v in obj.items())


def result_wire_bytes(result: RunResult) -> int:
    """The bytes one result takes in a frame (tag and length included), as protobuf encodes it
    from what wire.to_struct produces: exact, or a little above (never below)."""
    size = _delimited(_utf8(result["run_id"])) + _delimited(_utf8(result["type"])) + _delimited(_struct_bytes(result["data"]))
    if result.get("usage"):
        size += _delimited(_struct_bytes(result["usage"]))
    if "sequence" in result:
        size += 1 + _varint_bytes(result["sequence"])
    if "timestamp" in result:
        size += 1 + _varint_bytes(result["timestamp"])
    return _delimited(size)


def _done_future() -> "asyncio.Future[None]":
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.set_result(None)
    return future


class Outbox:
    """Collects the results pushed in one loop iteration and writes them as frames of at most
    ``max_batch`` results and ``max_frame_bytes`` bytes, one frame after another. A result larger
    than a frame alone (RunResults never pushes one) leaves in a frame of its own."""

    def __init__(
        self, write: FrameWriter, max_batch: int = DEFAULT_MAX_BATCH, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    ) -> None:
        if not isinstance(max_batch, int) or max_batch < 1:
            raise ValueError(f"max_batch: must be an integer >= 1 (got {max_batch!r})")
        if not isinstance(max_frame_bytes, int) or max_frame_bytes < MIN_MAX_FRAME_BYTES:
            raise ValueError(f"max_frame_bytes: must be an integer >= {MIN_MAX_FRAME_BYTES} (got {max_frame_bytes!r})")
        self._write = write
        self._max_batch = max_batch
        self.max_frame_bytes = max_frame_bytes
        self._pending: list[tuple[RunResult, int]] = []
        self._flushed: Optional[asyncio.Future[None]] = None
        self._chain: Optional[asyncio.Future[Any]] = None

    def push(self, result: RunResult, size: Optional[int] = None) -> "asyncio.Future[None]":
        """Queues one result (``size``: its result_wire_bytes, when the caller measured it); the
        future resolves once the frame holding it has been written."""
        self._pending.append((result, result_wire_bytes(result) if size is None else size))
        if self._flushed is None:
            loop = asyncio.get_running_loop()
            self._flushed = loop.create_future()
            loop.call_soon(self._flush)
        return self._flushed

    async def idle(self) -> None:
        """Returns when everything pushed so far has been written."""
        while self._flushed is not None or (self._chain is not None and not self._chain.done()):
            if self._flushed is not None:
                await self._flushed
            elif self._chain is not None:
                await asyncio.shield(self._chain)

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        flushed, self._flushed = self._flushed, None
        budget = self.max_frame_bytes - FRAME_OVERHEAD_BYTES
        frames: list[list[RunResult]] = []
        frame: list[RunResult] = []
        frame_bytes = 0
        for result, size in pending:
            if frame and (len(frame) == self._max_batch or frame_bytes + size > budget):
                frames.append(frame)
                frame, frame_bytes = [], 0
            frame.append(result)
            frame_bytes += size
        if frame:
            frames.append(frame)
        previous = self._chain

        async def write_in_order() -> None:
            if previous is not None:
                await asyncio.wait([previous])
            try:
                for frame in frames:
                    await self._write(frame)
            finally:
                if flushed is not None and not flushed.done():
                    flushed.set_result(None)

        self._chain = asyncio.ensure_future(write_in_order())


def _now() -> int:
    return int(time.time())


def _as_message(message: Union[Message, str]) -> Message:
    return {"role": "assistant", "content": message} if isinstance(message, str) else message


class RunResults:
    """The result emitters of one run. Every emitter returns a future that resolves once the
    result is written (await it for backpressure, or don't); none ever fails. Once the run has
    ended (terminal result sent) or its connection is gone, emitters do nothing."""

    def __init__(self, run_id: str, outbox: Outbox) -> None:
        self.run_id = run_id
        self._outbox = outbox
        self._sequence = 0
        self._ended = False
        self._closed = False
        self._streamed = ""
        self._chunk_index = 0

    @property
    def finished(self) -> bool:
        """True once a terminal result was sent."""
        return self._ended

    def delta(self, piece: Union[str, dict[str, Any]]) -> "asyncio.Future[None]":
        """``message.delta``. A string is a piece of assistant text ('' sends nothing), numbered by
        ``msg_sequence``; the whole text goes out once, in the message that closes the stream."""
        if not isinstance(piece, str):
            return self.emit("message.delta", {"chunk": piece})
        if piece == "":
            return _done_future()
        self._streamed += piece
        self._chunk_index += 1
        return self.emit(
            "message.delta",
            {"chunk": {"role": "assistant", "content": piece, "msg_sequence": self._chunk_index}},
        )

    def message(self, message: Union[Message, str], usage: Optional[dict[str, Any]] = None) -> "asyncio.Future[None]":
        """``message.completed``: one whole message (a string is an assistant message)."""
        self._streamed = ""
        self._chunk_index = 0
        return self.emit("message.completed", {"message": _as_message(message)}, usage)

    def tool_call_started(self, id: str, name: str, parameters: Optional[dict[str, Any]] = None) -> "asyncio.Future[None]":
        return self.emit("tool.call.started", {"tool_call_id": id, "tool_name": name, "parameters": parameters or {}})

    def tool_call_completed(
        self, id: str, name: str, result: Optional[dict[str, Any]] = None, error: Optional[str] = None
    ) -> "asyncio.Future[None]":
        return self.emit(
            "tool.call.completed", {"tool_call_id": id, "tool_name": name, "result": result, "error": error}
        )

    def state(self, scope: str, key: str, value: Any) -> "asyncio.Future[None]":
        """``state.updated``: the host persists ``value`` under ``scope``/``key``."""
        return self.emit("state.updated", {"scope": scope, "key": key, "value": value})

    def completed(
        self,
        *,
        finish_reason: str = "stop",
        message: Union[Message, str, None] = None,
        usage: Optional[dict[str, Any]] = None,
    ) -> "asyncio.Future[None]":
        """``run.completed`` (terminal). Streamed text not closed by message() is sent first."""
        if self._ended or self._closed:
            return _done_future()
        if self._streamed:
            self.message(self._streamed)
        data: dict[str, Any] = {"finish_reason": finish_reason}
        if message is not None:
            data["message"] = _as_message(message)
        return self._terminal("run.completed", data, usage)

    def failed(
        self,
        error: Union[str, BaseException],
        *,
        code: str = "runner.error",
        retryable: bool = False,
        usage: Optional[dict[str, Any]] = None,
    ) -> "asyncio.Future[None]":
        """``run.failed`` (terminal)."""
        text = error if isinstance(error, str) else (str(error) or type(error).__name__)
        return self._terminal("run.failed", {"error": text, "code": code, "retryable": retryable}, usage)

    def emit(self, type: str, data: dict[str, Any], usage: Optional[dict[str, Any]] = None) -> "asyncio.Future[None]":
        """Any non-terminal result type (unknown types pass through the host)."""
        if type in TERMINAL_RESULT_TYPES:
            raise ValueError(f"type: {type} is terminal: use completed() or failed()")
        return self._write(type, data, usage)

    def close(self) -> None:
        """No more results may be sent (the connection is gone)."""
        self._closed = True

    def _terminal(self, type: str, data: dict[str, Any], usage: Optional[dict[str, Any]]) -> "asyncio.Future[None]":
        if self._ended or self._closed:
            return _done_future()
        written = self._write(type, data, usage)
        self._ended = True
        return written

    def _write(self, type: str, data: dict[str, Any], usage: Optional[dict[str, Any]]) -> "asyncio.Future[None]":
        if self._ended or self._closed:
            return _done_future()
        result: RunResult = {
            "run_id": self.run_id,
            "type": type,
            "data": data,
            "sequence": self._sequence + 1,
            "timestamp": _now(),
        }
        if usage:
            result["usage"] = usage
        size = result_wire_bytes(result)
        if size + FRAME_OVERHEAD_BYTES > self._outbox.max_frame_bytes:
            return self._too_large(type, size)
        self._sequence += 1
        return self._outbox.push(result, size)

    def _too_large(self, type: str, size: int) -> "asyncio.Future[None]":
        """A result that cannot fit one gRPC frame would break the plugin's stream (and every run
        on it): it is not sent, and the run fails ``runner.result_too_large`` (not retryable) with
        the next sequence number."""
        self._sequence += 1
        shown = type if len(type) <= 100 else f"{type[:100]}…"
        result: RunResult = {
            "run_id": self.run_id,
            "type": "run.failed",
            "data": {
                "error": f"a {shown} result of {size} bytes does not fit one gRPC frame "
                f"(max_frame_bytes {self._outbox.max_frame_bytes}); it was not sent",
                "code": RESULT_TOO_LARGE,
                "retryable": False,
            },
            "sequence": self._sequence,
            "timestamp": _now(),
        }
        self._ended = True
        return self._outbox.push(result)
