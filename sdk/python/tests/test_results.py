"""Property tests of sequencing and batching (random programs, fixed seeds), backoff and the wire."""

import asyncio
import os
import random
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from runner_host_sdk import Reconnect, backoff_delay  # noqa: E402
from runner_host_sdk._proto.runnerhost.v1 import context_pb2, host_api_pb2  # noqa: E402
from runner_host_sdk._proto.runnerhost.v1 import gateway_pb2  # noqa: E402
from runner_host_sdk.plugin import _result_message  # noqa: E402
from runner_host_sdk.results import (  # noqa: E402
    FRAME_OVERHEAD_BYTES,
    RESULT_TOO_LARGE,
    Outbox,
    RunResults,
    result_wire_bytes,
)
from runner_host_sdk.wire import dict_to_message, message_to_dict  # noqa: E402


class SequencingAndBatchingTest(unittest.IsolatedAsyncioTestCase):
    async def test_invariants_hold_for_random_programs(self):
        for seed in range(40):
            rng = random.Random(seed)
            frames = []

            async def write(frame):
                frames.append(frame)
                if rng.random() < 0.3:
                    await asyncio.sleep(0)  # a slow write (waiting for 'drain')

            max_batch = rng.randint(1, 5)
            outbox = Outbox(write, max_batch)
            runs = [RunResults(f"r{i}", outbox) for i in range(rng.randint(1, 4))]
            for _ in range(rng.randint(1, 40)):
                run = rng.choice(runs)
                op = rng.random()
                if op < 0.5:
                    run.delta(rng.choice(["a", "b", ""]))
                elif op < 0.7:
                    run.message("m")
                elif op < 0.8:
                    run.completed()
                elif op < 0.85:
                    run.failed("x")
                else:
                    await asyncio.sleep(0)
            await asyncio.sleep(0)
            await outbox.idle()
            written = [r for f in frames for r in f]
            self.assertTrue(all(1 <= len(f) <= max_batch for f in frames), seed)
            for run in runs:
                mine = [r for r in written if r["run_id"] == run.run_id]
                self.assertEqual([r["sequence"] for r in mine], list(range(1, len(mine) + 1)), seed)
                terminals = [i for i, r in enumerate(mine) if r["type"] in ("run.completed", "run.failed")]
                self.assertLessEqual(len(terminals), 1, seed)
                if terminals:
                    self.assertEqual(terminals[0], len(mine) - 1, seed)  # nothing after the terminal
                self.assertEqual(run.finished, bool(terminals), seed)

    async def test_results_of_one_iteration_leave_in_one_frame(self):
        frames = []

        async def write(frame):
            frames.append(frame)

        outbox = Outbox(write, 256)
        a, b = RunResults("a", outbox), RunResults("b", outbox)
        a.delta("x")
        b.delta("y")
        done = a.message("xy")
        await done
        self.assertEqual([[r["run_id"] for r in f] for f in frames], [["a", "b", "a"]])
        frames.clear()
        for _ in range(5):
            a.state("runner", "k", 1)
        await a.completed()
        self.assertEqual(len(frames), 1)
        self.assertEqual(len(frames[0]), 6)

    async def test_max_batch_splits_frames_in_order(self):
        frames = []

        async def write(frame):
            frames.append([r["sequence"] for r in frame])

        outbox = Outbox(write, 2)
        run = RunResults("a", outbox)
        for _ in range(5):
            run.state("runner", "k", 1)
        await outbox.idle()
        self.assertEqual(frames, [[1, 2], [3, 4], [5]])

    def test_max_batch_is_checked(self):
        async def write(frame):
            pass

        with self.assertRaisesRegex(ValueError, "^max_batch: "):
            Outbox(write, 0)

    async def test_frames_never_pass_max_frame_bytes_as_encoded(self):
        """Random programs of large results: every frame, encoded as the stream writes it, stays
        within max_frame_bytes; order and sequences hold; a frame of one iteration ends early only
        when full; a result too large for any frame fails its run runner.result_too_large."""
        saw_split = saw_too_large = False
        for seed in range(60):
            rng = random.Random(seed)
            frames, pushed = [], []

            async def write(frame):
                frames.append(frame)

            max_batch = rng.randint(1, 6)
            max_frame_bytes = rng.randint(4096, 20_000)
            outbox = Outbox(write, max_batch, max_frame_bytes)
            real_push = outbox.push
            iteration = [0]

            def recording_push(result, size=None):
                pushed.append((result, iteration[0]))
                return real_push(result, size)

            outbox.push = recording_push  # type: ignore[method-assign]
            runs = [RunResults(f"r{i}", outbox) for i in range(rng.randint(1, 4))]
            for _ in range(rng.randint(1, 40)):
                run = rng.choice(runs)
                op = rng.random()
                if op < 0.6:
                    char = rng.choice(["x", "é", "€", "😀"])
                    run.emit("demo.blob", {"blob": char * rng.randint(0, 3000), "n": rng.random()})
                elif op < 0.7:
                    run.delta("d")
                elif op < 0.75:
                    run.completed()
                else:
                    await asyncio.sleep(0)
                    iteration[0] += 1
            await asyncio.sleep(0)
            await outbox.idle()
            written = [r for f in frames for r in f]
            self.assertEqual(written, [r for r, _ in pushed], seed)
            it = {id(r): i for r, i in pushed}
            budget = max_frame_bytes - FRAME_OVERHEAD_BYTES
            for i, frame in enumerate(frames):
                if len(frame) == 1:
                    message = gateway_pb2.PluginMessage(result=_result_message(frame[0]))
                else:
                    message = gateway_pb2.PluginMessage(results=gateway_pb2.ResultBatch(results=[_result_message(r) for r in frame]))
                self.assertLessEqual(message.ByteSize(), max_frame_bytes, seed)
                if i > 0 and it[id(frames[i - 1][-1])] == it[id(frame[0])]:
                    saw_split = True
                    prev = frames[i - 1]
                    full = len(prev) == max_batch or sum(map(result_wire_bytes, prev)) + result_wire_bytes(frame[0]) > budget
                    self.assertTrue(full, seed)
            for run in runs:
                mine = [r for r in written if r["run_id"] == run.run_id]
                self.assertEqual([r["sequence"] for r in mine], list(range(1, len(mine) + 1)), seed)
                codes = [r["data"].get("code") for r in mine]
                if RESULT_TOO_LARGE in codes:
                    saw_too_large = True
                    self.assertEqual(codes.index(RESULT_TOO_LARGE), len(mine) - 1, seed)
        self.assertTrue(saw_split and saw_too_large)  # the programs reached both cases

    def test_result_wire_bytes_is_what_protobuf_encodes(self):
        rng = random.Random(7)

        def json_value(depth):
            kind = rng.randint(0, 6 if depth < 3 else 3)
            if kind == 0:
                return None
            if kind == 1:
                return rng.choice([True, False])
            if kind == 2:
                return rng.choice([0, -1, 1.5, 2**40, rng.random()])
            if kind == 3:
                return rng.choice(["", "a", "é€😀", "x" * rng.randint(0, 300)])
            if kind in (4, 5):
                return {f"k{i}é": json_value(depth + 1) for i in range(rng.randint(0, 4))}
            return [json_value(depth + 1) for _ in range(rng.randint(0, 4))]

        for _ in range(300):
            result = {"run_id": "r", "type": "demo.custom", "data": {"v": json_value(0)}, "sequence": rng.randint(0, 2**40), "timestamp": 1}
            if rng.random() < 0.5:
                result["usage"] = {"total_tokens": rng.randint(0, 10**6)}
            self.assertEqual(result_wire_bytes(result), gateway_pb2.PluginMessage(result=_result_message(result)).ByteSize())

    async def test_a_result_too_large_fails_only_its_run(self):
        frames = []

        async def write(frame):
            frames.append(frame)

        outbox = Outbox(write, 256, 8192)
        a, b = RunResults("a", outbox), RunResults("b", outbox)
        a.delta("before")
        b.delta("fits")
        a.emit("demo.blob", {"blob": "x" * 9000})
        b.delta("still fits")
        await a.delta("after")
        await outbox.idle()
        self.assertEqual(
            [(r["run_id"], r["type"], r["sequence"]) for f in frames for r in f],
            [("a", "message.delta", 1), ("b", "message.delta", 1), ("a", "run.failed", 2), ("b", "message.delta", 2)],
        )
        failed = frames[0][2]["data"]
        self.assertEqual((failed["code"], failed["retryable"]), ("runner.result_too_large", False))
        self.assertRegex(failed["error"], r"^a demo\.blob result of \d+ bytes does not fit one gRPC frame \(max_frame_bytes 8192\)")
        self.assertTrue(a.finished)
        with self.assertRaisesRegex(ValueError, "^max_frame_bytes: "):
            Outbox(write, 1, 100)

    async def test_terminal_types_only_through_completed_or_failed(self):
        run = RunResults("a", Outbox(lambda f: asyncio.sleep(0)))
        with self.assertRaisesRegex(ValueError, "^type: "):
            run.emit("run.completed", {})


class BackoffTest(unittest.TestCase):
    def test_capped_exponential_with_jitter(self):
        opts = Reconnect(initial_delay_ms=100, max_delay_ms=1000, jitter=0.5)
        self.assertEqual([backoff_delay(a, opts, lambda: 0.0) for a in range(6)], [100, 200, 400, 800, 1000, 1000])
        self.assertEqual(backoff_delay(2, opts, lambda: 1.0), 200)
        rng = random.Random(1)
        for attempt in range(40):
            d = backoff_delay(attempt, opts, rng.random)
            cap = min(1000, 100 * 2**attempt)
            self.assertTrue(cap / 2 <= d <= cap)


class WireTest(unittest.TestCase):
    def test_context_round_trip_with_nulls_and_integral_numbers(self):
        ctx = message_to_dict(
            dict_to_message(
                context_pb2.RunContext,
                {"run_id": "r1", "input": {"text": "hi"}, "config": {"n": 3, "f": 2.5, "l": [1, None, {"a": True}, {}, []], "e": {}}},
            )
        )
        self.assertEqual(ctx["config"], {"n": 3, "f": 2.5, "l": [1, None, {"a": True}, {}, []], "e": {}})
        self.assertIsNone(ctx["resources"])
        self.assertEqual(ctx["input"]["text"], "hi")
        self.assertIsNone(ctx["input"]["interaction"])

    def test_unknown_request_fields_are_refused_by_name(self):
        with self.assertRaisesRegex(ValueError, "^bogus: "):
            dict_to_message(host_api_pb2.StateGetRequest, {"bogus": 1})


if __name__ == "__main__":
    unittest.main()
