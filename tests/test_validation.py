"""The simulator against published measurements: the asserted set and its held-out half pinned at
what was measured, the fit half's bias and balance, the split's rule, the dataset's completeness (every point sourced
and quoted, every exclusion explained), and the chapter's table generated from it.

Only the fit half is examined point by point; the held-out half is seen through its summary alone.
The virtual cluster is set beside the calculator on the fit rows of one node."""

from __future__ import annotations

import hashlib
import re
import statistics
from pathlib import Path

import pytest

from mycollectives.book.viz import validation
from mycollectives.sim import validate
from mycollectives.topology import NODES

ROOT = Path(__file__).resolve().parents[1]
MODEL_KEYS = {"node", "nodes", "nics_per_node", "nic", "algorithm", "protocol", "size", "gpus", "gpus_per_node",
              "nvls", "sharp", "assumed"}  # fmt: skip


# What the asserted set and its held-out half gave when measured after 15 more asserted rows joined them
# (12 H100 rows of xxrjun/nccl-tests-cluster's 10-node logs with 1, 2 and 4 GPUs per node, 2 of Voltage Park's
# 4-node logs, 1 RoCE ring of NVIDIA/nccl#1368), entered and split by the hash rule before they were simulated
# (the simulator of NCCL 2.30.7's model, NVLink at the Ring graph's allotment, nt149 asserted, no model change):
# regression guards, not targets the model was fitted to. The set misses validate.TARGETS' worst (20 %) and the
# held-out half HELD_OUT_TARGETS' worst (25 %): the appendix prints the gap.
# Re-measured after 3 more asserted rows joined, entered and split the same way before they were simulated (OCI's
# GB200 all-to-all over 2 and 3 racks, fit; NVIDIA/nccl-tests#322's 128 x 8 H100 RoCE ring, held out); before:
# asserted 90 points, median 0.0215; held out 32 points, median 0.0224, signed median -0.0007, 15 above, 17 below.
ASSERTED = {"points": 93, "median": 0.0235, "worst": 0.3462}
HELD_OUT = {
    "points": 33,
    "median": 0.0235,
    "worst": 0.2603,
    "signed_median": -0.0013,
    "above": 15,
    "below": 18,
}
SLACK = 0.002  # rounding of the numbers above


def test_asserted_set_is_no_worse_than_when_it_was_measured():
    s = validate.summary("asserted")
    assert s["points"] == ASSERTED["points"], s
    assert s["median"] <= ASSERTED["median"] + SLACK, s
    assert s["worst"] <= ASSERTED["worst"] + SLACK, s


def test_held_out_set_is_no_worse_than_when_it_was_measured():
    s = validate.summary("asserted", "held_out")
    assert s["points"] == HELD_OUT["points"], s
    assert s["median"] <= HELD_OUT["median"] + SLACK, s
    assert s["worst"] <= HELD_OUT["worst"] + SLACK, s
    assert abs(s["signed_median"]) <= abs(HELD_OUT["signed_median"]) + SLACK, s


def test_split_follows_the_rule_written_in_the_data_file():
    """The rule is data: a hash of the row id, nothing about the row's error; one row in three is held out."""
    rule = validate.dataset()["split"]
    assert rule["hash"] == "sha256" and rule["modulus"] == 3 and rule["held_out_residue"] == 0
    for p in validate.points():
        held = int(hashlib.sha256(p.id.encode()).hexdigest(), 16) % 3 == 0
        assert p.split == ("held_out" if held else "fit"), p.id
    asserted = validate.chosen("asserted")
    held = sum(p.split == "held_out" for p in asserted)
    assert 0.2 <= held / len(asserted) <= 0.5, held


def test_nt149_is_asserted_as_every_hgx_a100_board_is():
    p = next(p for p in validate.points() if p.id == "nt149-a100-1n-hpe")
    assert p.set == "asserted" and p.model["node"] == "dgx_a100"


def _signed() -> dict[str, float]:
    """Signed errors of the asserted fit set (the only points a test or a choice of the model looks at)."""
    got = validate.results()
    return {p.id: got[p.id][1] for p in validate.chosen("asserted", "fit")}


def test_fit_set_has_no_bias_in_its_signed_median():
    """Optimism shows in the sign: the signed median error stays within 3 %."""
    assert abs(statistics.median(_signed().values())) <= 0.03, statistics.median(_signed().values())


def test_two_node_h100_nvlstree_pays_its_kernel_ceiling():
    """The 2-node H100 points of the fit set ran NVLSTree, and the link-only simulation was 12-19 %
    over them; with the per-channel ceiling of NVLSTree's kernel (perChMaxNVLSTreeBws) they are within 5 %."""
    errs = {i: e for i, e in _signed().items() if i in ("cw-pr92-h100-2n", "modal-h100-2n-4GB")}
    assert len(errs) == 2 and all(abs(e) <= 0.05 for e in errs.values()), errs
    assert all(validate.results()[i][0].algorithm == "NVLSTree" for i in errs)


def test_fit_set_worst_errors_are_where_they_were_measured():
    """Off by more than 15 % in the fit half: only the rings of together-nccl-tests' slower B200 cluster
    (use3a-ss, 12-25 % under the model and under the other B200 cluster of the same stated hardware) and
    its 2-node CollNet row, entered as NCCL's pick with SHARP, which is NVLSTree at 2 nodes (34.6 %)."""
    errs = _signed()
    far = {i for i, e in errs.items() if abs(e) > 0.15}
    assert far <= {"use3a-b200-46n-ar-ring", "use3a-b200-8n-ag-ring", "use3a-b200-2n-ar-sharp"}, far
    assert max(abs(e) for e in errs.values()) <= 0.3462 + SLACK
    assert all(abs(e) <= 0.15 for i, e in errs.items() if not i.startswith("use3a-")), errs


def test_fit_set_is_balanced_around_the_published_values():
    """No more than two thirds of the fit points on one side (NVLink at what NCCL's ring search
    allots, 360 GB/s on Hopper, and pipelines paying their fill)."""
    errs = list(_signed().values())
    over = sum(e > 0 for e in errs)
    assert max(over, len(errs) - over) <= 2 * len(errs) / 3


def test_every_row_says_whether_its_source_says_it():
    """A row whose source does not state what it records says so: inferred (the model's assumptions,
    node counts or forced channels), ambiguous, contradicted, or not found."""
    for p in validate.points():
        check = p.raw["source_check"]
        assert check["status"] in ("as stated", "inferred", "ambiguous", "contradicted", "not found"), p.id
        assert check["note"], p.id
        if p.model and p.model["assumed"]:
            assert check["status"] != "as stated", p.id
    status = {p.id: p.raw["source_check"]["status"] for p in validate.points()}
    assert status["nccl1807-b200-1n"] == "not found" and status["nccl2169-h100-1n-4gpu-a2a"] == "ambiguous"
    assert status["azure-a100-1n-8192MiB"] == "contradicted"


def test_asserted_set_covers_what_the_issue_asks():
    asserted = [p for p in validate.points() if p.set == "asserted"]
    assert {p.collective for p in asserted} >= {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}
    assert min(p.nodes for p in asserted) == 1 and max(p.nodes for p in asserted) >= 32
    assert {p.gpu for p in asserted} >= {"a100", "h100", "h200", "b200"}


def test_every_point_is_sourced_and_every_exclusion_explained():
    bib = (ROOT / "references.bib").read_text()
    keys = set(re.findall(r"^@\w+\{([^,]+),", bib, flags=re.M))
    for p in validate.points():
        r = p.raw
        assert r["source_url"].startswith("https://") and r["quote"] and r["what_was_run"], p.id
        assert p.source in keys, f"{p.id}: {p.source} is not in references.bib"
        assert p.set in ("asserted", "outside", "deepep"), p.id
        assert (p.set == "asserted") == (p.why_outside is None), p.id
        if p.model is not None:
            # the model says what the machine is, never a correction: no per-point constants
            assert set(p.model) == MODEL_KEYS and p.model["node"] in NODES, p.id
        if p.set == "asserted":
            assert p.model is not None and r["tool"] != "DeepEP", p.id


def test_chapter_table_is_generated_from_the_dataset():
    assert (ROOT / "chapters" / "_validation_table.md").read_text() == validation.table()


@pytest.mark.timeout(600)
def test_the_virtual_cluster_is_set_beside_the_calculator_on_the_fit_rows_of_one_node():
    """The appendix's side-by-side table on the one-node fit rows: every row is run data-free or says
    why not, rows priced by NCCL's model (NVLS) agree with the calculator by construction, and the rings,
    run message by message, stay within 5 % of it (3.0 % when measured)."""
    from mycollectives.virtual import validate as virtual_validate

    pts = [p for p in validate.chosen("asserted", "fit") if p.nodes == 1]
    rows = virtual_validate.published(pts)
    assert [r["id"] for r in rows] == [p.id for p in pts]
    for r in rows:
        assert (r["virtual_busbw"] is None) == (r["why"] is not None), r
        if r["virtual_busbw"] is None:
            continue
        apart = r["virtual_busbw"] / r["calculator_busbw"] - 1
        by_nccls_model = validate.results()[r["id"]][0].algorithm in ("NVLS", "NVLSTree", "CollNetDirect")
        assert abs(apart) <= (0.001 if by_nccls_model else 0.05), r
    assert sum(r["virtual_busbw"] is not None for r in rows) >= len(rows) - 2
    with pytest.raises(ValueError, match="has no model"):
        virtual_validate.published([p for p in validate.points() if p.model is None][:1])


@pytest.mark.timeout(600)
def test_rows_of_the_same_node_with_and_without_nvls_are_run_apart():
    """The virtual runs are shared between rows of one cluster and call only: NVLS off is another cluster."""
    from mycollectives.topology import cluster
    from mycollectives.virtual import validate as virtual_validate

    pts = [p for p in validate.points() if p.id in ("mle-b200-1n-8gpu-nvls", "mle-b200-1n-ring-nvlsoff")]
    on, off = virtual_validate.published(pts)
    size = int(pts[1].model["size"])
    alone = virtual_validate.virtual_busbw("all_reduce", "auto", size, cluster("dgx_b200", 1, nvls=False), 8)
    assert off["virtual_busbw"] == pytest.approx(alone) and off["virtual_busbw"] != on["virtual_busbw"]
