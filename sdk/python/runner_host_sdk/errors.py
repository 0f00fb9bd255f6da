"""Typed errors: the host API's protocol error codes as exception classes (see docs/protocol.md)."""

from __future__ import annotations

import json
from typing import Any, Literal, Optional, Sequence, Tuple

import grpc

HostErrorCode = Literal[
    "unauthenticated",
    "unauthorized",
    "not_found",
    "invalid_argument",
    "conflict",
    "payload_too_large",
    "rate_limited",
    "deadline_exceeded",
    "unavailable",
    "runtime_error",
]

CLASS_OF: dict[str, type["HostApiError"]] = {}
GRPC_STATUS_OF: dict[str, grpc.StatusCode] = {}
_retryable: set[str] = set()


class HostApiError(Exception):
    """A host API call the host refused or could not serve.

    ``code`` is the host's ``x-error-code``, ``retryable`` its ``x-error-retryable``, ``details``
    its ``x-error-details`` (e.g. ``{"reason": "context_length_exceeded"}``), ``method`` the RPC
    (e.g. ``CallTool``) and ``grpc_status`` the gRPC status code. One subclass per code, each
    defined by one line below: ``class XError(HostApiError, code=..., status=..., retryable=...)``
    registers its code, its gRPC status and whether it is retryable unless the host says otherwise
    (the tables CLASS_OF, GRPC_STATUS_OF, RETRYABLE_BY_DEFAULT and HOST_ERROR_CODES derive from them).
    """

    def __init_subclass__(
        cls, *, code: Optional[str] = None, status: grpc.StatusCode = grpc.StatusCode.UNKNOWN, retryable: bool = False, **kwargs: Any
    ) -> None:
        super().__init_subclass__(**kwargs)
        if code is None:
            return  # an author's own subclass registers no code
        if code in CLASS_OF:
            raise TypeError(f"code: {code!r} already has {CLASS_OF[code].__name__}")
        CLASS_OF[code] = cls
        GRPC_STATUS_OF[code] = status
        if retryable:
            _retryable.add(code)

    def __init__(
        self,
        code: str,
        message: str,
        retryable: bool = False,
        details: Optional[dict[str, Any]] = None,
        method: str = "",
        grpc_status: Optional[grpc.StatusCode] = None,
    ) -> None:
        super().__init__(f"{method}: {code}: {message}" if method else f"{code}: {message}")
        self.code = code
        self.reason = message
        self.retryable = retryable
        self.details: dict[str, Any] = details or {}
        self.method = method
        self.grpc_status = grpc_status or GRPC_STATUS_OF.get(code, grpc.StatusCode.UNKNOWN)


_S = grpc.StatusCode

# The host's error codes (docs/protocol.md), one class each: the public names are the SDK's API.
# fmt: off
class UnauthenticatedError(HostApiError, code="unauthenticated", status=_S.UNAUTHENTICATED): ...
class UnauthorizedError(HostApiError, code="unauthorized", status=_S.PERMISSION_DENIED): ...
class NotFoundError(HostApiError, code="not_found", status=_S.NOT_FOUND): ...
class InvalidArgumentError(HostApiError, code="invalid_argument", status=_S.INVALID_ARGUMENT): ...
class ConflictError(HostApiError, code="conflict", status=_S.FAILED_PRECONDITION): ...
class PayloadTooLargeError(HostApiError, code="payload_too_large", status=_S.RESOURCE_EXHAUSTED): ...
class RateLimitedError(HostApiError, code="rate_limited", status=_S.RESOURCE_EXHAUSTED, retryable=True): ...
class DeadlineExceededError(HostApiError, code="deadline_exceeded", status=_S.DEADLINE_EXCEEDED, retryable=True): ...
class UnavailableError(HostApiError, code="unavailable", status=_S.UNAVAILABLE, retryable=True): ...
class HostRuntimeError(HostApiError, code="runtime_error", status=_S.INTERNAL): ...
# fmt: on


HOST_ERROR_CODES: Tuple[str, ...] = tuple(CLASS_OF)
RETRYABLE_BY_DEFAULT = frozenset(_retryable)

# Without an x-error-code trailer (a proxy, a transport failure): the code from the gRPC status.
CODE_OF_STATUS: dict[grpc.StatusCode, str] = {
    grpc.StatusCode.UNAUTHENTICATED: "unauthenticated",
    grpc.StatusCode.PERMISSION_DENIED: "unauthorized",
    grpc.StatusCode.NOT_FOUND: "not_found",
    grpc.StatusCode.INVALID_ARGUMENT: "invalid_argument",
    grpc.StatusCode.FAILED_PRECONDITION: "conflict",
    grpc.StatusCode.RESOURCE_EXHAUSTED: "rate_limited",
    grpc.StatusCode.DEADLINE_EXCEEDED: "deadline_exceeded",
    grpc.StatusCode.UNAVAILABLE: "unavailable",
    grpc.StatusCode.CANCELLED: "unavailable",
}


def host_api_error(
    code: str,
    message: str,
    *,
    retryable: Optional[bool] = None,
    details: Optional[dict[str, Any]] = None,
    method: str = "",
) -> HostApiError:
    """The typed error of one code (what the fake host raises, and what tests may raise)."""
    if code not in CLASS_OF:
        raise ValueError(f"code: unknown host error code {code!r}")
    cls = CLASS_OF[code]
    return cls(code, message, RETRYABLE_BY_DEFAULT.__contains__(code) if retryable is None else retryable, details, method)


def host_api_error_from_grpc(
    method: str,
    status: grpc.StatusCode,
    message: str,
    trailing: Optional[Sequence[Tuple[str, Any]]] = None,
) -> HostApiError:
    """The typed error of a failed gRPC call to the host API (reads the ``x-error-*`` trailers)."""
    meta: dict[str, str] = {}
    for key, value in trailing or ():
        meta.setdefault(key, value.decode() if isinstance(value, bytes) else str(value))
    given = meta.get("x-error-code")
    code = given if given in CLASS_OF else CODE_OF_STATUS.get(status, "runtime_error")
    retryable_text = meta.get("x-error-retryable")
    retryable = code in RETRYABLE_BY_DEFAULT if retryable_text is None else retryable_text == "true"
    details: dict[str, Any] = {}
    if meta.get("x-error-details"):
        try:
            parsed = json.loads(meta["x-error-details"])
            details = parsed if isinstance(parsed, dict) else {"raw": meta["x-error-details"]}
        except ValueError:
            details = {"raw": meta["x-error-details"]}
    return CLASS_OF[code](code, message or status.name, retryable, details, method, status)


AbortKind = Literal["cancelled", "deadline", "disconnected", "stopped"]


class RunAbortedError(Exception):
    """Why a run was aborted; what host API calls raise once it was. ``kind``: cancelled, deadline,
    disconnected or stopped."""

    def __init__(self, kind: AbortKind, message: str) -> None:
        super().__init__(message)
        self.kind: AbortKind = kind


class PluginRefusedError(Exception):
    """The host refused the plugin (token, identity): reconnecting would not help."""

    def __init__(self, grpc_status: grpc.StatusCode, details: str) -> None:
        super().__init__(f"the host refused this plugin: {grpc_status.name}: {details}")
        self.grpc_status = grpc_status
        self.details = details
