"""How the tests are ordered and split between pytest-xdist workers (tests/worksplit.py)."""

from __future__ import annotations

import pytest
import worksplit


class Item:
    """What worksplit reads of a pytest item: its node id and its ``pool`` marker."""

    def __init__(self, nodeid: str, pool: int | None = None):
        self.nodeid = nodeid
        self.pool = pool

    def get_closest_marker(self, name: str):
        return pytest.mark.pool(self.pool).mark if name == "pool" and self.pool is not None else None


def test_units_keep_a_file_together_split_the_matrix_by_world_size_and_each_torchrun_job_apart():
    dist = "tests/test_dist.py::test_matches_torch_distributed"
    assert worksplit.unit(f"{dist}[8-all_reduce-ring]") == "tests/test_dist.py:p8"
    assert worksplit.unit(f"{dist}[5-broadcast-binomial]") == "tests/test_dist.py:p5"
    assert worksplit.unit(f"{dist}[4-all_reduce-ring]") == "tests/test_dist.py:rest"
    assert worksplit.unit("tests/test_dist.py::test_subgroups_use_group_ranks_and_global_roots") == (
        "tests/test_dist.py:rest"
    )
    job = "tests/test_faults.py::test_the_doctor_names_the_fault_the_rank_and_the_sequence_number[skip]"
    assert worksplit.unit(job) == job
    assert worksplit.unit("tests/test_local.py::test_x[3]") == "tests/test_local.py"


def test_a_modules_tests_of_one_pool_run_together_in_file_order():
    items = [
        Item("a.py::m[2]", 2),
        Item("a.py::m[3]", 3),
        Item("a.py::x", 2),
        Item("a.py::y"),
        Item("a.py::z", 3),
    ]
    assert [i.nodeid for i in worksplit.by_pool(items)] == [
        "a.py::m[2]",
        "a.py::x",
        "a.py::m[3]",
        "a.py::z",
        "a.py::y",
    ]


def test_the_longest_units_start_first_and_the_torchrun_jobs_come_last():
    items = [
        Item("tests/test_faults.py::t[a]"),
        Item("tests/test_viz.py::t"),
        Item("tests/test_dist.py::test_matches_torch_distributed[8-all_reduce-ring]", 8),
        Item("tests/test_dist.py::test_matches_torch_distributed[1-all_reduce-ring]", 1),
    ]
    assert [worksplit.unit(i.nodeid) for i in worksplit.units(items)] == [
        "tests/test_dist.py:rest",
        "tests/test_dist.py:p8",
        "tests/test_viz.py",
        "tests/test_faults.py::t[a]",
    ]


def test_a_split_files_test_on_a_split_pool_must_carry_p_in_its_id():
    with pytest.raises(pytest.UsageError, match="parametrize it by p"):
        worksplit.units([Item("tests/test_dist.py::test_something_on_eight", 8)])
