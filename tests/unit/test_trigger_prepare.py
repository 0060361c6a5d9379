"""A trigger's preparation (`ductline.operations.trigger.prepare`): what it computes
once per definition gives what computing it for every run gives, and the settings
it reads follow the environment from one call to the next."""

from __future__ import annotations

import os
import re

import pytest

import steps_for_tests as S
from ductline import Pipeline
from ductline.config import load_settings
from ductline.model.routing import job_spec
from ductline.operations.trigger import first_job_spec, prepare


@pytest.fixture(autouse=True)
def no_settings_from_outside(tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith("DUCTLINE_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def _definition(**options):
    return Pipeline(S.unique_name("prep")).start(S.a, **options).chain(to=S.b).definition()


@pytest.mark.parametrize("options", [{}, {"concurrency": 2, "max_retry": 4, "delay": 3}, {"rate": 1.5}],
                         ids=["plain", "limited", "rate"])
def test_the_first_job_spec_computed_once_is_the_one_computed_per_run(options):
    definition = _definition(**options)
    for retry_delay in (10, 3, 10):
        expected = job_spec(definition, definition.start, "", "[1]", retry_delay)
        assert first_job_spec(definition, "[1]", retry_delay) == expected
        assert first_job_spec(definition, '[{"other":2}]', retry_delay) == expected


def test_a_concurrency_key_read_from_the_arguments_is_read_for_every_run():
    definition = _definition(concurrency=1, concurrency_key="customer")
    first = first_job_spec(definition, '[{"customer":"acme"}]', 10)
    second = first_job_spec(definition, '[{"customer":"globex"}]', 10)
    assert first.limit_key.endswith(':"acme"') and second.limit_key.endswith(':"globex"')
    assert first == job_spec(definition, definition.start, "", '[{"customer":"acme"}]', 10)


def test_a_changed_retry_delay_reaches_the_next_trigger(monkeypatch):
    definition = _definition()
    assert prepare(definition, (1,)).job.retry_delay_seconds == 10
    monkeypatch.setenv("DUCTLINE_RETRY_DELAY", "7")
    assert prepare(definition, (1,)).job.retry_delay_seconds == 7


def test_a_changed_inline_limit_reaches_the_next_trigger(monkeypatch):
    definition = _definition()
    assert prepare(definition, ("x" * 100,)).pending is None
    monkeypatch.setenv("DUCTLINE_PAYLOAD_INLINE_BYTES", "50")
    assert prepare(definition, ("x" * 100,)).pending is not None
    monkeypatch.delenv("DUCTLINE_PAYLOAD_INLINE_BYTES")
    assert prepare(definition, ("x" * 100,)).pending is None


def test_settings_are_read_again_only_when_a_variable_changed(monkeypatch):
    first = load_settings()
    assert load_settings() is first
    monkeypatch.setenv("DUCTLINE_LEASE_SECONDS", "21")
    changed = load_settings()
    assert changed is not first and changed.lease_seconds == 21
    monkeypatch.setenv("UNRELATED_VARIABLE", "1")
    assert load_settings() is changed


def test_each_run_and_its_first_job_get_fresh_ids():
    definition = _definition()
    seen = set()
    for _ in range(50):
        prepared = prepare(definition, (1,))
        assert re.fullmatch("[0-9a-f]{32}", prepared.run.id) and re.fullmatch("[0-9a-f]{32}", prepared.job.id)
        assert prepared.job.run_id == prepared.run.id
        seen |= {prepared.run.id, prepared.job.id}
    assert len(seen) == 100
