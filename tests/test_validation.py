"""The simulator against published measurements: the targets on the asserted set, the dataset's
completeness (every point sourced and quoted, every exclusion explained), and the chapter's table
generated from it."""

from __future__ import annotations

import re
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
