"""Files over Telegram, end to end: groups (a voice only when it replies to the bot,
a photo when its caption mentions the bot), albums (one turn, one answer), a text-only
model, and the allowlist and budgets before any download."""

from __future__ import annotations

from pathlib import Path

import pytest

from membot.bot import texts
from tests.conftest import StartBot
from tests.e2e.helpers import stored
from tests.e2e.test_conversation import say
from tests.e2e.test_media_telegram import CHAT, TEXT_ONLY, VISION, images_sent, last_user_text
from tests.fakes import BOT_USERNAME, FakeLLM, FakeTelegram, media_files, utf16_len

NOT_ALLOWED = texts.EN.NOT_ALLOWED
GROUP = -500
BOB = {"user_id": 501, "first_name": "Bob"}
MENTION = [{"type": "mention", "offset": 0, "length": utf16_len(f"@{BOT_USERNAME}")}]


@pytest.fixture
async def bot(tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot) -> None:
    llm.models = {VISION: ["text", "image"], TEXT_ONLY: ["text"]}
    await start_bot(openrouter_model=VISION, models=f"{VISION},{TEXT_ONLY}")


@pytest.mark.usefixtures("bot")
async def test_in_a_group_only_a_voice_replying_to_the_bot_is_heard(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path
) -> None:
    llm.script_transcription("what about tomorrow?")
    # Not addressed: a voice, a video note, a photo without a mention. Never downloaded.
    tg.push_voice(GROUP, data=media_files.ogg_voice(1.0), duration=1, **BOB)
    tg.push_video_note(GROUP, media_files.video_note(1.0), duration=1, **BOB)
    tg.push_photo(GROUP, data=media_files.jpeg(64, 64), caption="look", **BOB)
    tg.push_voice(GROUP, data=media_files.ogg_voice(1.0), duration=1, reply_to_bot=True, **BOB)
    [answer] = await tg.wait_for_messages(GROUP, 1)
    assert answer.text.startswith("what about tomorrow?\n\nANSWER: Bob: ")
    assert tg.call_count("getFile") == 1 and len(tg.files.downloads) == 1
    assert len(llm.transcription_requests) == 1
    [user, _] = stored(data_dir, GROUP)
    assert answer.reply_to_message_id == user["tg_message_id"]


@pytest.mark.usefixtures("bot")
async def test_in_a_group_a_photo_whose_caption_mentions_the_bot_is_seen(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path
) -> None:
    photo = media_files.jpeg(64, 64)
    tg.push_photo(
        GROUP, data=photo, caption=f"@{BOT_USERNAME} what is it?", caption_entities=MENTION, **BOB
    )
    [answer] = await tg.wait_for_messages(GROUP, 1)
    assert answer.text.startswith("ANSWER: ")
    assert images_sent(llm.chat_requests[-1]) == [photo]
    assert "what is it?" in last_user_text(llm.chat_requests[-1])
    assert f"@{BOT_USERNAME}" not in stored(data_dir, GROUP)[0]["content"]


@pytest.mark.usefixtures("bot")
async def test_an_album_is_one_turn_with_one_answer(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path
) -> None:
    photos = [media_files.jpeg(64 + i, 64) for i in range(3)]
    tg.push_photo(CHAT, data=photos[0], caption="compare these", media_group_id="alb1")
    for photo in photos[1:]:
        tg.push_photo(CHAT, data=photo, media_group_id="alb1")
    # What the chat sends next waits for the album's answer.
    tg.push_text(CHAT, "thanks")
    sent = await tg.wait_for_messages(CHAT, 2)
    assert [m.text.startswith("ANSWER: ") for m in sent] == [True, True]
    album, thanks = llm.chat_requests
    assert images_sent(album) == photos
    assert "compare these" in last_user_text(album)
    assert images_sent(thanks) == photos  # still in view
    users = [m for m in stored(data_dir, CHAT) if m["role"] == "user"]
    assert [len(m.get("attachments", [])) for m in users] == [3, 0]
    assert len(tg.messages_to(CHAT)) == 2


async def test_a_text_only_model_gets_no_image_and_the_user_is_told_which_can(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    llm.models = {VISION: ["text", "image"], TEXT_ONLY: ["text"]}
    await start_bot(openrouter_model=TEXT_ONLY, models=f"{TEXT_ONLY},{VISION}")
    tg.push_photo(CHAT, data=media_files.jpeg(64, 64), caption="what is it?")
    [answer] = await tg.wait_for_messages(CHAT, 1)
    assert answer.text == texts.EN.NO_IMAGES.format(model=TEXT_ONLY, models=VISION)
    assert llm.chat_requests == []
    assert stored(data_dir, CHAT) == []
    assert await say(tg, CHAT, "ok, in words then") == "ANSWER: ok, in words then"


async def test_a_refused_users_file_is_never_fetched(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(allowed_user_ids=frozenset({1}))
    tg.push_voice(CHAT, data=media_files.ogg_voice(1.0), duration=1)
    tg.push_photo(CHAT, data=media_files.jpeg(64, 64))
    tg.push_document(CHAT, b"secret", file_name="a.txt", mime_type="text/plain")
    sent = await tg.wait_for_messages(CHAT, 3)
    assert [m.text for m in sent] == [NOT_ALLOWED] * 3
    assert tg.call_count("getFile") == 0 and tg.files.downloads == []
    assert llm.transcription_requests == [] and llm.chat_requests == []
    assert not (data_dir / str(CHAT)).exists()


async def test_a_user_over_the_rate_limit_gets_no_download(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(user_rate_limit="1")
    assert await say(tg, CHAT, "one") == "ANSWER: one"
    tg.push_voice(CHAT, data=media_files.ogg_voice(1.0), duration=1)
    [_, refused] = await tg.wait_for_messages(CHAT, 2)
    assert refused.text.startswith("Too many messages")
    assert tg.call_count("getFile") == 0 and llm.transcription_requests == []
