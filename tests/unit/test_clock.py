"""The database clock as a worker sees it (DESIGN.md, "Step timeouts"): a measured
offset turns database times into monotonic ones, whatever the wall clock does."""

from __future__ import annotations

from ductline.clock import DatabaseClock, ManualClock


def test_offset_is_measured_at_the_middle_of_the_round_trip() -> None:
    base = ManualClock(100.0)
    clock = DatabaseClock(base)
    clock.measure(db_ms=1_700_000_000_000, sent=100.0, received=100.2)  # read at 100.1
    assert abs(clock.to_monotonic(1_700_000_000_000) - 100.1) < 1e-9
    assert abs(clock.to_monotonic(1_700_000_005_000) - 105.1) < 1e-9
    base.advance(0.1)
    assert abs(clock.db_now_ms() - 1_700_000_000_000) < 1e-3


def test_a_new_measurement_replaces_the_old_one() -> None:
    base = ManualClock(10.0)
    clock = DatabaseClock(base)
    clock.measure(db_ms=5_000, sent=10.0, received=10.0)
    clock.measure(db_ms=9_000, sent=12.0, received=12.0)  # the database clock stepped
    assert clock.to_monotonic(9_000) == 12.0
    assert clock.db_now_ms() == 7_000.0  # the fake still reads 10.0


def test_the_fake_clock_moves_only_when_told() -> None:
    base = ManualClock(1.0)
    clock = DatabaseClock(base)
    assert clock.now() == 1.0
    clock.sleep(2.5)
    assert clock.now() == 3.5
    base.advance(-1)  # never backwards
    assert clock.now() == 3.5


def test_a_measurement_with_a_longer_round_trip_does_not_replace_a_precise_one() -> None:
    """A claim that took 40 ms under load would put the database clock up to 20 ms off;
    the 1 ms measurement before it stays, its bound grown by the drift allowance."""
    base = ManualClock(10.0)
    clock = DatabaseClock(base)
    clock.measure(db_ms=5_000, sent=10.000, received=10.001)  # read at 10.0005: offset -4,999,500.5 ms
    clock.measure(db_ms=5_030, sent=10.005, received=10.045)  # consistent within its 20 ms bound
    assert abs(clock.to_monotonic(5_000) - 10.0005) < 1e-9
    # Much later the old bound has grown (0.5 ms per second): a 4 ms round trip replaces it.
    clock.measure(db_ms=25_000, sent=29.998, received=30.002)
    assert abs(clock.to_monotonic(25_000) - 30.0) < 1e-9


def test_a_precise_measurement_replaces_a_looser_one() -> None:
    base = ManualClock(10.0)
    clock = DatabaseClock(base)
    clock.measure(db_ms=5_000, sent=10.0, received=10.04)  # read at 10.02, +-20 ms
    clock.measure(db_ms=5_010, sent=10.03, received=10.031)  # +-0.5 ms, consistent with it
    assert abs(clock.to_monotonic(5_010) - 10.0305) < 1e-9


def test_the_error_bound_is_half_the_round_trip_grown_with_its_age() -> None:
    base = ManualClock(10.0)
    clock = DatabaseClock(base)
    assert clock.error_ms() == 0.0  # nothing measured: the offset is a guess
    clock.measure(db_ms=5_000, sent=10.0, received=10.004)  # +-2 ms
    base.advance(0.004)
    assert abs(clock.error_ms() - 2.0) < 1e-9
    base.advance(2.0)  # two seconds later: 0.5 ms per second more
    assert abs(clock.error_ms() - 3.0) < 1e-9
    # A job due at 5,100 ms surely started by the database clock that much later.
    assert abs(clock.passed(5_100) - (clock.to_monotonic(5_100) + 0.003)) < 1e-9
