"""The rulebook: states and their transitions, what an attempt's outcome means,
which step runs a completion creates, what a stop skips, and limit keys.

Pure functions over records, no I/O. The worker (`ductline.runtime`) and the
in-process executor (`ductline.local`) both call them and apply the verdicts with
their own storage; `tests/parity` proves they agree. Imports nothing above
`ductline.dsl`.
"""
