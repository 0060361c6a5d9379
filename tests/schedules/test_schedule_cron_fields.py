"""`ductline.schedule` takes 5 cron fields, or 6 with seconds last, or an alias: a
seventh field (croniter's year) is refused, and a bad cron is reported as such even
when the name is already taken."""

from __future__ import annotations

import pytest

import ductline
from ductline import Pipeline
from ductline.dsl import schedule as schedule_module


def step(x=None):
    return x


pipeline = Pipeline("sched_cron_fields_only").start(step)


@pytest.fixture(autouse=True)
def clean_registry():
    before = dict(schedule_module._SCHEDULES)
    yield
    schedule_module._SCHEDULES.clear()
    schedule_module._SCHEDULES.update(before)


@pytest.mark.parametrize("cron,fields", [("* * * * * * *", 7), ("0 0 1 1 * 0 2099", 7), ("* * * *", 4),
                                         ("*", 1), ("", 0), ("0 0 1 1 * 0 2099 x", 8)])
def test_a_cron_without_five_or_six_fields_is_refused_naming_it_and_the_count(cron, fields):
    with pytest.raises(ValueError) as refused:
        ductline.schedule(pipeline, cron=cron, name="fields")
    assert str(refused.value) == (
        f"invalid cron expression {cron!r}: it has {fields} field{'s' if fields != 1 else ''}; give 5 "
        "(minute hour day-of-month month day-of-week) or 6 (the same, then seconds)")
    assert "fields" not in schedule_module._SCHEDULES


@pytest.mark.parametrize("cron", ["*/5 * * * *", "* * * * * */10", "@hourly", " 0 3 * * * "])
def test_five_fields_six_fields_and_aliases_are_accepted(cron):
    assert ductline.schedule(pipeline, cron=cron, name="ok").cron == cron


@pytest.mark.parametrize("cron,message", [
    ("* * * * * * *", "invalid cron expression '* * * * * * *': it has 7 fields"),
    ("61 * * * *", "invalid cron expression '61 * * * *'"),
    ("0 0 30 2 *", "cron expression '0 0 30 2 *' never fires"),
])
def test_a_bad_cron_is_reported_before_a_duplicate_name(cron, message):
    ductline.schedule(pipeline, cron="0 3 * * *", name="taken")
    with pytest.raises(ValueError) as refused:
        ductline.schedule(pipeline, cron=cron, name="taken")
    assert str(refused.value).startswith(message)
    assert "already defined" not in str(refused.value)
    assert schedule_module._SCHEDULES["taken"].cron == "0 3 * * *"
