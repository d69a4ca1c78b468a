"""The one root of membot's own exceptions, and the two families every layer shares.

    MembotError                     anything membot raises on purpose
    ├── ConfigError                 a setting is missing or invalid (exit 2, one line)
    │   └── QueueMismatch           the Redis stream was made with another shard count
    ├── InvalidConversationId       an id that no path or key may be made from (ValueError)
    ├── InvalidFileKey              a conversation file's key not made by membot (ValueError)
    ├── CorruptRecord               a stored line that cannot be read back (ValueError)
    ├── BadPeriod                   a search's since/until that is not a date (ValueError)
    ├── BadSchedule                 a task's time, zone or repeat rule refused (ValueError)
    ├── InvalidTaskId               a task id not made by membot (ValueError)
    ├── Busy                        what the call needs is held by someone else: try again soon
    │   ├── ConversationBusy        another turn holds the conversation, in this process or
    │   │                           another (an API session's: 409)
    │   ├── Stale                   an export's conversation was forgotten from meanwhile
    │   ├── DraftSkipped            a draft not sent: the sending budget has none to spare
    │   └── SourceConflict          another process polls this bot (Telegram's 409)
    ├── Unavailable                 a server membot needs cannot be reached now
    │   ├── StorageUnavailable      the storage (Redis) did not answer (the API: 503, with
    │   │   │                       QUEUE=redis the update is tried again)
    │   │   └── StorageRefused      it answered with an error (out of memory, read-only)
    │   ├── IntakeUnavailable       an update cannot be kept now (Telegram sends it again)
    │   ├── SourceUnavailable       Telegram could not be reached: poll again later
    │   └── LLMUnavailable          the model provider is down (also an LLMError)
    ├── LLMError                    the model could not give an answer (llm/errors.py has its tree)
    ├── MediaError                  a file a user sent cannot be used (media/errors.py has its tree;
    │                               core/media.py's ModelSeesNoImages: a text-only model)
    ├── ToolError                   a tool failed: its message goes back to the model, not the user
    │   └── CalcError               an expression the calculator refuses
    ├── SessionError                an API request that cannot go on (core/sessions.py)
    ├── OverLimit                   a budget or the rate limit refuses the turn
    ├── ApiError                    an HTTP request answered with a JSON error and a stable code
    ├── V1Error                     a /v1 request answered in OpenAI's error shape
    └── NotHolder                   a worker's shard has another holder now (scale-out)

`Busy` and `Unavailable` are what front doors translate: one class travels from where it is
raised to the front door, which catches the family (the HTTP API answers 409 SESSION_BUSY
and 503 SERVICE_UNAVAILABLE; with QUEUE=redis the Telegram side leaves the update to be
tried again). A class may sit in a family and in its package's own branch at once
(`LLMUnavailable` is an `LLMError` and `Unavailable`: the API answers it 502 LLM_UNAVAILABLE).

None of these carries message text, file contents or secrets in `str()`: all are safe to log.
"""

from __future__ import annotations


class MembotError(Exception):
    """The root: anything membot raises on purpose derives from it."""


class Busy(MembotError):
    """Something holds what the call needs (a conversation's turn, a session's round): the
    caller may try again in a moment. Nothing was done."""


class Unavailable(MembotError):
    """A server membot needs (Redis, the model provider) cannot be reached now. Nothing was
    stored half-way; the caller may try again later."""


class ConversationBusy(Busy):
    """Another turn of the conversation is in progress, in this process or another, and the
    caller would not wait (core/service.py `exclusive`). Front doors answer it as busy."""


class StorageUnavailable(Unavailable):
    """The storage's server did not answer (Redis refused, cut or timed out): the one way a
    backend says so, whatever its client raised (membot/redis/errors.py translates it, the
    cause kept). Nothing was stored half-way. The resilient repository answers without it;
    other callers refuse the request (HTTP 503) or leave the update to be tried again."""


class StorageRefused(StorageUnavailable):
    """The storage's server answered with an error (out of memory, read-only, a script's
    error): unavailable for this call too, but sending the same call again is refused again,
    so a change replayed from the spool is set aside rather than retried."""


# What reading a damaged stored record raises: besides ValueError and wrong shapes, a number
# JSON reads as infinite (1e400) made an int, and nesting past the parser's recursion limit.
UNREADABLE = (ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError)
