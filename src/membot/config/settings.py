"""Settings: read once from the environment and `.env`, validated, passed down in groups.

One flat model, one `.env`: field names map 1:1 to environment variables (upper case). The
fields and their checks are fields.py's, the values' parsing types.py's; modules take the
group they need (`settings.telegram`, `settings.llm`, ..., groups.py), not the whole of it."""

from __future__ import annotations

from membot.config.fields import DEFAULT_SYSTEM_PROMPT, Fields
from membot.config.groups import (
    ApiSettings,
    ConversationSettings,
    LimitSettings,
    LlmSettings,
    LoggingSettings,
    McpSettings,
    MediaSettings,
    QueueSettings,
    RedisSettings,
    StorageSettings,
    TaskSettings,
    TelegramSettings,
    ToolSettings,
)

__all__ = ["DEFAULT_SYSTEM_PROMPT", "Settings"]


class Settings(Fields):
    """Every knob of membot (fields.py), and the groups modules are handed."""

    # -- the groups (groups.py) ---------------------------------------------------------------

    @property
    def telegram(self) -> TelegramSettings:
        return TelegramSettings(
            token=self.telegram_bot_token,
            api_base=self.telegram_api_base,
            mode=self.telegram_mode,
            webhook_url=self.webhook_url,
            webhook_secret=self.webhook_secret,
            webhook_host=self.webhook_host,
            webhook_port=self.webhook_port,
            chat_rate=self.telegram_chat_rate,
            chat_burst=self.telegram_chat_burst,
            group_rate=self.telegram_group_rate,
            bot_rate=self.telegram_bot_rate,
            streaming=self.streaming,
            guest_deadline=self.guest_deadline,
            export_part_mb=self.export_part_mb,
        )

    @property
    def llm(self) -> LlmSettings:
        return LlmSettings(
            api_key=self.openrouter_api_key,
            base_url=self.openrouter_base_url,
            default_model=self.default_model,
            models=self.models,
            model_choices=self.model_choices,
            timeout=self.llm_timeout,
            enable_retry=self.enable_retry,
            web_search=self.web_search,
        )

    @property
    def storage(self) -> StorageSettings:
        return StorageSettings(backend=self.storage_backend, data_dir=self.data_dir)

    @property
    def redis(self) -> RedisSettings:
        return RedisSettings(
            url=self.redis_url,
            prefix=self.redis_prefix,
            max_messages=self.redis_max_messages,
            conversation_ttl=self.conversation_ttl,
        )

    @property
    def api(self) -> ApiSettings:
        return ApiSettings(
            host=self.api_host,
            port=self.api_port,
            tokens=self.api_tokens,
            session_ttl=self.session_ttl,
            max_message_chars=self.api_max_message_chars,
        )

    @property
    def queue(self) -> QueueSettings:
        return QueueSettings(
            backend=self.queue_backend,
            claim_idle=self.claim_idle,
            shards=self.queue_shards,
            worker_concurrency=self.worker_concurrency,
        )

    @property
    def limits(self) -> LimitSettings:
        return LimitSettings(
            allowed_user_ids=self.allowed_user_ids,
            admin_user_ids=self.admin_user_ids,
            user_daily_budget=self.user_daily_budget,
            user_monthly_budget=self.user_monthly_budget,
            user_rate_limit=self.user_rate_limit,
        )

    @property
    def tools(self) -> ToolSettings:
        return ToolSettings(
            mode=self.tool_mode,
            max_iterations=self.tool_max_iterations,
            timeout=self.tool_timeout,
            enabled=self.enabled_tools,
            search_budget_tokens=self.search_budget_tokens,
            result_chars=self.tool_result_chars,
        )

    @property
    def conversation(self) -> ConversationSettings:
        return ConversationSettings(
            window_size=self.window_size,
            summary_every=self.summary_every,
            summary_language=self.summary_language,
            system_prompt=self.system_prompt,
            consult_rounds=self.consult_rounds,
            max_rounds=self.max_rounds,
        )

    @property
    def media(self) -> MediaSettings:
        return MediaSettings(
            transcription_model=self.transcription_model,
            max_audio_seconds=self.max_audio_seconds,
            max_images_in_prompt=self.max_images_in_prompt,
            document_prompt_chars=self.document_prompt_chars,
            pdf_timeout=self.media_pdf_timeout,
            pdf_memory_mb=self.media_pdf_memory_mb,
            pdf_processes=self.media_pdf_processes,
            max_pixels=self.media_max_pixels,
            image_decodes=self.media_image_decodes,
            import_max_mb=self.import_max_mb,
        )

    @property
    def tasks(self) -> TaskSettings:
        return TaskSettings(
            enabled=self.tasks_enabled,
            timezone=self.timezone,
            min_interval=self.tasks_min_interval,
            max_per_chat=self.tasks_max_per_chat,
            grace=float(self.tasks_grace),
        )

    @property
    def mcp(self) -> McpSettings:
        return McpSettings(
            config=self.mcp_config,
            servers=self.mcp_servers,
            public=frozenset(self.mcp_public),
            tool_timeout=self.mcp_tool_timeout,
        )

    @property
    def logging(self) -> LoggingSettings:
        return LoggingSettings(level=self.log_level)
