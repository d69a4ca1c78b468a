"""The floor: the least a Telegram-to-LLM relay can do, to measure membot's overhead against.

A bare aiogram 3 Dispatcher with one message handler that sends the user's text (alone: no
memory, no system prompt, no tools) to an OpenAI-compatible endpoint and answers with the
reply as plain text. No middlewares, no per-chat sequencing, no files, no Markdown rendering.
The Bot and its HTTP session are built exactly like membot's (``MembotApp``), and the LLM
client uses the same aiohttp transport, so both talk to the same fakes through the same
client stack.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections import deque
from pathlib import Path
from typing import Any

from aiogram import Bot, Dispatcher, F, Router
from aiogram.client.default import DefaultBotProperties
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.types import LinkPreviewOptions, Message
from aiogram.utils.chat_action import ChatActionSender
from openai import AsyncOpenAI, DefaultAioHttpClient


class FloorRelay:
    """As membot's ``Process``: ``await run(handle_signals=False)`` until ``stop()``."""

    def __init__(
        self,
        *,
        telegram_token: str,
        telegram_api_base: str,
        api_key: str,
        llm_base_url: str,
        model: str,
        timeout: float = 60.0,
    ) -> None:
        self.model = model
        # The same HTTP transport as membot's client (llm/client.py): the floor must differ
        # from membot only in what membot adds, not in how its bytes travel.
        self.client = AsyncOpenAI(
            api_key=api_key,
            base_url=llm_base_url,
            timeout=timeout,
            max_retries=0,
            http_client=DefaultAioHttpClient(timeout=timeout),
        )
        self.bot = Bot(
            token=telegram_token,
            session=AiohttpSession(api=TelegramAPIServer.from_base(telegram_api_base)),
            default=DefaultBotProperties(link_preview=LinkPreviewOptions(is_disabled=True)),
        )
        self.dispatcher = Dispatcher()
        router = Router(name="relay")
        router.message(F.text)(self._relay)
        self.dispatcher.include_router(router)
        self.dispatcher.shutdown.register(self._on_shutdown)

    async def _relay(self, message: Message) -> None:
        completion = await self.client.chat.completions.create(
            model=self.model,
            messages=[{"role": "user", "content": message.text or ""}],
        )
        await message.answer(completion.choices[0].message.content or "(empty)")

    async def _on_shutdown(self) -> None:
        await self.client.close()

    async def run(self, *, handle_signals: bool = True) -> None:
        await self.dispatcher.start_polling(
            self.bot,
            handle_signals=handle_signals,
            allowed_updates=self.dispatcher.resolve_used_update_types(),
        )

    async def stop(self) -> None:
        await self.dispatcher.stop_polling()


class DurableFloorRelay(FloorRelay):
    """The durable floor: the least a bot that keeps its promises may do. The relay above,
    plus a typing indicator, the chat's last `window` messages in the prompt, and one
    fdatasync'd append per exchange (the question and the answer, as two JSON lines), made in
    a worker thread so the event loop never waits on the disk. No summary, facts, tools,
    rendering or per-chat ordering: what membot does beyond this, it does on purpose."""

    def __init__(self, *, data_dir: Path, window: int = 20, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.data_dir = data_dir
        self.window = window
        self._history: dict[int, deque[dict[str, str]]] = {}

    async def _relay(self, message: Message) -> None:
        chat = message.chat.id
        history = self._history.setdefault(chat, deque(maxlen=self.window))
        question = {"role": "user", "content": message.text or ""}
        async with ChatActionSender.typing(bot=self.bot, chat_id=chat):
            completion = await self.client.chat.completions.create(
                model=self.model,
                messages=[*history, question],  # type: ignore[list-item]
            )
            answer = {"role": "assistant", "content": completion.choices[0].message.content or ""}
            lines = json.dumps(question) + "\n" + json.dumps(answer) + "\n"
            await asyncio.to_thread(self._append, chat, lines)
        history.extend((question, answer))
        await message.answer(answer["content"] or "(empty)")

    def _append(self, chat: int, lines: str) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.data_dir / f"{chat}.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, lines.encode())
            os.fdatasync(fd)
        finally:
            os.close(fd)


def main() -> None:
    """`python -m bench.floor [--durable DATA_DIR]`: a floor as its own process (bench/scale.py
    measures its memory beside membot's), configured like membot: TELEGRAM_BOT_TOKEN,
    TELEGRAM_API_BASE, OPENROUTER_API_KEY, OPENROUTER_BASE_URL, OPENROUTER_MODEL."""
    import argparse
    import contextlib
    import gc

    parser = argparse.ArgumentParser(prog="python -m bench.floor")
    parser.add_argument("--durable", type=Path, metavar="DATA_DIR")
    args = parser.parse_args()
    settings = {
        "telegram_token": os.environ["TELEGRAM_BOT_TOKEN"],
        "telegram_api_base": os.environ["TELEGRAM_API_BASE"],
        "api_key": os.environ["OPENROUTER_API_KEY"],
        "llm_base_url": os.environ["OPENROUTER_BASE_URL"],
        "model": os.environ["OPENROUTER_MODEL"],
    }
    relay = (
        DurableFloorRelay(data_dir=args.durable, **settings)
        if args.durable is not None
        else FloorRelay(**settings)
    )

    async def run() -> None:
        relay.dispatcher.startup.register(lambda: (gc.collect(), gc.freeze()))  # as membot
        await relay.run()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


if __name__ == "__main__":
    main()
