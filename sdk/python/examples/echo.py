"""The echo runner: answers each turn (the input, then steered follow-ups) with its own text,
streamed word by word. Run: /usr/bin/python3 sdk/python/examples/echo.py (RUNNERHOST_* variables)."""

import asyncio
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # the SDK of this repository

from runner_host_sdk import runner, serve  # noqa: E402


@runner("default", label={"en_US": "Echo (Python SDK example)"}, capabilities={"streaming": True, "steering": True})
async def echo(ctx, io):
    async for turn in io.turns(wait_ms=int((ctx.get("config") or {}).get("steer_wait_ms", 0))):
        for i, word in enumerate(turn.text.split(" ")):
            await io.delta(word if i == 0 else f" {word}")
        await io.message(turn.text)


if __name__ == "__main__":
    asyncio.run(serve([echo]))
