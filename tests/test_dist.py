"""mycollectives against torch.distributed's own collectives on real gloo groups.

Matrix: every algorithm x world sizes 1, 2, 3, 4, 5, 8 x dtypes float32,
float64, float16, bfloat16, int32, int64 x every op the dtype allows x
element counts 0, 1, p-1, 2p+1 (not divisible by p), plus a 4 MiB case.
Each test runs its cases inside one persistent process pool per world size.
"""

from __future__ import annotations

import pytest
from cases import APIS as APIS_
from cases import DTYPES, REDUCING, ROOTED, VARIANTS, Case, ops_for
from conftest import MENU, local_size_for
from distpool import Pools

from mycollectives.algorithms import uses

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(600)]

WORLD_SIZES = [1, 2, 3, 4, 5, 8]
POOLS = [pytest.param(p, marks=pytest.mark.pool(p)) for p in WORLD_SIZES]  # tests/worksplit.py
APIS = [(api, a) for c, a in MENU for api in VARIANTS[c]]
pools = Pools("dist_tasks")


@pytest.fixture(scope="module", autouse=True)
def _close_pools():
    yield
    pools.close()


def options(api: str, algorithm: str, p: int) -> tuple:
    """The options ``algorithm`` reads, set small: 64-byte segments, nodes of 2 or 3."""
    reads = uses(api, algorithm)
    return (("local_size", local_size_for(p)),) * ("local_size" in reads) + (("segment_bytes", 64),) * (
        "segment" in reads
    )


def matrix(api: str, algorithm: str, p: int) -> list[Case]:
    """A covering design: every dtype with every op it allows, every element
    count with every dtype, and roots that move around; plus one 4 MiB case."""
    counts = sorted({0, 1, max(p - 1, 1), 2 * p + 1})
    combos = [(d, op) for d in DTYPES for op in (ops_for(d) if api in REDUCING else [None])]
    combos += [(d, "SUM" if api in REDUCING else None) for d in DTYPES for _ in counts[1:]]
    cases = []
    for i, (dtype, op) in enumerate(combos):
        n = counts[i % len(counts)]
        root = i % p if api in ROOTED else 0
        cases.append(Case(api, algorithm, p, n, dtype, op, root, seed=i, options=options(api, algorithm, p)))
    big = (1 << 20) // (p if APIS_[api].blocked else 1)
    op = "SUM" if api in REDUCING else None
    root = p - 1 if api in ROOTED else 0
    big_options = tuple(o for o in options(api, algorithm, p) if o[0] != "segment_bytes")  # default segments
    cases.append(Case(api, algorithm, p, big, "float32", op, root, 99, True, big_options))
    return cases


def run_everywhere(p: int, name: str, *args, timeout: float = 300) -> list:
    return pools.everywhere(p, name, *args, timeout=timeout)


@pytest.mark.parametrize("api,algorithm", APIS)
@pytest.mark.parametrize("p", POOLS)
def test_matches_torch_distributed(api, algorithm, p):
    cases = matrix(api, algorithm, p)
    results = run_everywhere(p, "compare_cases", cases)
    problems = [msg for rank_problems, _ in results for msg in rank_problems]
    assert all(count == len(cases) for _, count in results)
    assert not problems, "\n".join(problems[:10])


@pytest.mark.pool(3)
def test_reduce_leaves_non_root_tensors_untouched():
    assert all(run_everywhere(3, "reduce_keeps_non_root_tensors"))


@pytest.mark.pool(4)
def test_subgroups_use_group_ranks_and_global_roots():
    out = run_everywhere(4, "subgroup_all_reduce")
    assert out == [[0.0], [4.0], [2.0], [4.0]]


@pytest.mark.pool(3)
def test_bad_input_on_one_rank_makes_every_rank_raise_within_30_s():
    out = run_everywhere(3, "bad_input_on_one_rank", 1)
    for rank, (message, untouched) in enumerate(out):
        assert message.startswith("ValueError"), message
        assert f"on rank {rank}" in message and "rank 1" in message, message
        assert untouched, f"rank {rank}: tensor modified or too slow"


@pytest.mark.pool(4)
def test_the_batched_nccl_code_path_on_gloo():
    p = 4
    cases = [
        Case(api, alg, p, n, "float32", "SUM" if api in REDUCING else None, 1 if api in ROOTED else 0, seed=n,
             options=options(api, alg, p))
        for api, alg in [
            ("all_reduce", "ring"), ("all_reduce", "recursive_doubling"), ("broadcast", "binomial"),
            ("all_gather_into_tensor", "bruck"), ("reduce_scatter_tensor", "pairwise"),
            ("all_to_all_single", "bruck"), ("gather", "binomial"), ("reduce", "rabenseifner"),
            ("all_gather_into_tensor", "pat"), ("reduce_scatter_tensor", "pat"),
            ("all_gather_into_tensor", "hierarchical"), ("reduce_scatter_tensor", "hierarchical"),
        ]
        for n in (0, 5, 1000)
    ]  # fmt: skip
    results = run_everywhere(p, "batched_path", cases)
    assert all(count == len(cases) for _, count in results)
    problems = [msg for rank_problems, _ in results for msg in rank_problems]
    assert not problems, "\n".join(problems[:10])


_GROUP_LIFETIME = """
import gc, os, tempfile, weakref
import torch, torch.distributed as dist
import mycollectives as mc
dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)
mc.all_reduce(torch.ones(4))
group = weakref.ref(dist.group.WORLD)
dist.destroy_process_group()
gc.collect()
assert group() is None, "mycollectives kept the destroyed process group alive"
"""


@pytest.mark.timeout(120)
def test_transports_do_not_keep_a_destroyed_group_alive():
    # a group kept alive past destroy_process_group() is torn down at interpreter
    # exit, where gloo's threads made processes abort now and then
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _GROUP_LIFETIME], capture_output=True, text=True, timeout=100
    )
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("p", [POOLS[2], POOLS[3]])
def test_the_shared_memory_transport_matches_torch_distributed(p):
    """Every algorithm of every collective with every message through /dev/shm."""
    cases = []
    for i, (api, alg) in enumerate(APIS):
        for j, (n, dtype) in enumerate(
            [(0, "float32"), (2 * p + 1, "float16"), (1000, "int64"), (70000, "float32")]
        ):
            op = "SUM" if api in REDUCING else None
            root = (i + j) % p if api in ROOTED else 0
            cases.append(Case(api, alg, p, n, dtype, op, root, seed=i + j, options=options(api, alg, p)))
    results = run_everywhere(p, "shm_path", cases, 1)
    assert all(count == len(cases) for _, count in results)
    problems = [msg for rank_problems, _ in results for msg in rank_problems]
    assert not problems, "\n".join(problems[:10])


@pytest.mark.pool(2)
def test_shared_memory_regions_are_reused_read_out_of_order_and_cleaned_up():
    out = run_everywhere(2, "shm_regions")
    assert out[1]["ok"], "rank 1 received wrong data"
    assert 1 <= out[0]["regions"] <= 4, out[0]
    for rank, o in enumerate(out):  # files are unlinked once mapped, memory freed with the transport
        assert o["left_while_alive"] == [] and o["left_after"] == [], (rank, o)


@pytest.mark.pool(2)
def test_a_shared_memory_sender_that_closes_at_once_leaves_its_last_message_readable():
    out = run_everywhere(2, "shm_close_right_after_send")
    assert out == ["sent", "ok"], out


@pytest.mark.pool(2)
def test_the_transport_environment_variable():
    out = run_everywhere(2, "transport_env")
    for seen in out:
        assert "MYCOLLECTIVES_TRANSPORT='pigeon'" in seen[0] and "shm" in seen[0], seen
        assert seen[1] == "ShmTransport" and seen[2] == str([1.0] * 8), seen


# Faults: each test leaves its group broken and kills its pool, so it runs last of its pool's tests.


@pytest.mark.timeout(120)
@pytest.mark.pool(3)
def test_a_rank_that_never_joins_gives_a_timeout_naming_round_and_peer():
    out = pools.run(3, "skip_collective", "ring", 2, 3.0, timeout=60)
    assert out[2] == ("ok", "skipped")
    for rank in (0, 1):
        status, message = out[rank]
        assert status == "ok" and message.startswith(("CollectiveTimeout", "PeerError")), message
        assert "all_reduce (ring)" in message and "round" in message and "rank" in message, message
    assert any("rank 2" in out[r][1] for r in (0, 1))
    pools.kill(3)  # the group saw a timeout: start afresh


@pytest.mark.timeout(120)
@pytest.mark.pool(4)
def test_a_rank_killed_mid_collective_makes_the_others_raise():
    p = 4
    try:  # the dead rank never reports: collect the survivors
        out = pools.run(p, "die_mid_collective", 1, timeout=90, ranks=[0, 2, 3])
    except TimeoutError as e:
        pytest.fail(f"survivors hung: {e}")
    finally:
        pools.kill(p)
    for rank in (0, 2, 3):
        status, message = out[rank]
        assert status == "ok" and message.startswith(("PeerError", "CollectiveTimeout")), message
        assert "all_reduce (ring)" in message and "round" in message, message


@pytest.mark.pool(3)
def test_the_shared_memory_transport_refuses_a_rank_on_another_host():
    out = run_everywhere(3, "shm_refuses_another_host")
    assert any("another host" in m and "rank 1" in m for m in out), out
    assert all(m.startswith(("PeerError", "CollectiveTimeout")) for m in out), out
    pools.kill(3)  # the group saw errors: start afresh


@pytest.mark.timeout(120)
@pytest.mark.pool(3)
def test_a_rank_that_never_joins_the_shared_memory_transport_gives_a_timeout_naming_round_and_peer():
    out = pools.run(3, "shm_skip_collective", 2, 3.0, timeout=60)
    assert out[2] == ("ok", "skipped")
    for rank in (0, 1):
        status, message = out[rank]
        assert status == "ok" and message.startswith(("CollectiveTimeout", "PeerError")), message
        assert "all_reduce (ring)" in message and "round" in message, message
    assert any("rank 2" in out[r][1] for r in (0, 1))
    pools.kill(3)
