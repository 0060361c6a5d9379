"""`ductline.schedule`: definition-time validation (before anything touches a
database) and the cron arithmetic the scheduler relies on (UTC, epoch ms)."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest

import ductline
from ductline import Pipeline
from ductline.dsl import schedule as schedule_module
from ductline.dsl.schedule import count_ticks, latest_tick_ms, next_tick_ms, tick_key


def step(x=None):
    return x


# A pipeline of this test module only: no worker serves it.
pipeline = Pipeline("sched_definition_only").start(step)


@pytest.fixture(autouse=True)
def clean_registry():
    """Schedules registered here never outlive the test (the registry is per process)."""
    before = dict(schedule_module._SCHEDULES)
    yield
    schedule_module._SCHEDULES.clear()
    schedule_module._SCHEDULES.update(before)


def ms(*parts: int) -> int:
    return int(datetime(*parts, tzinfo=timezone.utc).timestamp() * 1000)


def test_a_valid_schedule_is_registered_with_encoded_args_and_the_pipeline_name_by_default():
    entry = ductline.schedule(pipeline, cron="*/5 * * * *", args=(1, {"a": [True, None]}))
    assert entry == ductline.Schedule(name="sched_definition_only", pipeline="sched_definition_only",
                                      cron="*/5 * * * *", args='[1,{"a":[true,null]}]')
    assert schedule_module.registered_schedules(["sched_definition_only"]) == [entry]
    assert schedule_module.registered_schedules(["another"]) == []


def test_six_fields_with_seconds_last_and_aliases_are_accepted():
    assert ductline.schedule(pipeline, cron="* * * * * */2", name="two_seconds").cron == "* * * * * */2"
    assert ductline.schedule(pipeline, cron="@daily", name="daily_alias").cron == "@daily"


@pytest.mark.parametrize("cron", ["not a cron", "61 * * * *", "* * * *", "0 0 * * * 99", ""])
def test_a_bad_cron_expression_raises_value_error_naming_it(cron):
    with pytest.raises(ValueError, match=re.escape(f"invalid cron expression {cron!r}")):
        ductline.schedule(pipeline, cron=cron, name="bad")
    assert "bad" not in schedule_module._SCHEDULES


def test_a_cron_expression_that_never_fires_raises_value_error():
    with pytest.raises(ValueError, match=r"'0 0 30 2 \*' never fires"):
        ductline.schedule(pipeline, cron="0 0 30 2 *", name="february_30")


def test_a_cron_that_is_not_a_str_raises_type_error():
    with pytest.raises(TypeError, match="cron must be a str"):
        ductline.schedule(pipeline, cron=5, name="five")


@pytest.mark.parametrize("args", [(b"bytes",), ({1, 2},), (2 + 3j,), (float("nan"),),
                                  (datetime(2030, 1, 1),)])
def test_args_that_do_not_round_trip_through_json_raise_type_error(args):
    with pytest.raises(TypeError, match="schedule arguments"):
        ductline.schedule(pipeline, cron="* * * * *", args=args, name="bad_args")
    assert "bad_args" not in schedule_module._SCHEDULES


def test_args_must_be_a_tuple_or_list():
    with pytest.raises(TypeError, match="tuple or list"):
        ductline.schedule(pipeline, cron="* * * * *", args="abc", name="str_args")


def test_a_duplicate_schedule_name_raises_value_error():
    ductline.schedule(pipeline, cron="0 * * * *", name="hourly")
    with pytest.raises(ValueError, match="'hourly' is already defined"):
        ductline.schedule(pipeline, cron="30 * * * *", name="hourly")
    # two schedules of one pipeline need names: the default name is the pipeline's
    ductline.schedule(pipeline, cron="0 * * * *")
    with pytest.raises(ValueError, match="already defined"):
        ductline.schedule(pipeline, cron="0 0 * * *")


@pytest.mark.parametrize("name, error", [("", ValueError), ("x" * 201, ValueError), ("a\x00b", ValueError),
                                         ("s\ud800", ValueError),  # else stored as the same name as "s\\ud800"
                                         (7, TypeError)])
def test_an_invalid_name_is_refused(name, error):
    with pytest.raises(error):
        ductline.schedule(pipeline, cron="* * * * *", name=name)


def test_the_pipeline_must_be_a_pipeline():
    with pytest.raises(TypeError, match="Pipeline"):
        ductline.schedule("sched_definition_only", cron="* * * * *")


def test_ticks_are_utc_and_bounded_the_documented_way():
    noon = ms(2030, 1, 31, 12, 0, 0)
    assert next_tick_ms("0 3 * * *", noon) == ms(2030, 2, 1, 3, 0, 0)
    assert latest_tick_ms("0 3 * * *", noon) == ms(2030, 1, 31, 3, 0, 0)
    # a time on a tick: next is strictly after, latest includes it
    assert next_tick_ms("0 * * * *", noon) == ms(2030, 1, 31, 13, 0, 0)
    assert latest_tick_ms("0 * * * *", noon) == noon
    assert next_tick_ms("* * * * * */2", noon + 1) == noon + 2000
    assert count_ticks("0 0 * * *", ms(2030, 1, 21), ms(2030, 1, 31)) == 10
    assert count_ticks("* * * * * *", noon, noon + 3_600_000, cap=1000) == 1000
    assert count_ticks("0 0 * * *", noon, noon) == 0
    assert tick_key("nightly", ms(2030, 1, 31, 3)) == "schedule:nightly:2030-01-31T03:00:00Z"
