"""Routers, one per concern, built fresh for each dispatcher. Order matters."""

from aiogram import Router

from membot.bot.filters import commands_only
from membot.bot.handlers import (
    chat,
    chat_settings,
    commands,
    consult,
    edits,
    errors,
    export,
    files,
    forget,
    guest,
    imports,
    memory,
    other,
    tasks,
    voice,
)


def build_routers() -> list[Router]:
    # Routers of commands only: a plain message passes each by with one check (commands_only).
    return [
        commands_only(commands.build_router()),
        commands_only(memory.build_router()),
        commands_only(export.build_router()),
        commands_only(consult.build_router()),
        commands_only(chat_settings.build_router()),
        commands_only(tasks.build_router()),
        imports.build_router(),  # an export's file, awaited: no command needed
        commands_only(forget.build_router()),
        chat.build_router(),
        edits.build_router(),
        voice.build_router(),
        files.build_router(),
        other.build_router(),
        guest.build_router(),
        errors.build_router(),
    ]
