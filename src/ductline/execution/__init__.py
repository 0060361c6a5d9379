"""Running an attempt outside the parent, once for both drivers.

The worker (`ductline.runtime`) and the in-process executor (`ductline.local`)
run a sync step the same way: in a killable child process (`process.Child`) that
serves one `protocol.Task` at a time (`child`), speaking one message protocol
(`protocol`, read by the parent with `protocol.receive`), and killed by one kill
path (`enforcer.Enforcer`: deadline, SIGTERM to the process group, SIGKILL after
the grace, undead a second later). What an outcome *means* is not decided here:
see `ductline.model`.
"""
