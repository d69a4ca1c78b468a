"""Everything the bot says on its own (not the model's words)."""

from __future__ import annotations

START = (
    "Hi! I'm membot, an assistant that remembers our conversation, even across restarts.\n"
    "Just write to me. /help lists what else I can do."
)
HELP = (
    "Write me anything and I'll answer, keeping the context of our chat.\n\n"
    "/summary - what I remember of our earlier conversation\n"
    "/memory - the facts you asked me to keep\n"
    "/reset - forget everything in this chat\n"
    "/help - this message\n\n"
    "In groups, mention me or reply to my message."
)
RESET_DONE = "Done: I've forgotten everything in this chat. Let's start over."
NO_SUMMARY = "There is no summary yet: I make one after every {every} messages."
SUMMARY = "Here is what I remember of our earlier conversation:\n\n{summary}"
NO_FACTS = (
    "I'm not keeping any facts for this chat yet. Ask me to remember something, "
    'e.g. "remember that I prefer short answers".'
)
FACTS = "Facts I keep for this chat:\n\n{facts}\n\nAsk me to forget any of them at any time."
TEXT_ONLY = "Sorry, I can only read text messages for now."
LLM_BUSY = "I'm getting too many requests right now. Please try again in a minute."
LLM_FAILED = "Sorry, I couldn't get an answer right now. Please try again."
INTERNAL_ERROR = "Sorry, something went wrong on my side. Please try again."

COMMANDS = [
    ("start", "Say hello"),
    ("help", "What I can do"),
    ("summary", "What I remember of our earlier chat"),
    ("memory", "Facts I keep for you"),
    ("reset", "Forget this chat"),
]
