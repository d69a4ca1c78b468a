"""Where the settings are read from: the environment, then `.env`, with one rule for both.

`NAME=` (empty, or only spaces) means "not set": the next source decides (an empty variable in
the environment leaves `.env`'s value), else the default. `.env.example` ships every optional
setting that way, and a settings model cannot tell an empty API_PORT from a wrong one.
pydantic-settings' own `env_ignore_empty` applies the rule to every variable; TOOLS is the
exception, whose empty value switches tools off (docs/operating.md), so the rule is applied
here, to what the two sources read, before any value is parsed."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

# Variables (lower case, as the sources key them) whose empty value means something.
EMPTY_IS_A_VALUE = frozenset({"tools"})


def _without_empty(values: Mapping[str, str | None]) -> dict[str, str | None]:
    return {
        name: value
        for name, value in values.items()
        if name in EMPTY_IS_A_VALUE or (value is not None and value.strip())
    }


class EnvSettings(BaseSettings):
    """A settings model read from the environment and `.env` under the empty-value rule:
    Settings, and the subsets operator commands read (`load_subset`)."""

    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        case_sensitive=False,
        # Secrets and prompts are user text: keep them byte-exact.
        str_strip_whitespace=False,
        # Three fields are named apart from their variable (STORAGE, QUEUE, TOOLS), whose
        # names are their groups' (`settings.storage`); keyword arguments take either name.
        populate_by_name=True,
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The dotenv source is an EnvSettingsSource too; both have read their variables.
        for source in (env_settings, dotenv_settings):
            if isinstance(source, EnvSettingsSource):
                source.env_vars = _without_empty(source.env_vars)
        return init_settings, env_settings, dotenv_settings, file_secret_settings
