"""`ductline.runtime.readiness.ready`: the worker loop's wait on its descriptors."""

from __future__ import annotations

import os
from multiprocessing import Pipe

from ductline.runtime.readiness import ready


def test_only_the_readable_items_are_returned_as_given() -> None:
    a_parent, a_child = Pipe()
    b_parent, b_child = Pipe()
    r, w = os.pipe()
    try:
        assert ready([a_parent, b_parent, r], 0) == []
        b_child.send("x")
        os.write(w, b"1")
        assert sorted(map(id, ready([a_parent, b_parent, r], 5))) == sorted(map(id, [b_parent, r]))
    finally:
        for c in (a_parent, a_child, b_parent, b_child):
            c.close()
        os.close(r)
        os.close(w)


def test_a_hung_up_pipe_is_ready_and_an_item_listed_twice_comes_back_twice() -> None:
    r, w = os.pipe()
    os.close(w)
    try:
        assert ready([r, r], 5) == [r, r]
    finally:
        os.close(r)
