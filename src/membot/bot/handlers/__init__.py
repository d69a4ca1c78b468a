"""Routers, one per concern, built fresh for each dispatcher. Order matters."""

from aiogram import Router

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
    return [
        commands.build_router(),
        memory.build_router(),
        export.build_router(),
        consult.build_router(),
        chat_settings.build_router(),
        tasks.build_router(),
        imports.build_router(),
        forget.build_router(),
        chat.build_router(),
        edits.build_router(),
        voice.build_router(),
        files.build_router(),
        other.build_router(),
        guest.build_router(),
        errors.build_router(),
    ]
