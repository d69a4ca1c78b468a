"""membot: an LLM assistant that remembers, reached through Telegram and an HTTP API. Its
packages, layer by layer: docs/architecture.md."""
