"""The typed host errors: one class per host error code (the table the classes register), the
code and retryability read from the x-error-* trailers, the gRPC status as the fallback."""

import os
import sys
import typing
import unittest

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import runner_host_sdk  # noqa: E402
from runner_host_sdk import errors  # noqa: E402
from runner_host_sdk.errors import (  # noqa: E402
    CLASS_OF,
    GRPC_STATUS_OF,
    HOST_ERROR_CODES,
    RETRYABLE_BY_DEFAULT,
    HostApiError,
    RateLimitedError,
    UnauthorizedError,
    UnavailableError,
    host_api_error,
    host_api_error_from_grpc,
)


class ErrorTableTest(unittest.TestCase):
    def test_every_code_has_one_public_class_status_and_retryability(self):
        self.assertEqual(HOST_ERROR_CODES, typing.get_args(errors.HostErrorCode))
        self.assertEqual(set(CLASS_OF), set(GRPC_STATUS_OF))
        self.assertEqual(len(set(CLASS_OF.values())), len(HOST_ERROR_CODES))
        for code, cls in CLASS_OF.items():
            self.assertTrue(issubclass(cls, HostApiError))
            self.assertIs(getattr(runner_host_sdk, cls.__name__), cls)  # exported under its public name
            err = host_api_error(code, "m")
            self.assertIs(type(err), cls)
            self.assertEqual((err.code, err.grpc_status), (code, GRPC_STATUS_OF[code]))
        self.assertEqual(RETRYABLE_BY_DEFAULT, {"rate_limited", "deadline_exceeded", "unavailable"})
        self.assertEqual(GRPC_STATUS_OF["unauthorized"], grpc.StatusCode.PERMISSION_DENIED)

    def test_host_api_error_names_the_code_and_the_method(self):
        err = host_api_error("unauthorized", "tool t is not granted", method="CallTool")
        self.assertIsInstance(err, UnauthorizedError)
        self.assertEqual(str(err), "CallTool: unauthorized: tool t is not granted")
        self.assertFalse(err.retryable)
        self.assertTrue(host_api_error("unavailable", "x").retryable)
        self.assertFalse(host_api_error("unavailable", "x", retryable=False).retryable)
        with self.assertRaisesRegex(ValueError, "^code: unknown host error code 'nope'"):
            host_api_error("nope", "x")

    def test_from_grpc_reads_the_trailers_and_falls_back_to_the_status(self):
        trailing = (
            ("x-error-code", b"rate_limited"),
            ("x-error-retryable", "false"),
            ("x-error-details", '{"quota": "max_model_tokens_per_day"}'),
        )
        err = host_api_error_from_grpc("InvokeModel", grpc.StatusCode.RESOURCE_EXHAUSTED, "quota", trailing)
        self.assertIsInstance(err, RateLimitedError)
        self.assertFalse(err.retryable)
        self.assertEqual(err.details, {"quota": "max_model_tokens_per_day"})
        self.assertEqual((err.method, err.grpc_status), ("InvokeModel", grpc.StatusCode.RESOURCE_EXHAUSTED))
        bare = host_api_error_from_grpc("CallTool", grpc.StatusCode.UNAVAILABLE, "")
        self.assertIsInstance(bare, UnavailableError)
        self.assertTrue(bare.retryable)
        self.assertEqual(bare.reason, "UNAVAILABLE")
        unknown = host_api_error_from_grpc("CallTool", grpc.StatusCode.DATA_LOSS, "?", (("x-error-details", "not json"),))
        self.assertEqual((unknown.code, unknown.details), ("runtime_error", {"raw": "not json"}))

    def test_an_authors_own_subclass_registers_nothing(self):
        class MyError(HostApiError):
            pass

        self.assertNotIn(MyError, CLASS_OF.values())
        with self.assertRaisesRegex(TypeError, "already has UnauthorizedError"):

            class Twice(HostApiError, code="unauthorized", status=grpc.StatusCode.PERMISSION_DENIED):
                pass


if __name__ == "__main__":
    unittest.main()
