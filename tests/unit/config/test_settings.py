"""Configuration: bad settings stop start-up with one clear line and exit code 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from membot.config import ConfigError, env_names, load_settings, masked

BASE_ENV = {
    "TELEGRAM_BOT_TOKEN": "123456:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef",
    "OPENROUTER_API_KEY": "sk-or-v1-0123456789abcdef0123456789abcdef",
}

BASE_ENV_FIELDS = {k.lower(): v for k, v in BASE_ENV.items()}


def run_membot(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    names = set(env_names())
    clean = {k: v for k, v in os.environ.items() if k.upper() not in names}
    clean.pop("PYTHONDONTWRITEBYTECODE", None)  # see tests/fakes/process.py: membot_env
    clean.update(env)
    return subprocess.run(
        [sys.executable, "-m", "membot", *args],
        cwd=tmp_path,  # no .env there
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("env", "variable", "words"),
    [
        ({"OPENROUTER_API_KEY": "k"}, "TELEGRAM_BOT_TOKEN", "required"),
        ({"TELEGRAM_BOT_TOKEN": "1:t"}, "OPENROUTER_API_KEY", "required"),
        ({**BASE_ENV, "TELEGRAM_BOT_TOKEN": "my token"}, "TELEGRAM_BOT_TOKEN", "@BotFather"),
        ({**BASE_ENV, "WINDOW_SIZE": "twenty"}, "WINDOW_SIZE", "integer"),
        ({**BASE_ENV, "WINDOW_SIZE": "0"}, "WINDOW_SIZE", "greater than or equal to 1"),
        ({**BASE_ENV, "LLM_TIMEOUT": "-1"}, "LLM_TIMEOUT", "greater than 0"),
        ({**BASE_ENV, "ALLOWED_USER_IDS": "12,abc"}, "ALLOWED_USER_IDS", "integer user ids"),
        ({**BASE_ENV, "ENABLE_RETRY": "perhaps"}, "ENABLE_RETRY", "boolean"),
        ({**BASE_ENV, "OPENROUTER_BASE_URL": "ftp://x"}, "OPENROUTER_BASE_URL", "http"),
        ({**BASE_ENV, "LOG_LEVEL": "LOUD"}, "LOG_LEVEL", "DEBUG"),
        ({**BASE_ENV, "MAX_ROUNDS": "0"}, "MAX_ROUNDS", "greater than or equal to 1"),
        ({**BASE_ENV, "CONSULT_ROUNDS": "5", "MAX_ROUNDS": "4"}, "CONSULT_ROUNDS", "MAX_ROUNDS"),
        ({**BASE_ENV, "API_PORT": "http"}, "API_PORT", "integer"),
        ({**BASE_ENV, "API_PORT": "8080"}, "API_TOKENS", "required"),
        ({**BASE_ENV, "API_TOKENS": "short"}, "API_TOKENS", "16 characters"),
        ({**BASE_ENV, "SESSION_TTL": "-1"}, "SESSION_TTL", "greater than 0"),
        ({**BASE_ENV, "WEB_SEARCH": "sometimes"}, "WEB_SEARCH", "boolean"),
    ],
)
def test_bad_setting_exits_2_naming_the_variable(
    tmp_path: Path, env: dict[str, str], variable: str, words: str
) -> None:
    result = run_membot(tmp_path, env, "check-config")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert variable in lines[0] and words in lines[0]


def test_run_refuses_to_start_without_a_token(tmp_path: Path) -> None:
    result = run_membot(tmp_path, {"OPENROUTER_API_KEY": "k"}, "run")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "membot: configuration error: TELEGRAM_BOT_TOKEN is required but not set"
    )


def test_api_alone_needs_no_telegram_token_but_its_own_tokens(tmp_path: Path) -> None:
    result = run_membot(tmp_path, {"OPENROUTER_API_KEY": "k"}, "api")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert "API_TOKENS is required" in line and "TELEGRAM_BOT_TOKEN" not in line


def test_api_tokens_are_trimmed_and_masked(tmp_path: Path) -> None:
    token = "tok-0123456789abcdef"
    settings = load_settings(
        _env_file=None,
        telegram=False,
        api=True,
        openrouter_api_key="k",
        api_tokens=f" {token} , other-token-0123456789 ",
    )
    assert [t.get_secret_value() for t in settings.api_tokens] == [
        token,
        "other-token-0123456789",
    ]
    env = {**BASE_ENV, "API_PORT": "8099", "API_TOKENS": token}
    result = run_membot(tmp_path, env, "check-config")
    assert result.returncode == 0, result.stderr
    assert "API_TOKENS=(1 token(s))" in result.stdout and token not in result.stdout


def test_check_config_prints_settings_with_secrets_masked(tmp_path: Path) -> None:
    env = {**BASE_ENV, "ALLOWED_USER_IDS": "7, 3", "WINDOW_SIZE": "8"}
    result = run_membot(tmp_path, env, "check-config")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "WINDOW_SIZE=8" in out and "ALLOWED_USER_IDS=3,7" in out
    assert "OPENROUTER_MODEL=(not set: openrouter/auto)" in out
    assert BASE_ENV["TELEGRAM_BOT_TOKEN"] not in out
    assert BASE_ENV["OPENROUTER_API_KEY"] not in out


def test_env_file_is_read(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(
        "TELEGRAM_BOT_TOKEN=1:from-file\nOPENROUTER_API_KEY=key-from-file\nSUMMARY_EVERY=30\n"
    )
    result = run_membot(tmp_path, {}, "check-config")
    assert result.returncode == 0, result.stderr
    assert "SUMMARY_EVERY=30" in result.stdout


def test_defaults() -> None:
    settings = load_settings(_env_file=None, **{k.lower(): v for k, v in BASE_ENV.items()})
    assert settings.default_model == "openrouter/auto"
    assert settings.window_size == 20 and settings.summary_every == 20
    assert settings.allowed_user_ids == frozenset()
    assert settings.enable_retry is False


def test_load_settings_raises_one_line() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(
            _env_file=None, telegram_bot_token="1:t", openrouter_api_key="k", window_size=-3
        )
    assert "WINDOW_SIZE" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("overrides", "variable", "words"),
    [
        ({"tool_mode": "xml"}, "TOOL_MODE", "native"),
        ({"tool_max_iterations": "0"}, "TOOL_MAX_ITERATIONS", "greater than"),
        ({"tool_timeout": "soon"}, "TOOL_TIMEOUT", "number"),
        ({"tool_result_chars": "100"}, "TOOL_RESULT_CHARS", "greater than"),
        ({"tools": "calculate,rm_rf"}, "TOOLS", "unknown tool(s) rm_rf"),
    ],
)
def test_bad_tool_settings_name_the_variable(
    overrides: dict[str, str], variable: str, words: str
) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(_env_file=None, telegram_bot_token="1:t", openrouter_api_key="k", **overrides)
    assert variable in str(err.value) and words in str(err.value)
    assert "\n" not in str(err.value)


def test_tools_setting_picks_builtins_and_empty_means_none() -> None:
    from membot.tool_names import BUILTIN_TOOL_NAMES

    base = {"telegram_bot_token": "1:t", "openrouter_api_key": "k", "_env_file": None}
    assert load_settings(**base).enabled_tools == BUILTIN_TOOL_NAMES
    assert load_settings(**base, tools=" calculate , remember ").enabled_tools == (
        "calculate",
        "remember",
    )
    assert load_settings(**base, tools="").enabled_tools == ()
    assert load_settings(**base, tool_mode="HERMES").tool_mode == "hermes"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"queue": "redis"}, "QUEUE is invalid: QUEUE=redis needs STORAGE=redis"),
        ({"telegram_mode": "webhook"}, "WEBHOOK_URL is required when TELEGRAM_MODE=webhook"),
        (
            {"telegram_mode": "webhook", "webhook_url": "https://bot.example/tg"},
            "WEBHOOK_SECRET is required when TELEGRAM_MODE=webhook",
        ),
        ({"webhook_secret": "not secret!"}, "WEBHOOK_SECRET is invalid: must be 1-256"),
        ({"webhook_url": "bot.example/tg"}, "WEBHOOK_URL is invalid: must be the public"),
        ({"telegram_mode": "push"}, "TELEGRAM_MODE is invalid"),
        ({"claim_idle": "0"}, "CLAIM_IDLE is invalid"),
        ({"queue_shards": "0"}, "QUEUE_SHARDS is invalid"),
    ],
)
def test_scale_out_settings_are_checked_together(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(_env_file=None, **BASE_ENV_FIELDS, **overrides)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_webhook_settings_give_the_path_to_listen_at() -> None:
    settings = load_settings(
        _env_file=None,
        **BASE_ENV_FIELDS,
        storage="redis",
        queue="REDIS",
        telegram_mode="Webhook",
        webhook_url="https://bot.example/tg/hook?x=1",
        webhook_secret="s3cret_-value",
    )
    assert (settings.queue.backend, settings.telegram_mode) == ("redis", "webhook")
    assert settings.telegram.webhook_path == "/tg/hook"
    assert "s3cret" not in masked(settings)["WEBHOOK_SECRET"]


def test_worker_and_receive_need_the_redis_stream(tmp_path: Path) -> None:
    result = run_membot(tmp_path, BASE_ENV, "worker")
    assert result.returncode == 2
    assert result.stderr.strip() == "membot: QUEUE is invalid: `membot worker` needs QUEUE=redis"


def _check_config_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout.splitlines()


# Every setting but the secrets and TOOLS, whose empty value switches tools off.
OPTIONAL = sorted(set(env_names()) - set(BASE_ENV) - {"TOOLS"})


def test_an_empty_value_means_not_set_in_the_environment(tmp_path: Path) -> None:
    defaults = _check_config_lines(run_membot(tmp_path, BASE_ENV, "check-config"))
    empty = {**BASE_ENV, **dict.fromkeys(OPTIONAL, "")}
    assert _check_config_lines(run_membot(tmp_path, empty, "check-config")) == defaults


def test_an_empty_value_means_not_set_in_the_env_file(tmp_path: Path) -> None:
    defaults = _check_config_lines(run_membot(tmp_path, BASE_ENV, "check-config"))
    (tmp_path / ".env").write_text("".join(f"{name}=\n" for name in OPTIONAL))
    assert _check_config_lines(run_membot(tmp_path, BASE_ENV, "check-config")) == defaults


def test_an_empty_variable_in_the_environment_leaves_the_env_files_value(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("WINDOW_SIZE=8\nAPI_HOST=0.0.0.0\n")
    env = {**BASE_ENV, "WINDOW_SIZE": "", "API_HOST": ""}
    lines = _check_config_lines(run_membot(tmp_path, env, "check-config"))
    assert "WINDOW_SIZE=8" in lines and "API_HOST=0.0.0.0" in lines


def test_an_empty_tools_value_still_switches_tools_off(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("TOOLS=calculate\n")
    lines = _check_config_lines(run_membot(tmp_path, {**BASE_ENV, "TOOLS": ""}, "check-config"))
    assert "TOOLS=(none)" in lines


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"TELEGRAM_BOT_TOKEN": "", "OPENROUTER_API_KEY": ""},
            "TELEGRAM_BOT_TOKEN and OPENROUTER_API_KEY are required but not set",
        ),
        (
            {**BASE_ENV, "OPENROUTER_API_KEY": ""},
            "OPENROUTER_API_KEY is required but not set",
        ),
        (
            {**BASE_ENV, "TELEGRAM_BOT_TOKEN": ""},
            "TELEGRAM_BOT_TOKEN is required but not set",
        ),
        (
            {"TELEGRAM_BOT_TOKEN": "", "OPENROUTER_API_KEY": "", "WINDOW_SIZE": "0"},
            "TELEGRAM_BOT_TOKEN and OPENROUTER_API_KEY are required but not set; "
            "WINDOW_SIZE is invalid: Input should be greater than or equal to 1",
        ),
    ],
)
def test_empty_secrets_are_named_as_not_set(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    result = run_membot(tmp_path, env, "check-config")
    assert result.returncode == 2
    assert result.stderr == f"membot: configuration error: {message}\n"


def test_check_config_says_who_an_empty_user_list_means(tmp_path: Path) -> None:
    lines = _check_config_lines(run_membot(tmp_path, BASE_ENV, "check-config"))
    # docs/operating.md: an empty allowlist lets everyone in; no admins means nobody exempt.
    assert "ALLOWED_USER_IDS=(everyone)" in lines
    assert "ADMIN_USER_IDS=(nobody)" in lines
