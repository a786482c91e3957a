"""Post-dominators and test regions (graphlint/model/branches.py) on small graphs."""

from __future__ import annotations

from graphlint.model.branches import immediate_post_dominators, region


def test_diamond_meets_at_the_join():
    # 0 -> 1, 2 -> 3
    successors = [[1, 2], [3], [3], []]
    ipdom = immediate_post_dominators(successors)
    assert ipdom == {0: 3, 1: 3, 2: 3, 3: 4}  # 4: the virtual exit
    assert sorted(region(0, successors, ipdom)) == [1, 2]


def test_if_without_else_region_is_its_body():
    # 0 (test) -> 1 (body) -> 2; 0 -> 2
    successors = [[1, 2], [2], []]
    ipdom = immediate_post_dominators(successors)
    assert ipdom[0] == 2
    assert list(region(0, successors, ipdom)) == [1]


def test_continue_makes_the_rest_of_the_body_part_of_the_region():
    # 0 header -> 1 (test) | 5 (exit)
    # 1 (if cond: continue) -> 0 (back) | 2 (rest of body: the step) -> 0
    successors = [[1, 5], [0, 2], [0], [], [], []]
    ipdom = immediate_post_dominators(successors)
    assert ipdom[1] == 0
    assert set(region(1, successors, ipdom)) == {2}


def test_several_exits_share_the_virtual_exit():
    # 0 -> 1 (return) | 2 -> 3 (return)
    successors = [[1, 2], [], [3], []]
    ipdom = immediate_post_dominators(successors)
    assert ipdom[0] == 4
    assert set(region(0, successors, ipdom)) == {1, 2, 3}


def test_a_test_that_cannot_reach_an_exit_has_no_known_region():
    # 0 -> 1 <-> 2 (an endless loop) ; 0 -> 3 (exit)
    successors = [[1, 3], [2], [1], []]
    ipdom = immediate_post_dominators(successors)
    assert 1 not in ipdom and 2 not in ipdom
    assert region(1, successors, ipdom) is None
    # One branch of 0 never ends: what the test decides is not known either.
    assert region(0, successors, ipdom) is None


def test_nested_tests_meet_at_their_own_joins():
    # 0 -> 1 | 4; 1 -> 2 | 3; 2, 3 -> 4; 4 -> 5
    successors = [[1, 4], [2, 3], [4], [4], [5], []]
    ipdom = immediate_post_dominators(successors)
    assert ipdom[1] == 4 and ipdom[0] == 4
    assert set(region(1, successors, ipdom)) == {2, 3}
    assert set(region(0, successors, ipdom)) == {1, 2, 3}
