"""The HTTP chat API (docs/api.md): a thin aiohttp front door to the conversation core.

`membot api` serves it alone; `membot run` serves it beside the bot when API_PORT is set.
The server is imported lazily by its callers (aiohttp's web module is not free to import).
"""
