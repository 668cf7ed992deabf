"""Check functions for the labs' exercises (labs 2 to 8).

Each ``check_*`` raises ``AssertionError`` with a message that says what is
wrong, or prints what was right, and returns nothing. Where the answer
depends on the lab's own measurement (lab 2's fitted alpha and beta, lab 3's
timings, lab 7's routing), the check takes that measurement and works the
expected value out from it; the notebook shows the question, never the
answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from .answers import close, exercise, need, off

# --- lab 2: one message's time from the fitted alpha and beta ----------------------------


@exercise
def check_one_way_time(
    answer: float | None, res: Mapping, pair: tuple[int, int] = (0, 1), nbytes: int = 4 << 20
) -> None:
    """Lab 2: the model's one-way time of ``nbytes`` between ``pair``, from the lab's fit ``res``."""
    need(answer, "t_4mib, in seconds")
    k = [tuple(pq) for pq in res["pairs"]].index(tuple(pair))
    alpha, beta = res["alpha"][k], res["beta"][k]
    want = alpha + beta * nbytes
    got = float(answer)
    if math.isclose(got, beta * nbytes, rel_tol=1e-3) and alpha > 1e-3 * want:
        raise AssertionError("that is the bandwidth term alone: add alpha, paid by every message")
    if math.isclose(got, 2 * want, rel_tol=1e-3):
        raise AssertionError("that is a round trip: the ping-pong halves it to get one way")
    if math.isclose(got, alpha + beta * (4 * 10**6), rel_tol=1e-3):
        raise AssertionError("4 MiB is 4 x 2**20 bytes, not 4 x 10**6")
    close(got, want, "t_4mib", " s", rel=1e-3)
    print(f"Correct: {got * 1e3:.3f} ms, of which alpha is {100 * alpha / want:.1f}%")


# --- lab 3: which of our algorithms comes closest to the library's ------------------------


def _fastest(results: Sequence, size: int, key: Callable) -> str:
    ours = [r for r in results if r.size == size and r.algorithm != "native"]
    return min(ours, key=key).algorithm


@exercise
def check_closest_to_native(
    at_largest: str | None,
    at_smallest: str | None,
    model_agrees: bool | None,
    results: Sequence,
    model,
    params,
) -> None:
    """Lab 3: our fastest algorithm at the largest and at the smallest size, and whether the model says the same.

    ``results`` are the bench's records of this run, ``model`` and ``params``
    the cost model it was calibrated with (the lab's section 2).
    """
    from ...bench.predicted import predicted_us

    need(at_largest, "at_largest, an algorithm name")
    need(at_smallest, "at_smallest, an algorithm name")
    need(model_agrees, "model_agrees, True or False")
    names = sorted({r.algorithm for r in results if r.algorithm != "native"})
    largest, smallest = max(r.size for r in results), min(r.size for r in results)
    measured = {n: _fastest(results, n, lambda r: -r.busbw) for n in (largest, smallest)}
    modelled = {
        n: _fastest(results, n, lambda r: predicted_us(r, model, params)) for n in (largest, smallest)
    }
    for name, got, n in (("at_largest", at_largest, largest), ("at_smallest", at_smallest, smallest)):
        assert got in names, f"{name}: {got!r} is not one of the algorithms measured, {names}"
        if got == "native":
            raise AssertionError(f"{name}: the question is which of *ours* comes closest to native")
        if got != measured[n]:
            raise AssertionError(
                f"{name}: at {n} bytes {got} is not our fastest in this run; read the busbw column of "
                "that size (higher is faster), leaving out native"
            )
    agrees = all(measured[n] == modelled[n] for n in (largest, smallest))
    if bool(model_agrees) != agrees:
        raise AssertionError(
            "model_agrees: compare the model's fastest at each of the two sizes (smallest predicted time) "
            "with the measured fastest"
        )
    print(
        f"Correct: {measured[largest]} at {largest} bytes, {measured[smallest]} at {smallest} bytes;\n"
        f"the model {'agrees' if agrees else 'picks ' + ' and '.join(modelled[n] for n in (largest, smallest))}"
    )


# --- lab 4: buckets -----------------------------------------------------------------------


@exercise
def check_bucket_time(fn: Callable | None) -> None:
    """Lab 4: ``fn(k, n, p, alpha, beta)``, the ring all-reduce time of ``k`` equal buckets of ``n`` bytes in all."""
    need(fn, "n_buckets_time")
    cases = [(4, 1e6, 8, 1e-5, 1e-9), (1, 25e6, 4, 5e-6, 2e-10), (16, 1e8, 16, 2e-5, 1e-10)]
    for k, n, p, a, b in cases:
        got = fn(k, n, p, a, b)
        assert got is not None, "n_buckets_time returned None: return the time in seconds"
        want = k * (2 * (p - 1) * a + 2 * (p - 1) / p * (n / k) * b)
        if math.isclose(got, 2 * (p - 1) * a + 2 * (p - 1) / p * n * b, rel_tol=1e-9) and k > 1:
            raise AssertionError(
                f"k={k}: that is one bucket of all n bytes; with k buckets alpha is paid k times"
            )
        if math.isclose(got, k * (2 * (p - 1) * a + 2 * (p - 1) / p * n * b), rel_tol=1e-9) and k > 1:
            raise AssertionError(f"k={k}: each bucket holds n / k bytes, not n")
        assert math.isclose(got, want, rel_tol=1e-9), (
            f"k={k}, n={n:g}, p={p}: got {got:.4g} s, {off(got, want)}"
        )
    print("Correct: the latency term grows with k, the bandwidth term does not")


# --- lab 5: how far ZeRO-3 must shard -----------------------------------------------------


@exercise
def check_zero3_gpus(
    g: int | None, params: float = 7e9, bytes_per_param: int = 16, memory: float = 80e9
) -> None:
    """Lab 5: the fewest GPUs over which ZeRO-3 spreads ``params`` parameters' state to fit ``memory`` each."""
    need(g, "g_min")
    want = math.ceil(params * bytes_per_param / memory)
    if int(g) == math.ceil(params * 2 / memory):
        raise AssertionError(
            "that counts the bf16 weights only: Adam in mixed precision keeps 16 bytes a parameter"
        )
    assert int(g) == want, (
        f"over {g} GPUs each holds {params * bytes_per_param / int(g) / 1e9:.1f} GB of state; "
        + ("more than fits" if int(g) < want else "it fits with fewer")
    )
    print(
        f"Correct: {params * bytes_per_param / 1e9:.0f} GB of state, {params * bytes_per_param / want / 1e9:.1f} GB per GPU"
    )


# --- lab 6: the pipeline bubble -----------------------------------------------------------


@exercise
def check_bubble_microbatches(m: int | None, stages: int = 8, target: float = 0.1) -> None:
    """Lab 6: the fewest micro-batches for which the bubble ``(p-1)/(m+p-1)`` drops below ``target``."""
    need(m, "m_min")

    def bubble(m: int) -> float:
        return (stages - 1) / (m + stages - 1)

    m = int(m)
    assert m >= 1, "m_min is a number of micro-batches, at least 1"
    if (stages - 1) / m < target <= (stages - 1) / (m - 1):
        raise AssertionError(
            f"m={m} makes (p-1)/m drop below {target:g}; the bubble is (p-1)/(m+p-1): the idle time over "
            "the whole schedule, which has m + p - 1 slots"
        )
    assert bubble(m) < target, f"with m={m} the bubble is {bubble(m):.3f}, not below {target:g}"
    assert bubble(m - 1) >= target if m > 1 else True, f"m={m - 1} already brings the bubble below {target:g}"
    print(f"Correct: with {m} micro-batches the bubble is {bubble(m):.3f}")


# --- lab 7: rows each rank receives -------------------------------------------------------


@exercise
def check_expected_rows(fn: Callable | None, runs: Mapping) -> None:
    """Lab 7: ``fn(T, k, p)``, the rows a rank receives on average, against the lab's routed runs ``runs``."""
    need(fn, "expected_rows")
    for p, res in runs.items():
        r = res["results"][0]
        tokens, k = res["tokens"], r["k"]
        got = fn(tokens, k, p)
        assert got is not None, "expected_rows returned None: return the number of rows"
        sent = p * tokens * k  # every rank sends each of its T tokens to k experts
        assert sum(r["loads"]) == sent, "the rows received must add up to the rows sent"
        if math.isclose(got, tokens * k / p, rel_tol=1e-9):
            raise AssertionError(
                f"p={p}: all p ranks send, so a rank receives from p of them, not only its own share"
            )
        if math.isclose(got, tokens, rel_tol=1e-9) and k > 1:
            raise AssertionError(f"p={p}, k={k}: each token goes to k experts, so it is k rows")
        assert math.isclose(got, sent / p, rel_tol=1e-9), (
            f"p={p}: got {got:g} rows, {off(got, sent / p)}; count the rows all ranks send, spread evenly"
        )
    print("Correct: every rank sends T k rows and, on average, receives as many")


# --- lab 8: what the hierarchy saves on the network ---------------------------------------


@exercise
def check_hierarchy_speedup(fn: Callable | None) -> None:
    """Lab 8: ``fn(N, g)``, the flat ring's bandwidth term over the hierarchical all-reduce's network term."""
    need(fn, "speedup")
    for N, g in ((2, 8), (4, 8), (16, 4)):
        got = fn(N, g)
        assert got is not None, "speedup returned None: return the ratio"
        p = N * g
        want = ((p - 1) / p) / ((N - 1) / N / g)
        if math.isclose(got, 1 / want, rel_tol=1e-9):
            raise AssertionError(f"N={N}, g={g}: upside down: the flat ring's term over the hierarchy's")
        if math.isclose(got, ((p - 1) / p) / ((N - 1) / N), rel_tol=1e-9):
            raise AssertionError(
                f"N={N}, g={g}: each GPU sends only its 1/g of the vector across the network"
            )
        assert math.isclose(got, want, rel_tol=1e-9), f"N={N}, g={g}: got {got:.4g}, {off(got, want)}"
    print(f"Correct: about g for many nodes ({fn(64, 8):.2f} for 64 nodes of 8)")


__all__ = [
    "check_bubble_microbatches",
    "check_bucket_time",
    "check_closest_to_native",
    "check_expected_rows",
    "check_hierarchy_speedup",
    "check_one_way_time",
    "check_zero3_gpus",
]
