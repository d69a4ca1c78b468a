"""The fakes behave like the real services, as seen through the real client libraries."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import aiohttp.web
import openai
import pytest
import telegramify_markdown
from aiogram import Bot, Dispatcher
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.exceptions import (
    TelegramBadRequest,
    TelegramConflictError,
    TelegramForbiddenError,
    TelegramNotFound,
    TelegramRetryAfter,
    TelegramUnauthorizedError,
)
from aiogram.methods import AnswerGuestQuery, GetUpdates
from aiogram.types import (
    BotCommand,
    InlineQueryResultArticle,
    InputTextMessageContent,
    Message,
    MessageEntity,
    ReplyParameters,
    Update,
)
from openai.types.chat import ChatCompletionUserMessageParam

from tests.fakes import BOT_ID, BOT_USERNAME, FakeLLM, FakeTelegram, Reply, Transcription

TOKEN = "4242:TEST-TOKEN"
API_KEY = "sk-test"
MODEL = "test/model"


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token=TOKEN) as server:
        yield server


@pytest.fixture
async def bot(tg: FakeTelegram) -> AsyncIterator[Bot]:
    session = AiohttpSession(api=TelegramAPIServer.from_base(tg.base_url))
    bot = Bot(TOKEN, session=session)
    yield bot
    await bot.session.close()


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM(api_key=API_KEY) as server:
        yield server


@pytest.fixture
async def client(llm: FakeLLM) -> AsyncIterator[openai.AsyncOpenAI]:
    client = openai.AsyncOpenAI(base_url=llm.base_url, api_key=API_KEY, max_retries=0)
    yield client
    await client.close()


def user(text: str) -> ChatCompletionUserMessageParam:
    return {"role": "user", "content": text}


# ---- Telegram -------------------------------------------------------------------------------


async def test_get_me_and_token_check(tg: FakeTelegram, bot: Bot) -> None:
    me = await bot.get_me()
    assert (me.id, me.username, me.first_name, me.is_bot) == (BOT_ID, BOT_USERNAME, "membot", True)

    other = Bot("1:WRONG", session=AiohttpSession(api=TelegramAPIServer.from_base(tg.base_url)))
    try:
        with pytest.raises(TelegramUnauthorizedError):
            await other.get_me()
    finally:
        await other.session.close()
    assert tg.errors == [("getMe", "Unauthorized")]


async def test_send_message_with_entities(tg: FakeTelegram, bot: Bot) -> None:
    text, entities = telegramify_markdown.convert("**Hi** 👋 _there_ [x](http://a.b)")
    first = await bot.send_message(
        7, text, entities=[MessageEntity(**e.to_dict()) for e in entities]
    )
    second = await bot.send_message(7, "plain", reply_parameters=ReplyParameters(message_id=1))

    assert first.message_id == 1 and second.message_id == 2
    assert first.chat.id == 7 and first.from_user is not None and first.from_user.id == BOT_ID
    assert [e.type for e in first.entities or []] == ["bold", "italic", "text_link"]
    assert second.reply_to_message is not None and second.reply_to_message.message_id == 1
    sent = await tg.wait_for_messages(7, 2)
    assert sent[0].text == text and sent[0].entities[2]["url"] == "http://a.b"
    assert sent[1].reply_to_message_id == 1 and sent[1].entities == []


@pytest.mark.parametrize(
    "entities",
    [
        [{"type": "bold", "offset": 0, "length": 6}],  # past the end
        [{"type": "bold", "offset": 0, "length": 0}],
        [{"type": "sparkly", "offset": 0, "length": 1}],
        [{"type": "text_link", "offset": 0, "length": 1}],  # no url
        [{"type": "bold", "offset": 1, "length": 2}],  # cuts the emoji's surrogate pair
    ],
)
async def test_invalid_entities_are_rejected(
    tg: FakeTelegram, bot: Bot, entities: list[dict[str, Any]]
) -> None:
    with pytest.raises(TelegramBadRequest, match="can't parse entities"):
        await bot.send_message(7, "😀abc", entities=[MessageEntity(**e) for e in entities])
    assert tg.sent == [] and tg.errors[0][0] == "sendMessage"


async def test_text_limits_count_utf16_units(bot: Bot, tg: FakeTelegram) -> None:
    await bot.send_message(7, "😀" * 2048)  # exactly 4096 UTF-16 code units
    with pytest.raises(TelegramBadRequest, match="message is too long"):
        await bot.send_message(7, "😀" * 2048 + "x")
    with pytest.raises(TelegramBadRequest, match="message text is empty"):
        await bot.send_message(7, " \n ")
    with pytest.raises(TelegramBadRequest, match="message text is empty"):
        await bot.send_message(7, "")  # aiogram drops the empty field altogether
    assert len(tg.sent) == 1


async def test_parse_modes(bot: Bot, tg: FakeTelegram) -> None:
    msg = await bot.send_message(
        7, '<b>bold</b> &amp; <a href="http://x.y">link</a> 1 &lt; 2', parse_mode="HTML"
    )
    assert msg.text == "bold & link 1 < 2"
    assert [(e.type, e.offset, e.length) for e in msg.entities or []] == [
        ("bold", 0, 4),
        ("text_link", 7, 4),
    ]
    msg = await bot.send_message(
        7, "*bold* _it_ `co\\`de` 1\\.5 ```py\nx = 1```", parse_mode="MarkdownV2"
    )
    assert msg.text == "bold it co`de 1.5 x = 1"
    assert tg.sent[-1].raw_text.startswith("*bold*")
    assert tg.sent[-1].entities[-1] == {"type": "pre", "offset": 18, "length": 5, "language": "py"}

    for text, mode in [
        ("<b>unclosed", "HTML"),
        ("<p>unknown tag</p>", "HTML"),
        ("a < b", "HTML"),
        ("fish & chips", "HTML"),
        ("<b>x</i>", "HTML"),
        ("SUMMARY #1.", "MarkdownV2"),
        ("*unclosed bold", "MarkdownV2"),
        ("[link](http://x", "MarkdownV2"),
    ]:
        with pytest.raises(TelegramBadRequest, match="can't parse entities"):
            await bot.send_message(7, text, parse_mode=mode)
    assert len(tg.sent) == 2


async def test_long_polling_delivers_and_confirms(tg: FakeTelegram, bot: Bot) -> None:
    poll = asyncio.create_task(bot.get_updates(timeout=10))
    await tg.wait_until(lambda: tg.polling == 1, what="a waiting long poll")
    update_id = tg.push_text(5, "/start now", username="alice")

    updates = await poll
    assert [u.update_id for u in updates] == [update_id]
    message = updates[0].message
    assert message is not None and message.text == "/start now"
    assert message.from_user is not None and message.from_user.id == 5
    assert [(e.type, e.offset, e.length) for e in message.entities or []] == [("bot_command", 0, 6)]
    assert tg.pending_updates() == 1
    assert await bot.get_updates(offset=update_id + 1, timeout=0) == []
    assert tg.pending_updates() == 0


async def test_long_poll_times_out_empty(bot: Bot) -> None:
    assert await bot.get_updates(timeout=1) == []


async def test_second_poller_conflicts_first(tg: FakeTelegram, bot: Bot) -> None:
    first = asyncio.create_task(bot.get_updates(timeout=10))
    await tg.wait_until(lambda: tg.polling == 1)
    second = asyncio.create_task(bot.get_updates(timeout=10))
    with pytest.raises(TelegramConflictError):
        await first
    tg.push_text(5, "hi")
    assert len(await second) == 1


async def test_stop_releases_pending_long_poll(tg: FakeTelegram, bot: Bot) -> None:
    poll = asyncio.create_task(bot.get_updates(timeout=30))
    await tg.wait_until(lambda: tg.polling == 1)
    await tg.stop()
    assert await poll == []


async def test_update_builders_produce_valid_updates(tg: FakeTelegram, bot: Bot) -> None:
    await bot.send_message(-1001234567890, "earlier bot message")
    tg.push_mention(-1001234567890, "hello there", title="Team")
    tg.push_text(-1001234567890, "thanks", reply_to_bot=True, user_id=77, first_name="Bob")
    tg.push_sticker(5)
    tg.push_photo(5, caption="look")
    tg.push_voice(5, duration=4)
    tg.push_text(6, "reply to bot in a fresh chat", reply_to_bot=True)
    tg.push_update(
        {
            "edited_message": {
                "message_id": 99,
                "date": 0,
                "chat": {"id": 5, "type": "private"},
                "text": "edit",
            }
        }
    )

    updates = await bot(GetUpdates(timeout=0))
    kinds: list[Any] = []
    for update in updates:
        assert isinstance(update, Update)
        kinds.append(update.message or update.edited_message)
    mention, reply, sticker, photo, voice, fresh, edited = (
        m for m in kinds if isinstance(m, Message)
    )
    assert mention.text == f"@{BOT_USERNAME} hello there" and mention.chat.title == "Team"
    assert mention.chat.type == "supergroup"
    assert mention.entities is not None and mention.entities[0].type == "mention"
    assert reply.reply_to_message is not None and reply.reply_to_message.text == (
        "earlier bot message"
    )
    assert reply.from_user is not None and reply.from_user.id == 77
    assert sticker.sticker is not None and photo.photo and photo.caption == "look"
    assert voice.voice is not None and voice.voice.duration == 4
    assert fresh.reply_to_message is not None and fresh.reply_to_message.from_user is not None
    assert fresh.reply_to_message.from_user.id == BOT_ID
    assert fresh.message_id > fresh.reply_to_message.message_id
    assert edited.text == "edit"


async def test_fault_injection(tg: FakeTelegram, bot: Bot) -> None:
    tg.fail_next("sendMessage", 429, "Too Many Requests: retry after 3")
    with pytest.raises(TelegramRetryAfter) as retry:
        await bot.send_message(7, "x")
    assert retry.value.retry_after == 3
    await bot.send_message(7, "x")

    tg.reject_entities_when(lambda params: "entities" in params)
    with pytest.raises(TelegramBadRequest, match="can't parse entities"):
        await bot.send_message(7, "bold", entities=[MessageEntity(type="bold", offset=0, length=4)])
    await bot.send_message(7, "bold")  # the plain-text fallback goes through

    with pytest.raises(TelegramBadRequest, match="message to be replied not found"):
        await bot.send_message(7, "x", reply_parameters=ReplyParameters(message_id=999))
    assert [m.text for m in tg.messages_to(7)] == ["x", "bold"]
    assert [e[0] for e in tg.errors] == ["sendMessage"] * 3


async def test_a_fault_after_some_calls(tg: FakeTelegram, bot: Bot) -> None:
    """`after`: the fault lets that many matching calls through first (a long answer's
    second part fails, its first went)."""
    tg.fail_next("sendMessage", 403, "Forbidden: bot was blocked by the user", chat_id=7, after=1)
    await bot.send_message(8, "other chat")
    await bot.send_message(7, "part 1")
    with pytest.raises(TelegramForbiddenError):
        await bot.send_message(7, "part 2")
    await bot.send_message(7, "part 2")
    assert [m.text for m in tg.messages_to(7)] == ["part 1", "part 2"]


async def test_drafts_in_private_chats_only(tg: FakeTelegram, bot: Bot) -> None:
    bold = [MessageEntity(type="bold", offset=0, length=4)]
    assert await bot.send_message_draft(7, 11, text="Plan so far", entities=bold, can_stop=True)
    [draft] = tg.drafts_to(7)
    assert (draft.draft_id, draft.text, draft.can_stop) == (11, "Plan so far", True)
    assert draft.entities == [{"type": "bold", "offset": 0, "length": 4}]
    with pytest.raises(TelegramBadRequest, match="private chats"):
        await bot.send_message_draft(-100, 11, text="x")
    tg.fail_next("sendMessageDraft", 429, "Too Many Requests: retry after 4")
    with pytest.raises(TelegramRetryAfter) as retry:
        await bot.send_message_draft(7, 11, text="more")
    assert retry.value.retry_after == 4 and len(tg.drafts) == 1


async def test_stop_is_delivered_only_to_a_bot_that_asked_for_it(
    tg: FakeTelegram, bot: Bot
) -> None:
    await bot.send_message_draft(7, 11, text="Plan so far", can_stop=True)
    await bot.send_message_draft(7, 12, text="no button")
    with pytest.raises(ValueError):
        tg.press_stop(7, 12)  # no Stop button on that draft
    tg.press_stop(7, 11)
    # A bot that lists its update types without this one never gets it (as Telegram).
    assert await bot(GetUpdates(timeout=0, allowed_updates=["message"])) == []
    assert [u["update_id"] for u in tg.not_delivered] == [1]
    tg.press_stop(7, 11)
    kinds = ["message", "stopped_message_generation"]
    [update] = await bot(GetUpdates(timeout=0, allowed_updates=kinds))
    assert update.stopped_message_generation is not None
    assert update.stopped_message_generation.draft_id == 11
    assert update.stopped_message_generation.chat.id == 7
    assert update.event_type == "stopped_message_generation"


async def test_a_guest_query_is_delivered_to_a_bot_that_asked_and_answered_once(
    tg: FakeTelegram, bot: Bot
) -> None:
    first = tg.push_guest(-300, "when is it due?", user_id=5)
    assert await bot(GetUpdates(timeout=0, allowed_updates=["message"])) == []
    second = tg.push_guest(-300, "and now?", user_id=5)
    [update] = await bot(GetUpdates(timeout=0, allowed_updates=["message", "guest_message"]))
    message = update.guest_message
    assert message is not None and message.guest_query_id == second != first
    assert message.chat.id == -300 and message.from_user is not None
    assert message.from_user.id == 5 and message.text == f"@{BOT_USERNAME} and now?"
    content = InputTextMessageContent(
        message_text="Friday", entities=[MessageEntity(type="bold", offset=0, length=6)]
    )
    article = InlineQueryResultArticle(id="a", title="membot", input_message_content=content)
    sent = await bot(AnswerGuestQuery(guest_query_id=second, result=article))
    assert sent.inline_message_id
    answer = tg.guest_answers[second]
    assert (answer.chat_id, answer.text) == (-300, "Friday")
    assert answer.entities == [{"type": "bold", "offset": 0, "length": 6}]
    assert 0 <= answer.after < 5
    with pytest.raises(TelegramBadRequest, match="query ID is invalid"):  # one answer a query
        await bot(AnswerGuestQuery(guest_query_id=second, result=article))
    with pytest.raises(TelegramBadRequest, match="query ID is invalid"):
        await bot(AnswerGuestQuery(guest_query_id="gq-unknown", result=article))
    bad = InputTextMessageContent(
        message_text="Fri", entities=[MessageEntity(type="bold", offset=0, length=9)]
    )
    wrong = InlineQueryResultArticle(id="a", title="membot", input_message_content=bad)
    with pytest.raises(TelegramBadRequest, match="entities"):
        await bot(AnswerGuestQuery(guest_query_id=first, result=wrong))


async def test_an_edit_is_the_message_again_for_a_bot_that_asked_for_edits(
    tg: FakeTelegram, bot: Bot
) -> None:
    sent = tg.push_text(7, "see you at 5")
    [first] = await bot(GetUpdates(timeout=0, allowed_updates=["message"]))
    assert first.update_id == sent
    tg.push_edit(7, "/help me: see you at 6")  # the chat's latest message by default
    with pytest.raises(ValueError):
        tg.push_edit(7, "no such message", message_id=999)
    assert await bot(GetUpdates(offset=sent + 1, timeout=0, allowed_updates=["message"])) == []
    tg.push_edit(7, "see you at 6", message_id=first.message.message_id)
    kinds = ["message", "edited_message"]
    [edit] = await bot(GetUpdates(offset=sent + 1, timeout=0, allowed_updates=kinds))
    assert edit.event_type == "edited_message" and edit.edited_message is not None
    edited = edit.edited_message
    assert (edited.message_id, edited.text) == (first.message.message_id, "see you at 6")
    assert edited.edit_date is not None and edited.entities is None


async def test_flood_control_refuses_a_burst_beyond_the_limit(tg: FakeTelegram, bot: Bot) -> None:
    tg.flood_control(chat_rate=1.0, chat_burst=3)
    for _ in range(3):
        await bot.send_message(7, "x")
    with pytest.raises(TelegramRetryAfter) as retry:
        await bot.send_message(7, "x")
    assert retry.value.retry_after >= 1
    await bot.send_message(8, "another chat is not held up")
    assert tg.flood_refusals == 1
    assert len(tg.messages_to(7)) == 3


async def test_webhook_delivers_with_the_secret_and_retries_until_2xx(
    tg: FakeTelegram, bot: Bot
) -> None:
    seen: list[tuple[int, str | None]] = []
    refuse = {"times": 1}

    async def hook(request: aiohttp.web.Request) -> aiohttp.web.Response:
        update = await request.json()
        seen.append((update["update_id"], request.headers.get("X-Telegram-Bot-Api-Secret-Token")))
        if refuse["times"]:
            refuse["times"] -= 1
            return aiohttp.web.Response(status=503)
        return aiohttp.web.Response(status=200)

    app = aiohttp.web.Application()
    app.router.add_post("/hook", hook)
    runner = aiohttp.web.AppRunner(app)
    await runner.setup()
    site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        first = tg.push_text(7, "one")
        second = tg.push_text(7, "two")
        await bot.set_webhook(f"http://127.0.0.1:{port}/hook", secret_token="s3cret")
        with pytest.raises(TelegramConflictError, match="webhook is active"):
            await bot.get_updates(timeout=0)
        await tg.wait_until(lambda: tg.pending_updates() == 0, what="both delivered")
        # The refused first update came again, and the chat's second waited behind it.
        assert seen == [(first, "s3cret"), (first, "s3cret"), (second, "s3cret")]
        assert [(d.update_id, d.status) for d in tg.webhook_deliveries] == [
            (first, 503),
            (first, 200),
            (second, 200),
        ]
        assert (await bot.get_webhook_info()).url.endswith("/hook")
        await bot.delete_webhook()
        tg.push_text(7, "three")
        assert [u.message.text for u in await bot.get_updates(timeout=0) if u.message] == ["three"]
    finally:
        await runner.cleanup()


async def test_commands_actions_and_unknown_methods(tg: FakeTelegram, bot: Bot) -> None:
    await bot.set_my_commands([BotCommand(command="start", description="Start")])
    assert tg.commands == [{"command": "start", "description": "Start"}]
    assert [c.command for c in await bot.get_my_commands()] == ["start"]
    await bot.delete_my_commands()
    assert await bot.get_my_commands() == []
    with pytest.raises(TelegramBadRequest, match="BOT_COMMAND_INVALID"):
        await bot.set_my_commands([BotCommand(command="Bad-Name", description="x")])
    await bot.send_chat_action(7, "typing")
    assert tg.actions == [(7, "typing")]
    with pytest.raises(TelegramNotFound):
        await bot.send_dice(7)

    # Raw JSON bodies (not aiogram's form encoding) are accepted as well.
    async with aiohttp.ClientSession() as http:
        url = f"{tg.base_url}/bot{TOKEN}/sendMessage"
        entities = [{"type": "bold", "offset": 0, "length": 2}]
        async with http.post(url, json={"chat_id": 8, "text": "hi", "entities": entities}) as r:
            assert r.status == 200 and (await r.json())["result"]["entities"] == entities
    await tg.wait_for_call("sendDice")
    assert tg.calls[-1] == "sendMessage"


async def test_dispatcher_round_trip(tg: FakeTelegram, bot: Bot) -> None:
    dp = Dispatcher()

    @dp.message()
    async def echo(message: Message) -> None:
        await message.answer(f"echo: {message.text}")

    polling = asyncio.create_task(dp.start_polling(bot, handle_signals=False, polling_timeout=5))
    try:
        tg.push_text(1, "one")
        tg.push_text(2, "two")
        assert [m.text for m in await tg.wait_for_messages(1, 1)] == ["echo: one"]
        assert [m.text for m in await tg.wait_for_messages(2, 1)] == ["echo: two"]
    finally:
        await dp.stop_polling()
        await polling


async def test_clear_records_keeps_counts_and_chats(tg: FakeTelegram, bot: Bot) -> None:
    first = await bot.send_message(7, "one")
    await bot.send_chat_action(7, "typing")
    tg.clear_records()
    assert (tg.sent, tg.actions, tg.calls, tg.messages_to(7)) == ([], [], [], [])
    assert tg.call_count("sendMessage") == 1
    second = await bot.send_message(7, "two")
    assert second.message_id == 2  # the chat's numbering goes on
    assert [m.text for m in tg.messages_to(7)] == ["two"]
    # The messages from before are forgotten too (the heap does not grow with a long bench).
    with pytest.raises(TelegramBadRequest):
        await bot.edit_message_text("one, edited", chat_id=7, message_id=first.message_id)


async def test_wait_timeout_explains_state(tg: FakeTelegram) -> None:
    with pytest.raises(AssertionError, match="1 message"):
        await tg.wait_for_messages(1, 1, timeout=0.05)


# ---- LLM ------------------------------------------------------------------------------------


async def test_default_answer_and_summary(llm: FakeLLM, client: openai.AsyncOpenAI) -> None:
    chat = await client.chat.completions.create(
        model=MODEL, messages=[{"role": "system", "content": "Be nice."}, user("hello")]
    )
    assert chat.model == MODEL and chat.object == "chat.completion"
    assert chat.choices[0].message.content == "ANSWER: hello"
    assert chat.choices[0].finish_reason == "stop"
    assert chat.usage is not None and chat.usage.total_tokens > 0

    summary = await client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "system", "content": "Summarize the dialogue."}, user("a" * 100)],
    )
    tagged = await client.chat.completions.create(
        model=MODEL, messages=[user("x")], metadata={"purpose": "summary"}
    )
    assert summary.choices[0].message.content == "SUMMARY #1: " + "a" * 60
    assert tagged.choices[0].message.content == "SUMMARY #2: x"
    assert (len(llm.chat_requests), len(llm.summary_requests), len(llm.requests)) == (1, 2, 3)

    # A long benchmark drops the bodies between runs; answers go on, summaries count anew.
    llm.clear_records()
    assert (llm.requests, llm.chat_requests, llm.summary_requests) == ([], [], [])
    again = await client.chat.completions.create(
        model=MODEL, messages=[user("y")], metadata={"purpose": "summary"}
    )
    assert again.choices[0].message.content == "SUMMARY #1: y"


async def test_tool_calls_round_trip(llm: FakeLLM, client: openai.AsyncOpenAI) -> None:
    llm.script(
        Reply(tool_calls=[{"function": {"name": "remember", "arguments": {"fact": "cats"}}}]),
        "done",
    )
    tools: Any = [{"type": "function", "function": {"name": "remember", "parameters": {}}}]
    first = await client.chat.completions.create(model=MODEL, messages=[user("hi")], tools=tools)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.tool_calls
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.id
    assert call.function.name == "remember" and call.function.arguments == '{"fact": "cats"}'

    history: Any = [
        user("hi"),
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "ok"},
    ]
    second = await client.chat.completions.create(model=MODEL, messages=history, tools=tools)
    assert second.choices[0].message.content == "done"

    with pytest.raises(openai.BadRequestError, match="tool_call_ids did not have response"):
        await client.chat.completions.create(model=MODEL, messages=[*history[:2], user("x")])


async def test_error_statuses(llm: FakeLLM, client: openai.AsyncOpenAI) -> None:
    llm.script(
        Reply(status=500, error_message="boom"),
        Reply(status=429, error_message="slow down", headers={"Retry-After": "7"}),
    )
    with pytest.raises(openai.InternalServerError, match="boom"):
        await client.chat.completions.create(model=MODEL, messages=[user("x")])
    with pytest.raises(openai.RateLimitError) as limited:
        await client.chat.completions.create(model=MODEL, messages=[user("x")])
    assert limited.value.response.headers["Retry-After"] == "7"

    wrong = openai.AsyncOpenAI(base_url=llm.base_url, api_key="nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        await wrong.chat.completions.create(model=MODEL, messages=[user("x")])
    await wrong.close()


async def test_hang_until_client_timeout(llm: FakeLLM, client: openai.AsyncOpenAI) -> None:
    llm.script(Reply(hang=True))
    with pytest.raises(openai.APITimeoutError):
        await client.with_options(timeout=0.3).chat.completions.create(
            model=MODEL, messages=[user("x")]
        )
    # The client hung up, so the server-side handler is cancelled and no longer in flight.
    await llm.wait_until(lambda: llm.in_flight == 0, what="the hung request to be dropped")


async def test_gate_proves_concurrency(llm: FakeLLM, client: openai.AsyncOpenAI) -> None:
    llm.gate = asyncio.Event()
    calls = [
        asyncio.create_task(client.chat.completions.create(model=MODEL, messages=[user(str(i))]))
        for i in range(3)
    ]
    await llm.wait_for_in_flight(3)
    assert not any(c.done() for c in calls)
    llm.gate.set()
    answers = sorted(c.choices[0].message.content or "" for c in await asyncio.gather(*calls))
    assert answers == ["ANSWER: 0", "ANSWER: 1", "ANSWER: 2"] and llm.max_in_flight == 3


async def test_async_responder_and_stop_releases_gate(client: openai.AsyncOpenAI) -> None:
    async with FakeLLM(api_key=API_KEY) as server:

        async def shout(body: dict[str, Any]) -> Reply:
            return Reply(content=body["messages"][-1]["content"].upper())

        server.set_responder(shout)
        local = openai.AsyncOpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0)
        reply = await local.chat.completions.create(model=MODEL, messages=[user("hey")])
        assert reply.choices[0].message.content == "HEY"

        server.gate = asyncio.Event()
        held = asyncio.create_task(local.chat.completions.create(model=MODEL, messages=[user("x")]))
        await server.wait_for_in_flight(1)
        await server.stop()
        with pytest.raises(openai.InternalServerError):
            await held
        await local.close()


async def test_restart_keeps_the_same_url(tg: FakeTelegram, bot: Bot, llm: FakeLLM) -> None:
    tg_url, llm_url = tg.base_url, llm.base_url
    await tg.stop()
    await llm.stop()
    await tg.start()
    await llm.start()
    assert (tg.base_url, llm.base_url) == (tg_url, llm_url)
    assert (await bot.get_me()).id == BOT_ID
    client = openai.AsyncOpenAI(base_url=llm_url, api_key=API_KEY, max_retries=0)
    reply = await client.chat.completions.create(model=MODEL, messages=[user("back")])
    assert reply.choices[0].message.content == "ANSWER: back"
    await client.close()


async def test_broken_responder_is_reported(llm: FakeLLM, client: openai.AsyncOpenAI) -> None:
    def broken(body: dict[str, Any]) -> Reply:
        raise KeyError("oops")

    llm.set_responder(broken)
    with pytest.raises(openai.InternalServerError, match="responder raised KeyError"):
        await client.chat.completions.create(model=MODEL, messages=[user("x")])
    llm.set_responder(None)
    reply = await client.chat.completions.create(model=MODEL, messages=[user("x")])
    assert reply.choices[0].message.content == "ANSWER: x"


async def test_openrouter_extensions_are_accepted(llm: FakeLLM, client: openai.AsyncOpenAI) -> None:
    tools: Any = [
        {"type": "function", "function": {"name": "remember", "parameters": {}}},
        {"type": "openrouter:web_search"},
    ]
    extra = {"plugins": [{"id": "web"}], "provider": {"require_parameters": True}}
    reply = await client.chat.completions.create(
        model=MODEL, messages=[user("news?")], tools=tools, extra_body=extra
    )
    assert reply.choices[0].message.content == "ANSWER: news?"
    sent = llm.requests[-1]
    assert sent["tools"][1] == {"type": "openrouter:web_search"}
    assert (sent["plugins"], sent["provider"]) == (extra["plugins"], extra["provider"])

    with pytest.raises(openai.BadRequestError, match="'plugins' must be an array"):
        await client.chat.completions.create(
            model=MODEL, messages=[user("x")], extra_body={"plugins": ["web"]}
        )
    with pytest.raises(openai.BadRequestError, match="invalid tool definition"):
        bad: Any = [{"type": "retrieval"}]
        await client.chat.completions.create(model=MODEL, messages=[user("x")], tools=bad)
    assert len(llm.requests) == 1 and len(llm.rejected_requests) == 2


async def test_refuse_server_tools(llm: FakeLLM, client: openai.AsyncOpenAI) -> None:
    llm.refuse_server_tools = True
    search: Any = [{"type": "openrouter:web_search"}]
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(model=MODEL, messages=[user("x")], tools=search)
    message = "Tool type openrouter:web_search is not supported for this model"
    assert refused.value.status_code == 400 and message in refused.value.message
    assert llm.errors == [f"400: {message}"]
    assert llm.requests == [] and llm.rejected_requests[0]["tools"] == search

    # The plugin form and plain requests still work.
    reply = await client.chat.completions.create(
        model=MODEL, messages=[user("y")], extra_body={"plugins": [{"id": "web"}]}
    )
    assert reply.choices[0].message.content == "ANSWER: y" and len(llm.requests) == 1


async def test_reply_reports_another_model(llm: FakeLLM, client: openai.AsyncOpenAI) -> None:
    llm.script(Reply(content="routed", model="vendor/concrete-model"))
    routed = await client.chat.completions.create(model="openrouter/auto", messages=[user("x")])
    echoed = await client.chat.completions.create(model="openrouter/auto", messages=[user("x")])
    assert (routed.model, routed.choices[0].message.content) == ("vendor/concrete-model", "routed")
    assert echoed.model == "openrouter/auto"


async def test_sources_are_url_citations_plain_and_spread_over_a_stream(
    llm: FakeLLM, client: openai.AsyncOpenAI
) -> None:
    pages = [("https://a.example/", "A"), ("https://b.example/", "B"), ("https://c.example/", "")]
    text = "An answer long enough to be streamed in several pieces."
    llm.script(Reply(content=text, sources=pages), Reply(content=text, sources=pages))
    plain = await client.chat.completions.create(model=MODEL, messages=[user("x")])
    annotations = plain.choices[0].message.annotations or []
    cited = [(a.type, a.url_citation.url, a.url_citation.title) for a in annotations]
    assert cited == [("url_citation", url, title) for url, title in pages]
    assert annotations[0].url_citation.end_index == len(text)
    stream = await client.chat.completions.create(model=MODEL, messages=[user("x")], stream=True)
    carrying = []  # the chunks with annotations, and which
    async for chunk in stream:
        extra = chunk.choices[0].delta.model_extra if chunk.choices else None
        if extra and extra.get("annotations"):
            carrying.append([a["url_citation"]["url"] for a in extra["annotations"]])
    assert carrying == [[url] for url, _ in pages]  # each in a chunk of its own


async def test_search_sources_answer_a_request_that_offers_web_search(
    llm: FakeLLM, client: openai.AsyncOpenAI
) -> None:
    llm.search_sources = [("https://a.example/", "A")]
    search = await client.chat.completions.create(
        model=MODEL, messages=[user("x")], extra_body={"plugins": [{"id": "web"}]}
    )
    plain = await client.chat.completions.create(model=MODEL, messages=[user("x")])
    assert len(search.choices[0].message.annotations or []) == 1
    assert not plain.choices[0].message.annotations


# ---- files: getFile and downloads ------------------------------------------------------------


async def test_registered_files_download_through_aiogram(tg: FakeTelegram, bot: Bot) -> None:
    voice = tg.add_file(b"OggS voice bytes", "voice")
    assert voice["file_size"] == len(b"OggS voice bytes")
    file = await bot.get_file(voice["file_id"])
    assert file.file_path is not None and file.file_path.endswith(".oga")
    downloaded = await bot.download(voice["file_id"])
    assert downloaded is not None and downloaded.read() == b"OggS voice bytes"
    assert tg.files.downloads == [voice["file_id"]]


async def test_get_file_refuses_what_telegram_refuses(tg: FakeTelegram, bot: Bot) -> None:
    big = tg.add_file(b"\0" * (20 * 1024 * 1024 + 1), "document", "big.pdf")
    with pytest.raises(TelegramBadRequest, match="file is too big"):
        await bot.get_file(big["file_id"])
    with pytest.raises(TelegramBadRequest, match="invalid file_id"):
        await bot.get_file("no-such-file")
    # Exactly 20 MB is still allowed.
    limit = tg.add_file(b"\0" * (20 * 1024 * 1024), "document", "limit.bin")
    assert (await bot.get_file(limit["file_id"])).file_size == 20 * 1024 * 1024
    assert tg.files.downloads == []


async def test_downloads_need_the_token_and_a_known_path(tg: FakeTelegram) -> None:
    doc = tg.add_file(b"%PDF-1.4 ...", "document", "a.pdf")
    path = tg.files.get_file(doc["file_id"])["file_path"]
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{tg.base_url}/file/bot{TOKEN}/{path}") as ok:
            assert ok.status == 200 and await ok.read() == b"%PDF-1.4 ..."
        async with http.get(f"{tg.base_url}/file/bot1:WRONG/{path}") as wrong:
            assert wrong.status == 401
        async with http.get(f"{tg.base_url}/file/bot{TOKEN}/documents/nothing.pdf") as gone:
            assert gone.status == 404
    assert tg.files.downloads == [doc["file_id"]]


async def test_pushed_media_carry_downloadable_files(tg: FakeTelegram, bot: Bot) -> None:
    tg.push_voice(7, data=b"voice", duration=2)
    tg.push_video_note(7, b"round video")
    tg.push_document(7, b"a,b\n1,2\n", file_name="t.csv", mime_type="text/csv", caption="see")
    tg.push_photo(7, data=b"jpeg bytes", width=800, height=600)
    updates = await bot(GetUpdates(offset=0, timeout=0))
    voice, note, document, photo = (u.message for u in updates if u.message)
    assert voice.voice and voice.voice.duration == 2 and voice.voice.file_size == 5
    assert note.video_note and (await bot.download(note.video_note.file_id)).read() == (  # type: ignore[union-attr]
        b"round video"
    )
    assert document.document and document.document.file_name == "t.csv"
    assert document.document.mime_type == "text/csv" and document.caption == "see"
    assert photo.photo and (photo.photo[-1].width, photo.photo[-1].height) == (800, 600)
    assert (await bot.download(photo.photo[-1].file_id)).read() == b"jpeg bytes"  # type: ignore[union-attr]


# ---- the model list and speech-to-text -----------------------------------------------------


async def test_model_list_reports_input_modalities(
    llm: FakeLLM, client: openai.AsyncOpenAI
) -> None:
    llm.models = {"vision/model": ["text", "image"], "text/model": ["text"]}
    listed = await client.get("/models", cast_to=object)
    assert isinstance(listed, dict)
    modalities = {m["id"]: m["architecture"]["input_modalities"] for m in listed["data"]}
    assert modalities == {"vision/model": ["text", "image"], "text/model": ["text"]}
    llm.models_status = 503
    with pytest.raises(openai.InternalServerError):
        await client.get("/models", cast_to=object)
    assert llm.model_list_requests == 2


async def test_transcriptions_answer_text_and_usage(
    llm: FakeLLM, client: openai.AsyncOpenAI
) -> None:
    audio = {"data": base64.b64encode(b"12345").decode(), "format": "ogg"}
    body = {"model": "openai/whisper-1", "input_audio": audio}
    default = await client.post("/audio/transcriptions", body=body, cast_to=object)
    assert default == {"text": "TRANSCRIPT: 5 bytes of ogg", "usage": {"cost": 0.0001}}
    llm.script_transcription(
        Transcription(text="hello", cost=0.0005, seconds=9.2),
        Transcription(text="tokens", cost=0.0002, input_tokens=80, output_tokens=20),
        Transcription(status=429, error_message="slow down"),
    )
    by_time = await client.post("/audio/transcriptions", body=body, cast_to=object)
    assert by_time == {"text": "hello", "usage": {"cost": 0.0005, "seconds": 9.2}}
    by_tokens = await client.post("/audio/transcriptions", body=body, cast_to=object)
    assert by_tokens == {
        "text": "tokens",
        "usage": {"cost": 0.0002, "input_tokens": 80, "output_tokens": 20, "total_tokens": 100},
    }
    with pytest.raises(openai.RateLimitError):
        await client.post("/audio/transcriptions", body=body, cast_to=object)
    assert [r["input_audio"]["format"] for r in llm.transcription_requests] == ["ogg"] * 4


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"input_audio": {"data": "AAAA", "format": "ogg"}}, "model"),
        ({"model": "m"}, "input_audio"),
        ({"model": "m", "input_audio": {"data": "not base64!", "format": "ogg"}}, "base64"),
        (
            {"model": "m", "input_audio": {"data": "data:audio/ogg;base64,AA", "format": "ogg"}},
            "data URI",
        ),
        ({"model": "m", "input_audio": {"data": "AAAA", "format": "opus"}}, "format"),
    ],
)
async def test_transcriptions_validate_the_body(
    llm: FakeLLM, client: openai.AsyncOpenAI, body: dict[str, Any], problem: str
) -> None:
    with pytest.raises(openai.BadRequestError, match=problem):
        await client.post("/audio/transcriptions", body=body, cast_to=object)
    assert llm.transcription_requests == []


async def test_transcriptions_need_the_key(llm: FakeLLM) -> None:
    wrong = openai.AsyncOpenAI(base_url=llm.base_url, api_key="sk-wrong", max_retries=0)
    body = {"model": "m", "input_audio": {"data": "AAAA", "format": "ogg"}}
    try:
        with pytest.raises(openai.AuthenticationError):
            await wrong.post("/audio/transcriptions", body=body, cast_to=object)
    finally:
        await wrong.close()


async def test_a_replys_quote_must_be_in_the_replied_message(tg: FakeTelegram, bot: Bot) -> None:
    tg.push_text(7, "I fly to Lisbon on May 3rd.")
    [update] = await bot.get_updates()
    assert update.message is not None
    mid = update.message.message_id
    await bot.send_message(
        7, "ok", reply_parameters=ReplyParameters(message_id=mid, quote="May 3rd")
    )
    assert tg.messages_to(7)[-1].params["reply_parameters"]["quote"] == "May 3rd"
    for quote in ("May 4th", "x" * 1025):
        with pytest.raises(TelegramBadRequest, match="QUOTE_TEXT_INVALID"):
            await bot.send_message(
                7, "no", reply_parameters=ReplyParameters(message_id=mid, quote=quote)
            )
    assert [m.text for m in tg.messages_to(7)] == ["ok"]
