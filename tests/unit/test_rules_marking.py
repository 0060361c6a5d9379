"""The words of a refused mark of an expanded step named without an index
(`ductline.model.marking.ambiguous`): which indexes exist, which may be marked, and
how to name one."""

from __future__ import annotations

import pytest

from ductline.model.marking import CHOOSE_INDEX, ambiguous, index_ranges


@pytest.mark.parametrize(("indexes", "text"), [
    ([], ""), ([4], "4"), ([0, 1, 2], "0-2"), ([7, 0, 2, 1, 8, 5], "0-2, 5, 7-8"), ([3, 3, None, 4], "3-4"),
])
def test_index_ranges(indexes, text):
    assert index_ranges(indexes) == text


def test_several_markable_name_their_indexes_and_how_to_choose():
    assert ambiguous("part", [(0, "failed"), (1, "completed"), (2, "held"), (3, "held")]) == (
        f"step part has 4 step runs (indexes 0-3); those that may be marked succeeded are 0, 2-3: {CHOOSE_INDEX}")
    assert "--index N" in CHOOSE_INDEX


def test_none_markable_says_what_each_is():
    assert ambiguous("part", [(0, "completed"), (1, "running"), (2, "completed")]) == (
        "step part has 3 step runs (indexes 0-2) and none may be marked succeeded (only a failed, held or "
        "cancelled one may; completed: 0, 2; running: 1)")
