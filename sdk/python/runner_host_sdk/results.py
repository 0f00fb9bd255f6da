"""Results of runs: per-run sequencing and the terminal rule (RunResults), and batching of the
results of every run into frames (Outbox).

Invariants (tests/test_results.py checks them on random programs): a run's results carry
sequence 1, 2, 3, ... in emission order; exactly one terminal result, nothing after it; results
emitted in the same event-loop iteration leave in one frame, in emission order, never more than
``max_batch`` per frame. See docs/runner-sdk.md.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable, Optional, Union

from .types import Message, RunResult, TERMINAL_RESULT_TYPES

FrameWriter = Callable[[list[RunResult]], Awaitable[None]]
DEFAULT_MAX_BATCH = 256


def _done_future() -> "asyncio.Future[None]":
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.set_result(None)
    return future


class Outbox:
    """Collects the results pushed in one loop iteration and writes them as frames of at most
    ``max_batch``, one frame after another."""

    def __init__(self, write: FrameWriter, max_batch: int = DEFAULT_MAX_BATCH) -> None:
        if not isinstance(max_batch, int) or max_batch < 1:
            raise ValueError(f"max_batch: must be an integer >= 1 (got {max_batch!r})")
        self._write = write
        self._max_batch = max_batch
        self._pending: list[RunResult] = []
        self._flushed: Optional[asyncio.Future[None]] = None
        self._chain: Optional[asyncio.Future[Any]] = None

    def push(self, result: RunResult) -> "asyncio.Future[None]":
        """Queues one result; the future resolves once the frame holding it has been written."""
        self._pending.append(result)
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
        results, self._pending = self._pending, []
        flushed, self._flushed = self._flushed, None
        frames = [results[i : i + self._max_batch] for i in range(0, len(results), self._max_batch)]
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
        self._sequence += 1
        result: RunResult = {
            "run_id": self.run_id,
            "type": type,
            "data": data,
            "sequence": self._sequence,
            "timestamp": _now(),
        }
        if usage:
            result["usage"] = usage
        return self._outbox.push(result)
