"""Operations on runs, each decided in one place: trigger, cancel, resume,
retry (revive), and the stops a worker applies (run deadline, expired pause).

The Python API (`Pipeline.trigger`, `RunHandle`), the CLI and the dashboard all
call these; the DSL only builds definitions, and the store only performs fenced
state transitions.
"""
