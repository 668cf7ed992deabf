"""The simulator against published measurements: the targets on the asserted set, the dataset's
completeness (every point sourced and quoted, every exclusion explained), and the chapter's table
generated from it."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

from mycollectives.sim import validate
from mycollectives.topology import NODES
from mycollectives.viz import validation

ROOT = Path(__file__).resolve().parents[1]
MODEL_KEYS = {"node", "nodes", "nics_per_node", "nic", "algorithm", "protocol", "size", "gpus", "gpus_per_node",
              "nvls", "sharp", "assumed"}  # fmt: skip


def test_asserted_set_meets_the_targets():
    s = validate.summary("asserted")
    assert s["points"] >= 30
    assert s["median"] <= validate.TARGETS["median"], s
    assert s["worst"] <= validate.TARGETS["worst"], s


def _signed() -> dict[str, float]:
    got = validate.results()
    return {p.id: got[p.id][1] for p in validate.points() if p.set == "asserted"}


def test_asserted_set_has_no_bias_in_its_signed_median():
    """Optimism shows in the sign: the signed median error stays within 3 %."""
    assert abs(statistics.median(_signed().values())) <= 0.03, statistics.median(_signed().values())


def test_two_node_h100_nvlstree_pays_its_kernel_ceiling():
    """Every 2-node H100 point ran NVLSTree, and the link-only simulation was 12-19 % over it; with
    the per-channel ceiling of NVLSTree's kernel (perChMaxNVLSTreeBws) they are within 5 %."""
    errs = {
        i: e for i, e in _signed().items() if i in ("nt309-h100-2n", "cw-pr92-h100-2n", "modal-h100-2n-4GB")
    }
    assert len(errs) == 3 and all(abs(e) <= 0.05 for e in errs.values()), errs
    assert all(validate.results()[i][0].algorithm == "NVLSTree" for i in errs)


def test_asserted_set_worst_error_is_within_the_issue_target():
    """No asserted point is off by more than 15 %: chains and trees pay their pipeline's fill, and
    nt149's A100 board is outside (its own p2p test shows GPU pairs 17 % slower than the others)."""
    errs = _signed()
    assert max(abs(e) for e in errs.values()) <= 0.15, max(errs.items(), key=lambda kv: abs(kv[1]))


def test_asserted_set_is_balanced_around_the_published_values():
    """The issue's target: no more than two thirds of the points on one side (NVLink priced at what
    NCCL says its kernels achieve, 360 GB/s on Hopper, and pipelines paying their fill)."""
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
