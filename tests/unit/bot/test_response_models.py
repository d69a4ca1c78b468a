"""aiogram reads every Bot API reply with a `Response[T]` model made per call, which pydantic
caches only weakly: one the bot does not hold is dropped by the next garbage collection and
made again at the next call (~1 ms for a poll's, more for a message's). The bot holds those
of its hot calls, the poll the intake makes (bot/updates.py) among them."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest
from aiogram.methods import SendMessage, TelegramMethod
from aiogram.methods.base import Response

from membot.bot.app import pin_response_models
from membot.bot.updates import RawUpdates


def reply_model(method: type[TelegramMethod[Any]]) -> type[Any]:
    # As aiogram's session asks for it: from inside a function (pydantic keeps a model asked
    # for at a module's top level in that module, which would hide a missing pin).
    return Response[method.__returning__]  # type: ignore[name-defined]


@pytest.mark.parametrize("method", [RawUpdates, SendMessage])
def test_the_reply_models_of_hot_calls_outlive_a_collection(
    method: type[TelegramMethod[Any]],
) -> None:
    pin_response_models()
    model = weakref.ref(reply_model(method))
    gc.collect()
    assert model() is not None and reply_model(method) is model()
