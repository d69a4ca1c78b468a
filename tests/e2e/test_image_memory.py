"""Images that would take the process's memory: a real `membot api` process, four image
attachments at once, and the process's peak RSS read from /proc (VmHWM), as an operator
watching the machine would see it. Linux only (/proc)."""

from __future__ import annotations

import asyncio
import base64
import signal
import sys
from pathlib import Path

import pytest

from tests import api_support
from tests.api_support import API_TOKEN, Answer, ApiClient
from tests.conftest import API_KEY
from tests.fakes import FakeLLM, media_files
from tests.fakes.process import membot_env, spawn_membot

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/<pid>/status")

VISION = "vision/model"
MB = 1024 * 1024


def status_mb(pid: int, key: str) -> float:
    """A line of /proc/<pid>/status (VmRSS: resident now, VmHWM: its peak), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {key} in /proc/{pid}/status")


def with_image(png: bytes, name: str) -> dict[str, object]:
    data = base64.b64encode(png).decode()
    attachment = {"type": "image", "mimeType": "image/png", "name": name, "data": data}
    return {"message": "What is on it?", "attachments": [attachment]}


async def test_four_huge_pngs_at_once_neither_exhaust_memory_nor_are_called_damaged(
    llm: FakeLLM, tmp_path: Path, data_dir: Path
) -> None:
    # Four 182 KB-sized PNGs of 7,900 x 7,900 pixels (over MEDIA_MAX_PIXELS, 25 Mpx) are
    # refused from their headers as too large; then four of 5,000 x 5,000 (at the bound) are
    # decoded, two at a time (MEDIA_IMAGE_DECODES). The process's peak stays within 600 MB of
    # where it started, and it gives the memory back afterwards.
    llm.models = {VISION: ["text", "image"]}
    huge, at_bound = media_files.png_uniform(7900), media_files.png_uniform(5000)
    port = api_support.free_port()
    env = membot_env(
        openrouter_api_key=API_KEY,
        openrouter_base_url=llm.base_url,
        openrouter_model=VISION,
        data_dir=str(data_dir),
        api_port=str(port),
        api_tokens=API_TOKEN,
    )
    process = await spawn_membot(
        tmp_path, env, "api", stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    assert process.stderr is not None
    client = ApiClient(f"http://127.0.0.1:{port}")
    try:
        async with asyncio.timeout(60):
            while "HTTP API listening" not in (await process.stderr.readline()).decode():
                assert process.returncode is None, "membot api exited"
        # A first small image: Pillow imported, a session made, the warm process.
        first = await client.chat(with_image(media_files.png_uniform(100), "small.png"))
        assert first.status == 200, first.body
        started = status_mb(process.pid, "VmRSS")

        async def send(png: bytes, n: int) -> list[Answer]:
            bodies = [with_image(png, f"scan-{i}.png") for i in range(n)]
            return list(await asyncio.gather(*(client.chat(body) for body in bodies)))

        refused = await send(huge, 4)
        read = await send(at_bound, 4)
        peak = status_mb(process.pid, "VmHWM") - started
        kept = status_mb(process.pid, "VmRSS") - started
    finally:
        await client.close()
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(30):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()

    assert [a.status for a in refused] == [400] * 4
    assert {a.code for a in refused} == {"IMAGE_TOO_LARGE"}
    sentence = refused[0].body["error"]
    assert "7900x7900 pixels" in sentence and "MEDIA_MAX_PIXELS (25000000)" in sentence
    assert '(attachments[0], "scan-0.png")' in sentence
    assert [a.status for a in read] == [200] * 4
    assert peak <= 600, f"peak RSS rose by {peak:.0f} MB"
    assert kept <= 100, f"the process kept {kept:.0f} MB after the decodes"
