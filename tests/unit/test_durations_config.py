"""CLI durations, settings (arguments > environment > TOML > defaults) and database
URL validation (no database is opened)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from ductline import ConfigurationError
from ductline.config import Settings, load_settings
from ductline.durations import parse_cli_duration
from ductline.store import DEFAULT_URL, open_store

# -- parse_cli_duration --------------------------------------------------------------


@pytest.mark.parametrize("text,seconds", [
    ("30s", 30), ("5m", 300), ("2h", 7200), ("1d", 86400), ("45", 45), ("0", 0), ("0s", 0),
    ("90m", 5400), ("5M", 300), (" 10s ", 10), ("007", 7),
])
def test_parse_cli_duration(text: str, seconds: int) -> None:
    assert parse_cli_duration(text, field="--delay") == seconds


@pytest.mark.parametrize("text", ["1.5m", "-3", "abc", "", "   ", "s", "5x", "5 m", "1h30m", "+5", "1e3",
                                  "5ms", "--5"])
def test_parse_cli_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=r"^--timeout: expected whole seconds or a number with s/m/h/d") as info:
        parse_cli_duration(text, field="--timeout")
    assert repr(text) in str(info.value)


def test_parse_cli_duration_superscript_digit_gets_the_clear_message() -> None:
    with pytest.raises(ValueError, match=r"^--timeout: expected whole seconds"):
        parse_cli_duration("²", field="--timeout")


# -- settings ------------------------------------------------------------------------

ENV_NAMES = ["DUCTLINE_DATABASE_URL", "DUCTLINE_LEASE_SECONDS", "DUCTLINE_RETRY_DELAY",
             "DUCTLINE_HEALTH_CHECK_INTERVAL", "DUCTLINE_KILL_GRACE_SECONDS", "DUCTLINE_POLL_INTERVAL",
             "DUCTLINE_SHUTDOWN_GRACE_SECONDS", "DUCTLINE_CONFIG"]


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No DUCTLINE_* variable and an empty working directory."""
    for name in list(os.environ):
        if name.startswith("DUCTLINE_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write_toml(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults() -> None:
    s = load_settings()
    assert s == Settings()
    assert s.database_url == "sqlite:///ductline.db" == DEFAULT_URL
    assert s.lease_seconds == 30.0
    assert s.retry_delay == 10
    assert s.health_check_interval == 5.0
    assert s.kill_grace_seconds == 1.0
    assert s.poll_interval == 1.0
    assert s.shutdown_grace_seconds == 30.0
    assert s.lease_ms == 30_000


def test_toml_file_in_working_directory(isolated: Path) -> None:
    write_toml(isolated / "ductline.toml",
               'database_url = "sqlite:///from_toml.db"\nlease_seconds = 12\nretry_delay = 4\n'
               "poll_interval = 0.25\n")
    s = load_settings()
    assert s.database_url == "sqlite:///from_toml.db"
    assert s.lease_seconds == 12.0 and type(s.lease_seconds) is float
    assert s.retry_delay == 4 and type(s.retry_delay) is int
    assert s.poll_interval == 0.25
    assert s.kill_grace_seconds == 1.0  # untouched default


def test_env_overrides_toml(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_toml(isolated / "ductline.toml", 'database_url = "sqlite:///from_toml.db"\nretry_delay = 4\n')
    monkeypatch.setenv("DUCTLINE_DATABASE_URL", "sqlite:///from_env.db")
    monkeypatch.setenv("DUCTLINE_RETRY_DELAY", "7")
    s = load_settings()
    assert s.database_url == "sqlite:///from_env.db"
    assert s.retry_delay == 7


def test_arguments_override_env_and_toml(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_toml(isolated / "ductline.toml", 'database_url = "sqlite:///from_toml.db"\nlease_seconds = 12\n')
    monkeypatch.setenv("DUCTLINE_DATABASE_URL", "sqlite:///from_env.db")
    monkeypatch.setenv("DUCTLINE_LEASE_SECONDS", "20")
    s = load_settings(database_url="sqlite:///from_arg.db", lease_seconds=3)
    assert s.database_url == "sqlite:///from_arg.db"
    assert s.lease_seconds == 3.0
    assert s.lease_ms == 3000


def test_none_arguments_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUCTLINE_DATABASE_URL", "sqlite:///from_env.db")
    s = load_settings(database_url=None, retry_delay=None)
    assert s.database_url == "sqlite:///from_env.db"
    assert s.retry_delay == 10


@pytest.mark.parametrize("env,value,field,expected", [
    ("DUCTLINE_LEASE_SECONDS", "2.5", "lease_seconds", 2.5),
    ("DUCTLINE_RETRY_DELAY", " 15 ", "retry_delay", 15),
    ("DUCTLINE_HEALTH_CHECK_INTERVAL", "0.5", "health_check_interval", 0.5),
    ("DUCTLINE_KILL_GRACE_SECONDS", "0", "kill_grace_seconds", 0.0),
    ("DUCTLINE_POLL_INTERVAL", "3", "poll_interval", 3.0),
    ("DUCTLINE_SHUTDOWN_GRACE_SECONDS", "60", "shutdown_grace_seconds", 60.0),
    ("DUCTLINE_MAX_RELEASES", "2", "max_releases", 2),
])
def test_each_env_var(monkeypatch: pytest.MonkeyPatch, env: str, value: str, field: str, expected: Any) -> None:
    monkeypatch.setenv(env, value)
    assert getattr(load_settings(), field) == expected


def test_ductline_config_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "conf" / "custom.toml"
    other.parent.mkdir()
    write_toml(other, "retry_delay = 99\n")
    write_toml(tmp_path / "ductline.toml", "retry_delay = 1\n")  # ignored: DUCTLINE_CONFIG wins
    monkeypatch.setenv("DUCTLINE_CONFIG", str(other))
    assert load_settings().retry_delay == 99


@pytest.mark.parametrize("env,value", [
    ("DUCTLINE_LEASE_SECONDS", "abc"),
    ("DUCTLINE_LEASE_SECONDS", "0"),
    ("DUCTLINE_LEASE_SECONDS", "-1"),
    ("DUCTLINE_LEASE_SECONDS", ""),
    ("DUCTLINE_RETRY_DELAY", "1.5"),
    ("DUCTLINE_RETRY_DELAY", "-1"),
    ("DUCTLINE_RETRY_DELAY", "ten"),
    ("DUCTLINE_RETRY_DELAY", ""),
    ("DUCTLINE_POLL_INTERVAL", "-0.5"),
    ("DUCTLINE_HEALTH_CHECK_INTERVAL", "5s"),
    ("DUCTLINE_KILL_GRACE_SECONDS", "-1"),
    ("DUCTLINE_SHUTDOWN_GRACE_SECONDS", "x"),
])
def test_invalid_env_value_is_configuration_error(monkeypatch: pytest.MonkeyPatch, env: str, value: str) -> None:
    monkeypatch.setenv(env, value)
    field = env.removeprefix("DUCTLINE_").lower()
    with pytest.raises(ConfigurationError, match=rf"^{env}: invalid value {value!r} for {field}( \(.*\))?$"):
        load_settings()


# Forms Python's int() and float() read but an operator does not mean as a number:
# other scripts' digits, underscores between digits, Unicode spaces, words.
NOT_PLAIN = ["\u0661\u0662", "1_0", "\u0968", "\uff11\uff12", "\u00a012", "12\u2003", "\U0001d7d9"]


@pytest.mark.parametrize("env", ["DUCTLINE_RETRY_DELAY", "DUCTLINE_MAX_UNDEAD", "DUCTLINE_SPARE_CHILDREN",
                                 "DUCTLINE_PAYLOAD_MAX_BYTES", "DUCTLINE_POOL_MAX_CONNECTIONS"])
@pytest.mark.parametrize("value", NOT_PLAIN)
def test_a_whole_number_setting_takes_only_ascii_digits(monkeypatch: pytest.MonkeyPatch, env: str,
                                                        value: str) -> None:
    monkeypatch.setenv(env, value)
    field = env.removeprefix("DUCTLINE_").lower()
    with pytest.raises(ConfigurationError, match=rf"^{env}: invalid value {re.escape(repr(value))} for {field}"):
        load_settings()


@pytest.mark.parametrize("env", ["DUCTLINE_LEASE_SECONDS", "DUCTLINE_POLL_INTERVAL",
                                 "DUCTLINE_SQLITE_BUSY_TIMEOUT", "DUCTLINE_POOL_IDLE_SECONDS"])
@pytest.mark.parametrize("value", NOT_PLAIN + ["1_0.5", "\u0661.\u0665", "inf", "nan", "Infinity", "0x10"])
def test_a_decimal_setting_takes_only_ascii_decimal_forms(monkeypatch: pytest.MonkeyPatch, env: str,
                                                          value: str) -> None:
    monkeypatch.setenv(env, value)
    field = env.removeprefix("DUCTLINE_").lower()
    with pytest.raises(ConfigurationError, match=rf"^{env}: invalid value {re.escape(repr(value))} for {field}"):
        load_settings()


@pytest.mark.parametrize("line", ['retry_delay = "1_0"', 'lease_seconds = "\u0663\u0660"'])
def test_a_number_in_a_toml_string_takes_only_ascii_decimal_forms(isolated: Path, line: str) -> None:
    write_toml(isolated / "ductline.toml", line + "\n")
    with pytest.raises(ConfigurationError, match=r"^ductline\.toml: invalid value"):
        load_settings()


@pytest.mark.parametrize("env,value,expected", [
    ("DUCTLINE_RETRY_DELAY", " 12 ", 12), ("DUCTLINE_RETRY_DELAY", "+7", 7), ("DUCTLINE_RETRY_DELAY", "007", 7),
    ("DUCTLINE_LEASE_SECONDS", "2.5", 2.5), ("DUCTLINE_LEASE_SECONDS", ".5", 0.5),
    ("DUCTLINE_LEASE_SECONDS", "3.", 3.0), ("DUCTLINE_LEASE_SECONDS", "1e1", 10.0),
    ("DUCTLINE_LEASE_SECONDS", "4\n", 4.0),
])
def test_plain_ascii_numbers_are_read(monkeypatch: pytest.MonkeyPatch, env: str, value: str, expected: Any) -> None:
    monkeypatch.setenv(env, value)
    assert getattr(load_settings(), env.removeprefix("DUCTLINE_").lower()) == expected


def test_toml_numbers_keep_the_toml_syntax(isolated: Path) -> None:
    # TOML's own integers allow underscores; tomllib has read them before the settings see them.
    write_toml(isolated / "ductline.toml", "retry_delay = 1_0\nlease_seconds = 1_2.5\n")
    settings = load_settings()
    assert (settings.retry_delay, settings.lease_seconds) == (10, 12.5)


def test_max_releases_defaults_to_five_and_comes_from_the_file(isolated: Path) -> None:
    assert load_settings().max_releases == 5
    write_toml(isolated / "ductline.toml", "max_releases = 12\n")
    assert load_settings().max_releases == 12


@pytest.mark.parametrize("source,value", [("env", "0"), ("env", "-1"), ("env", "1.5"), ("env", "many"),
                                          ("toml", "0"), ("toml", "2.0"), ("argument", 0)])
def test_max_releases_below_one_is_refused_saying_what_it_takes(isolated: Path, monkeypatch: pytest.MonkeyPatch,
                                                                source: str, value: Any) -> None:
    if source == "env":
        monkeypatch.setenv("DUCTLINE_MAX_RELEASES", value)
    elif source == "toml":
        write_toml(isolated / "ductline.toml", f"max_releases = {value}\n")
    where = {"env": "DUCTLINE_MAX_RELEASES", "toml": r"ductline\.toml", "argument": "argument"}[source]
    with pytest.raises(ConfigurationError, match=rf"^{where}: invalid value .* for max_releases "
                                                 r"\(a whole number, at least 1: .*the run halts\)$"):
        load_settings(max_releases=value) if source == "argument" else load_settings()


@pytest.mark.parametrize("line,field", [
    ("retry_delay = 1.5", "retry_delay"),
    ("retry_delay = true", "retry_delay"),
    ("retry_delay = -2", "retry_delay"),
    ('retry_delay = "x"', "retry_delay"),
    ("database_url = 5", "database_url"),
    ("database_url = true", "database_url"),
    ("lease_seconds = 0", "lease_seconds"),
    ("lease_seconds = -3.0", "lease_seconds"),
    ("poll_interval = [1]", "poll_interval"),
    ('shutdown_grace_seconds = "forever"', "shutdown_grace_seconds"),
])
def test_invalid_toml_value_is_configuration_error(isolated: Path, line: str, field: str) -> None:
    write_toml(isolated / "ductline.toml", line + "\n")
    with pytest.raises(ConfigurationError, match=rf"ductline\.toml: invalid value .* for {field}( \(.*\))?$"):
        load_settings()


@pytest.mark.parametrize("kw", [{"retry_delay": 1.5}, {"retry_delay": True}, {"lease_seconds": 0},
                                {"lease_seconds": "abc"}, {"database_url": 5}, {"poll_interval": -1}])
def test_invalid_argument_is_configuration_error(kw: dict[str, Any]) -> None:
    (field,) = kw
    with pytest.raises(ConfigurationError, match=rf"^argument: invalid value .* for {field}( \(.*\))?$"):
        load_settings(**kw)


@pytest.mark.parametrize(("line", "field", "limit"), [
    ("retry_delay = inf", "retry_delay", "at most 3153600000 s, 100 years"),
    ("retry_delay = 99999999999999999999999", "retry_delay", "at most 3153600000 s, 100 years"),
    ("lease_seconds = 1e308", "lease_seconds", "at most 3153600000 s, 100 years"),
    ("lease_seconds = inf", "lease_seconds", "at most 3153600000 s, 100 years"),
    ("poll_interval = 1e999", "poll_interval", "at most 3153600000 s, 100 years"),
    ("pool_idle_seconds = 3153600001", "pool_idle_seconds", "at most 3153600000 s, 100 years"),
    ("payload_max_bytes = 9223372036854775808", "payload_max_bytes", "at most 9223372036854775807"),
])
def test_a_number_too_large_to_use_is_configuration_error(isolated: Path, line: str, field: str, limit: str) -> None:
    """An infinity, or a number no store column or clock can take, is refused when the
    settings are read, not met as an OverflowError in a worker or a command."""
    write_toml(isolated / "ductline.toml", line + "\n")
    with pytest.raises(ConfigurationError, match=rf"ductline\.toml: invalid value .* for {field} \({limit}\)$"):
        load_settings()


@pytest.mark.parametrize("value", ["1e-9", "0.001", "0.09"])
def test_a_lease_too_short_to_renew_is_configuration_error(isolated: Path, value: str) -> None:
    """A lease shorter than a claim's round trip expired before any heartbeat could
    renew it: every attempt was lost and the run never ended. It is refused, saying why."""
    write_toml(isolated / "ductline.toml", f"lease_seconds = {value}\n")
    with pytest.raises(ConfigurationError, match=r"invalid value .* for lease_seconds \(at least 0\.1 s: "):
        load_settings()


def test_the_shortest_lease_is_taken(isolated: Path) -> None:
    write_toml(isolated / "ductline.toml", "lease_seconds = 0.1\n")
    assert load_settings().lease_seconds == 0.1


def test_unknown_toml_key_is_configuration_error(isolated: Path) -> None:
    write_toml(isolated / "ductline.toml", 'database_url = "sqlite:///x.db"\ndatabse_url = "typo"\n')
    with pytest.raises(ConfigurationError, match=r"ductline\.toml: unknown setting 'databse_url'"):
        load_settings()


def test_unknown_toml_key_names_the_closest_setting(isolated: Path) -> None:
    write_toml(isolated / "ductline.toml", "retry_dealy = 3\n")
    with pytest.raises(ConfigurationError, match=r"unknown setting 'retry_dealy' \(did you mean 'retry_delay'\?\)"):
        load_settings()


@pytest.mark.parametrize("line,field", [
    ('retention = "30x"', "retention"),
    ('step_log_level = "LOUD"', "step_log_level"),
    ('database_pooling = "statement"', "database_pooling"),
])
def test_a_value_checked_after_the_merge_names_its_source(isolated: Path, monkeypatch: pytest.MonkeyPatch,
                                                         line: str, field: str) -> None:
    write_toml(isolated / "ductline.toml", line + "\n")
    with pytest.raises(ConfigurationError, match=rf"^ductline\.toml: .*{field}"):
        load_settings()
    monkeypatch.setenv(f"DUCTLINE_{field.upper()}", line.split('"')[1])
    with pytest.raises(ConfigurationError, match=rf"^DUCTLINE_{field.upper()}: .*{field}"):
        load_settings()


def test_toml_table_is_an_unknown_key(isolated: Path) -> None:
    write_toml(isolated / "ductline.toml", "[ductline]\nretry_delay = 3\n")
    with pytest.raises(ConfigurationError, match="unknown setting 'ductline'"):
        load_settings()


def test_malformed_toml_is_configuration_error(isolated: Path) -> None:
    write_toml(isolated / "ductline.toml", "retry_delay = = 3\n")
    with pytest.raises(ConfigurationError, match=r"ductline\.toml: "):
        load_settings()


def test_toml_that_is_not_utf8_is_configuration_error(isolated: Path) -> None:
    (isolated / "ductline.toml").write_bytes(b"\xff\xfe\n")
    with pytest.raises(ConfigurationError, match=r"ductline\.toml: not UTF-8 text"):
        load_settings()


def test_config_path_that_is_a_directory_is_configuration_error(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "adir"
    folder.mkdir()
    monkeypatch.setenv("DUCTLINE_CONFIG", str(folder))
    with pytest.raises(ConfigurationError, match="adir"):
        load_settings()


def test_unknown_argument_is_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="unknown setting 'lease'"):
        load_settings(lease=5)


def test_invalid_env_is_reported_even_when_an_argument_overrides_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUCTLINE_RETRY_DELAY", "bad")
    with pytest.raises(ConfigurationError, match="DUCTLINE_RETRY_DELAY"):
        load_settings(retry_delay=3)


@pytest.mark.parametrize("env,value", [
    ("DUCTLINE_LEASE_SECONDS", "nan"),
    ("DUCTLINE_LEASE_SECONDS", "inf"),
    ("DUCTLINE_POLL_INTERVAL", "nan"),
    ("DUCTLINE_HEALTH_CHECK_INTERVAL", "inf"),
])
def test_non_finite_float_setting_is_configuration_error(monkeypatch: pytest.MonkeyPatch, env: str,
                                                         value: str) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigurationError):
        load_settings()


@pytest.mark.parametrize("source", ["toml", "argument"])
def test_bool_for_float_setting_is_configuration_error(isolated: Path, source: str) -> None:
    if source == "toml":
        write_toml(isolated / "ductline.toml", "lease_seconds = true\n")
        with pytest.raises(ConfigurationError):
            load_settings()
    else:
        with pytest.raises(ConfigurationError):
            load_settings(lease_seconds=True)


def test_missing_explicit_config_file_is_configuration_error(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUCTLINE_CONFIG", str(tmp_path / "no-such.toml"))
    with pytest.raises(ConfigurationError, match="no-such.toml"):
        load_settings()


# -- open_store URL validation -------------------------------------------------------

@pytest.mark.parametrize("url,pattern", [
    ("sqlite://host/x.db", r"malformed SQLite URL 'sqlite://host/x\.db'"),
    ("sqlite:///:memory:", r"malformed SQLite URL 'sqlite:///:memory:'"),
    ("sqlite://", r"malformed SQLite URL"),
    ("sqlite:///", r"malformed SQLite URL"),
    ("sqlite:x.db", r"malformed SQLite URL"),
    ("mysql://user@localhost/db", r"unknown database URL scheme 'mysql' in 'mysql://user@localhost/db'"),
    ("ductline.db", r"unknown database URL scheme ''"),
    ("http://example.com/db", r"unknown database URL scheme 'http'"),
    ("postgresql://", r"malformed PostgreSQL URL"),
    ("", r"database URL must be a non-empty string, got ''"),
    ("   ", r"database URL must be a non-empty string"),
], ids=["sqlite-host", "sqlite-memory", "sqlite-empty", "sqlite-root", "sqlite-no-slashes", "mysql",
        "no-scheme", "http", "postgres-empty", "empty", "blank"])
def test_open_store_rejects_bad_url(url: str, pattern: str) -> None:
    with pytest.raises(ConfigurationError, match=pattern):
        open_store(url)


@pytest.mark.parametrize("url", [None, 5, b"sqlite:///x.db"])
def test_open_store_rejects_non_str(url: Any) -> None:
    with pytest.raises(ConfigurationError, match="database URL must be a non-empty string"):
        open_store(url)


def test_open_store_bad_url_creates_no_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError):
        open_store(f"sqlite://host{tmp_path}/x.db")
    assert list(tmp_path.iterdir()) == []


def test_settings_follow_every_change_of_the_environment_and_the_file(isolated: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # Settings without overrides are kept between calls: each change of what they are
    # built from is still seen by the next call, a file rewritten at once to the same size too.
    assert load_settings().retry_delay == 10
    monkeypatch.setenv("DUCTLINE_RETRY_DELAY", "7")
    assert load_settings().retry_delay == 7
    monkeypatch.delenv("DUCTLINE_RETRY_DELAY")
    assert load_settings().retry_delay == 10
    write_toml(isolated / "ductline.toml", "retry_delay = 3\n")
    assert load_settings().retry_delay == 3
    write_toml(isolated / "ductline.toml", "retry_delay = 4\n")
    assert load_settings().retry_delay == 4
    assert load_settings(retry_delay=5).retry_delay == 5
    assert load_settings().retry_delay == 4
    (isolated / "ductline.toml").unlink()
    assert load_settings().retry_delay == 10
    write_toml(isolated / "ductline.toml", "retry_delay = = 3\n")
    for _ in range(2):  # a file that does not parse is refused on every call
        with pytest.raises(ConfigurationError):
            load_settings()


def test_a_variable_one_typo_from_a_setting_is_warned_of_once(monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    """A misspelt DUCTLINE_DATABASE_URL would leave a worker on the default database
    without a word (the same typo in ductline.toml is an error)."""
    from ductline import config

    monkeypatch.setattr(config, "_warned_variables", set())
    monkeypatch.setenv("DUCTLINE_DATABSE_URL", "sqlite:///elsewhere.db")
    monkeypatch.setenv("DUCTLINE_QUEUE", "fast")
    monkeypatch.setenv("DUCTLINE_MY_APP_REGION", "eu")  # an application's own use of the prefix: left alone
    with caplog.at_level("WARNING", logger="ductline.config"):
        settings = load_settings()
        monkeypatch.setenv("DUCTLINE_RETRY_DELAY", "3")  # the settings are built again: no second warning
        load_settings()
    assert settings.database_url == Settings().database_url
    warned = sorted(r.getMessage() for r in caplog.records)
    assert warned == [
        "DUCTLINE_DATABSE_URL is not a ductline setting and is ignored (did you mean DUCTLINE_DATABASE_URL?)",
        "DUCTLINE_QUEUE is not a ductline setting and is ignored (did you mean DUCTLINE_QUEUES?)",
    ]


@pytest.mark.parametrize("value", ["1e999", " 1E400 "])
def test_a_decimal_too_large_in_the_environment_is_said_with_its_limit(monkeypatch: pytest.MonkeyPatch,
                                                                         value: str) -> None:
    """A text too large for a float reads as an infinity: refused with the largest
    value taken, not with the lease's lower bound."""
    monkeypatch.setenv("DUCTLINE_LEASE_SECONDS", value)
    with pytest.raises(ConfigurationError, match=r"DUCTLINE_LEASE_SECONDS: invalid value .* for lease_seconds "
                                                 r"\(at most 3153600000 s, 100 years\)$"):
        load_settings()


def test_without_logging_configured_the_typo_warning_is_a_python_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    """ductline configures no logging as a library (its records go nowhere until the
    program configures some): the warning then reaches the program as a warning."""
    import logging

    from ductline import config

    monkeypatch.setattr(config, "_warned_variables", set())
    shows = config._logs_somewhere
    monkeypatch.setattr(config, "_logs_somewhere", lambda logger: False)
    monkeypatch.setenv("DUCTLINE_DATABSE_URL", "sqlite:///elsewhere.db")
    with pytest.warns(UserWarning, match=r"DUCTLINE_DATABSE_URL is not a ductline setting .*DUCTLINE_DATABASE_URL"):
        load_settings()
    # With a handler up the chain (the test's capture is on the root logger) it is logged.
    assert shows(logging.getLogger("ductline.config")) is True
