"""`membot mcp`: one conversation's memory as an MCP server, over stdio or Streamable HTTP.

It opens the storage the bot uses (STORAGE: DATA_DIR's files or Redis) and needs no Telegram
or OpenRouter token; it runs beside a running bot. The conversation is fixed by the command
line and checked to exist before the server starts: no call can reach another one.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

from membot.config import ConfigError, load_subset, setup_logging
from membot.errors import StorageUnavailable
from membot.ids import TELEGRAM, V1, ConversationId, InvalidConversationId
from membot.memory import ChatRepository, FileRepository
from membot.private import exposed
from membot.search.cli import open_repository
from membot.search.index import HistorySearch
from membot.serve.desk import MemoryDesk
from membot.serve.server import build_server, with_bearer

log = logging.getLogger(__name__)

_FIELDS = (
    "storage",
    "data_dir",
    "redis_url",
    "redis_prefix",
    "search_budget_tokens",
    "api_tokens",
    "log_level",
)


def run_mcp(
    *,
    chat: str | None,
    session: str | None,
    http: str | None,
    data_dir: Path | None,
    user: str | None = None,
) -> int:
    """Serve until the client goes (stdio) or the process is stopped (HTTP); the exit
    status for the shell."""
    try:
        cid = _conversation(chat, session, user)
        address = _address(http) if http is not None else None
        values = load_subset(*_FIELDS)
    except (ValueError, ConfigError) as exc:
        return _fail(str(exc))
    tokens = [t.get_secret_value() for t in values["api_tokens"]]
    if address is not None and not tokens:
        return _fail("--http needs API_TOKENS: every request must carry one as its bearer token")
    # Logs on stderr: over stdio, stdout carries the protocol and nothing else.
    setup_logging(values["log_level"])
    root = data_dir if data_dir is not None else values["data_dir"]
    warning = exposed(root)
    if warning is not None:
        log.warning("%s", warning)
    try:
        return asyncio.run(_serve(values, root, cid, address, tokens))
    except StorageUnavailable as exc:
        return _fail(f"the storage cannot be reached ({type(exc.__cause__ or exc).__name__})")


def _conversation(chat: str | None, session: str | None, user: str | None) -> ConversationId:
    if sum(x is not None for x in (chat, session, user)) != 1:
        raise ValueError("name one conversation: --chat CHAT_ID, --session SESSION_ID or --user ID")
    if chat is not None:
        try:
            return ConversationId.telegram(int(chat.strip()))
        except (ValueError, InvalidConversationId):
            problem = f"--chat must be a Telegram chat id (an integer), not {chat!r}"
            raise ValueError(problem) from None
    if user is not None:
        if not user.strip():
            raise ValueError("--user must name the /v1 endpoint's user, not be empty")
        # The /v1 endpoint keys a caller by the digest of its `user` (or Open WebUI's header).
        return ConversationId.v1_user(user.strip())
    try:
        return ConversationId.api(str(session))
    except InvalidConversationId:
        raise ValueError(f"--session must be an API session id (a UUID), not {session!r}") from None


def _address(http: str) -> tuple[str, int]:
    host, _, port = http.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--http must be HOST:PORT, such as 127.0.0.1:8765, not {http!r}")
    return host.strip("[]"), int(port)


async def _serve(
    values: dict[str, Any],
    root: Path,
    cid: ConversationId,
    address: tuple[str, int] | None,
    tokens: list[str],
) -> int:
    repository = open_repository(values, root)
    try:
        if not await _exists(repository, cid):
            shown = cid.key if cid.namespace == TELEGRAM else str(cid)
            if cid.namespace == V1:
                shown = "of that /v1 user"
            return _fail(f"no conversation {shown} in the storage (STORAGE, DATA_DIR)")
        desk = MemoryDesk(
            repository,
            HistorySearch(repository, root),
            cid,
            budget_tokens=values["search_budget_tokens"],
        )
        server = build_server(desk)
        if address is None:
            await server.run_stdio_async()
        else:
            await _serve_http(
                with_bearer(server.streamable_http_app(host=address[0]), tokens), *address
            )
        return 0
    finally:
        await repository.close()


async def _exists(repository: ChatRepository, cid: ConversationId) -> bool:
    # Checked before HistorySearch sees the chat: it drops the index of an empty archive,
    # and a server started with the wrong storage must not delete the bot's index.
    if isinstance(repository, FileRepository) and not repository.conversation_dir(cid).is_dir():
        return False
    meta = await repository.get_meta(cid)
    return meta.messages_total > 0 or bool(await repository.get_facts(cid))


async def _serve_http(app: Any, host: str, port: int) -> None:
    import uvicorn  # the MCP SDK's own HTTP server; only this path needs it

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
    await uvicorn.Server(config).serve()


def _fail(line: str) -> int:
    print(f"membot mcp: {line}", file=sys.stderr)
    return 2
