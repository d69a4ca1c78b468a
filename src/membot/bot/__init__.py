"""The Telegram front door, in aiogram's idiom. Thin: the core does the work.

The app (app.py: Bot, Dispatcher, routers), its middlewares (middlewares.py: the allowlist,
the chat's context), the handlers (handlers/), a turn through Telegram (turns.py, sinks.py,
refusals.py, drafts.py), files users send (files.py), what is sent and how (render.py,
outbox.py; throttle.py under Telegram's limits, limits.py), the bot's own words (texts/),
and the Bot API calls the intake's sources make (updates.py)."""
