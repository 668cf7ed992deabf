"""The simulator against published measurements: the targets on the asserted fit set, the held-out
set pinned at what was measured, the split's rule, the dataset's completeness (every point sourced
and quoted, every exclusion explained), and the chapter's table generated from it.

Only the fit half is examined point by point; the held-out half is seen through its summary alone."""

from __future__ import annotations

import hashlib
import re
import statistics
from pathlib import Path

from mycollectives.book.viz import validation
from mycollectives.sim import validate
from mycollectives.topology import NODES

ROOT = Path(__file__).resolve().parents[1]
MODEL_KEYS = {"node", "nodes", "nics_per_node", "nic", "algorithm", "protocol", "size", "gpus", "gpus_per_node",
              "nvls", "sharp", "assumed"}  # fmt: skip


def test_asserted_set_meets_the_targets():
    s = validate.summary("asserted")
    assert s["points"] >= 30
    assert s["median"] <= validate.TARGETS["median"], s
    assert s["worst"] <= validate.TARGETS["worst"], s


# What the held-out half gave when it was first measured (the simulator of NCCL 2.30.7's model, NVLink
# at the Ring graph's allotment, nt149 asserted): a regression guard, not a target the model was fitted to.
HELD_OUT = {
    "points": 21,
    "median": 0.0213,
    "worst": 0.1915,
    "signed_median": -0.0072,
    "above": 8,
    "below": 13,
}
SLACK = 0.002  # rounding of the numbers above


def test_held_out_set_is_no_worse_than_when_it_was_measured():
    s = validate.summary("asserted", "held_out")
    assert s["points"] == HELD_OUT["points"], s
    assert s["median"] <= HELD_OUT["median"] + SLACK, s
    assert s["worst"] <= HELD_OUT["worst"] + SLACK, s
    assert abs(s["signed_median"]) <= abs(HELD_OUT["signed_median"]) + SLACK, s
    # the issue's targets for data the model was not fitted to
    assert s["median"] <= 0.10 and s["worst"] <= 0.25 and abs(s["signed_median"]) <= 0.05, s


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


def test_fit_set_worst_error_is_within_15_percent():
    """No fit point is off by more than 15 %: chains and trees pay their pipeline's fill."""
    errs = _signed()
    assert max(abs(e) for e in errs.values()) <= 0.15, max(errs.items(), key=lambda kv: abs(kv[1]))


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
