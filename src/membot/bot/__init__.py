"""The Telegram side: aiogram wiring, handlers and rendering. Thin: the agent does the work."""
