"""Runner Host SDK for Python: write Runner Protocol v1 runner plugins (see sdk/python/README.md)."""

from .errors import (
    ConflictError,
    DeadlineExceededError,
    HostApiError,
    HostRuntimeError,
    InvalidArgumentError,
    NotFoundError,
    PayloadTooLargeError,
    PluginRefusedError,
    RateLimitedError,
    RunAbortedError,
    UnauthenticatedError,
    UnauthorizedError,
    UnavailableError,
    host_api_error,
)
from .host_api import ModelStream, RunHostApi
from .plugin import Reconnect, RunnerPlugin, backoff_delay, options_from_env, serve
from .runner import Runner, RunIO, manifest_of, runner
from .types import Message, RunContext, Turn, Welcome, message_text

__all__ = [
    "ConflictError",
    "DeadlineExceededError",
    "HostApiError",
    "HostRuntimeError",
    "InvalidArgumentError",
    "Message",
    "ModelStream",
    "NotFoundError",
    "PayloadTooLargeError",
    "PluginRefusedError",
    "RateLimitedError",
    "Reconnect",
    "RunAbortedError",
    "RunContext",
    "RunHostApi",
    "RunIO",
    "Runner",
    "RunnerPlugin",
    "Turn",
    "UnauthenticatedError",
    "UnauthorizedError",
    "UnavailableError",
    "Welcome",
    "backoff_delay",
    "host_api_error",
    "manifest_of",
    "message_text",
    "options_from_env",
    "runner",
    "serve",
]
