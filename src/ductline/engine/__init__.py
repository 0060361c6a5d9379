"""The engine: the one place that applies the rulebook's verdicts.

Recording an attempt's outcome (success, failure, a halt with ``fail_fast`` and the
``on_halt`` job), routing a completion and gathering fan-ins, applying stop plans
(run deadline, cancel, expired pause), pausing and resuming: each is written once
here and runs inside a transaction of a store (`ductline.store.Store`: SQLite,
PostgreSQL, or the in-memory store of `ductline.execute`). The rulebook
(`ductline.model`) decides; the engine applies; drivers (the worker in
`ductline.runtime`, the in-process executor in `ductline.local`) gather facts,
start attempts and hand their outcomes here.
"""
