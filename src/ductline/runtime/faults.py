"""Fault checkpoints of the worker loop (see `ductline.faults`)."""

from ductline.faults import checkpoint

__all__ = ["checkpoint"]
