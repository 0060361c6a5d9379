"""A parent's conversation with a child: what it reads in, and the attempt's end out.

Both drivers hold their children's conversations through this module, through
thin adapters of their own (the worker's loop in `ductline.runtime.children`,
the in-process executor's event loop in `ductline.local.childattempt`):

- `hear` reads what arrived on a child's channel (never blocking on a partial
  frame, `ductline.execution.protocol.Reader`) and hands each complete message to
  the driver's handler inside one boundary. What is not the protocol -- bytes out
  of step, a FATAL after READY, a message its handler cannot take -- ends the
  conversation as broken; a message past the cap, as oversized. Either way the
  driver kills the child and reads it no more. A frame left incomplete is given to
  the driver's enforcer (`Enforcer.frame_pending`), which kills the child if it
  stays so (`ductline.model.endings.FRAME_BOUND_SECONDS`): every attempt ends in
  bounded time whatever the step writes into the channel.
- `report` turns a result frame into the rulebook's `Report`, and `facts` gathers
  what `ductline.model.endings.ending` needs: one account of how an attempt ended.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ductline import codec
from ductline.execution import protocol
from ductline.execution.enforcer import Enforcer
from ductline.execution.protocol import Done, Failed, Fatal, Garbled, Message, Oversized, Reader
from ductline.model.endings import Report, Reported


@dataclass(frozen=True, slots=True)
class Hearing:
    """What one `hear` found.

    Attributes:
        ended: the channel reached its end (the process is exiting; its pidfd tells the rest).
        broken: why the child broke the protocol (kill it; read it no more), else ``None``.
        oversized: it began a message past the cap (kill it; read it no more).
        handled: messages handed to the handler.
    """

    ended: bool = False
    broken: str | None = None
    oversized: bool = False
    handled: int = 0

    @property
    def over(self) -> bool:
        """Nothing more will be read from this child."""
        return self.ended or self.broken is not None or self.oversized


def hear(reader: Reader, cap: int, handle: Callable[[Message], None], *, ready: bool) -> Hearing:
    """Read what can be read now and hand each complete message to ``handle``, in order.

    Args:
        reader: the child's channel.
        cap: the longest message read, in bytes.
        handle: the driver's handler of one message; whatever it raises breaks the
            conversation (a hostile message must not end the driver's loop).
        ready: the child said READY (a FATAL, a new child's answer instead of READY,
            is then not the protocol: a step wrote it).
    """
    oversized = False
    try:
        messages = reader.read(cap)
    except Oversized as exc:
        messages, oversized = exc.before, True
    except (EOFError, OSError):
        return Hearing(ended=True)
    except Exception as exc:  # noqa: BLE001 - whatever the step did to the channel, the driver goes on
        return Hearing(broken=f"{type(exc).__name__}: {codec.render(exc, 'error')}")
    # The messages ahead of an oversized one come first: a Garbled among them means
    # the size after it was read from bytes out of step, not announced by the child.
    for count, message in enumerate(messages):
        if isinstance(message, Garbled):
            return Hearing(broken=codec.render(message, "error"), handled=count)
        if isinstance(message, Fatal) and ready:
            return Hearing(broken=protocol.misplaced_fatal(message), handled=count)
        try:
            handle(message)
        except Exception as exc:  # noqa: BLE001 - a hostile message must not end the loop
            return Hearing(broken=f"handling its {type(message).__name__} message raised "
                                  f"{type(exc).__name__}: {codec.render(exc, 'error')}", handled=count)
    return Hearing(oversized=oversized, handled=len(messages))


def watch_frames(enforcer: Enforcer, key: int, reader: Reader, channel: int) -> None:
    """Tell ``enforcer`` whether a frame from the child watched under ``key`` is
    incomplete, so it kills the child if the frame stops arriving."""
    enforcer.frame_pending(key, reader.pending_since(), channel)


def report(message: Done | Failed | Fatal) -> Report:
    """A result frame as the rulebook takes it (`ductline.model.endings.ending`)."""
    if isinstance(message, Done):
        return Report(Reported.DONE, output=message.output, route_key=message.route_key or None)
    kind = Reported.ERROR if isinstance(message, Failed) else Reported.FATAL
    return Report(kind, error_type=message.error_type, error=message.error, traceback=message.traceback)
