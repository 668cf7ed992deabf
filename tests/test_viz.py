"""Pictures come from the schedules: one arrow per transfer, buffers that match verify, a playable animation."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import mycollectives as mc  # noqa: E402
from mycollectives.algorithms import Spec, build  # noqa: E402
from mycollectives.sim import simulate, sweep  # noqa: E402
from mycollectives.topology import cluster, dgx_a100  # noqa: E402
from mycollectives.viz import (  # noqa: E402
    animate,
    best_changes,
    buffer_states,
    busbw_plot,
    draw_buffers,
    draw_round,
    draw_topology,
    link_heatmap,
    mask_colours,
    spacetime,
    spacetime_trace,
    to_html,
)


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _remote(schedule):
    return sum(int((r.src != r.dst).sum()) for r in schedule.rounds)


@pytest.mark.parametrize("algorithm", ["ring", "recursive_doubling", "double_binary_tree"])
def test_spacetime_draws_one_arrow_per_transfer(algorithm):
    s = build(Spec("all_reduce", 6, count=12, segment=3), algorithm)
    ax = spacetime(s)
    assert len(ax.collections[0].get_segments()) == _remote(s)
    ax = spacetime(s, round_times=np.full(len(s.rounds), 2e-6))
    assert ax.get_xlim()[1] == pytest.approx(2e-6 * len(s.rounds))


def test_spacetime_select_splits_a_schedule_into_its_parts():
    s = build(Spec("all_reduce", 8, count=16, segment=2), "double_binary_tree")
    halves = [spacetime(s, select=lambda r, lo=lo: (r.doff >= lo) & (r.doff < lo + 8)) for lo in (0, 8)]
    counts = [len(ax.collections[0].get_segments()) for ax in halves]
    assert sum(counts) == _remote(s) and counts[0] == counts[1] > 0
    assert all(ax.get_xlim()[1] == len(s.rounds) for ax in halves)  # both on the whole schedule's rounds


def test_spacetime_of_a_simulation_uses_its_round_times():
    from mycollectives.algorithms import schedule_for

    r = simulate("all_reduce", "double_binary_tree", 1 << 22, dgx_a100())
    s = schedule_for("all_reduce", "double_binary_tree", 8, 1 << 22)
    assert len(s.rounds) == len(r.round_time)
    ax = spacetime(s, round_times=r.round_time)
    assert ax.get_xlim()[1] == pytest.approx(r.round_time.sum())


def test_trace_diagram_from_a_local_world():
    import torch

    world = mc.LocalWorld(4)
    world.run(lambda rank: mc.all_reduce(torch.ones(8), algorithm="ring"))
    ax = spacetime_trace(world.trace, collective="all_reduce")
    mine = [e for e in world.trace if e.collective == "all_reduce"]
    assert len(ax.collections[0].get_segments()) == len(mine) == 24  # 2(p-1) rounds of p messages
    with pytest.raises(ValueError):
        spacetime_trace([])


@pytest.mark.parametrize(
    "collective,algorithm,full",
    [("all_reduce", "ring", True), ("all_gather", "bruck", False), ("reduce", "binomial", None)],
)
def test_buffer_states_end_where_the_collective_says(collective, algorithm, full):
    p = 5
    s = build(Spec(collective, p, count=10), algorithm)
    states = buffer_states(s)
    assert len(states) == len(s.rounds) + 1
    everyone = np.uint64((1 << p) - 1)
    if full:  # every element on every rank holds every contribution
        assert all((m == everyone).all() for m in states[-1])
    elif full is False:  # all-gather: block j holds rank j's data alone
        for m in states[-1]:
            assert (m.reshape(p, -1) == (np.uint64(1) << np.arange(p, dtype=np.uint64))[:, None]).all()
    else:  # reduce: the root alone ends complete
        assert (states[-1][0] == everyone).all() and not (states[-1][1] == everyone).all()
    assert not (states[0][0] == everyone).all()


def test_mask_colours_white_empty_grey_full_own_colour_alone():
    rgb = mask_colours(np.array([0, 1, 0b111], dtype=np.uint64), 3)
    assert rgb[0].tolist() == [1.0, 1.0, 1.0]
    assert rgb[2].tolist() == [0.25] * 3
    assert not np.allclose(rgb[1], rgb[0])


def test_draw_buffers_and_rounds():
    s = build(Spec("all_reduce", 4, count=8), "ring")
    ax = draw_buffers(s, 2)
    assert ax.images[0].get_array().shape[:2] == (4, 8)
    ax = draw_round(s, 0, dgx_a100())
    assert len([t for t in ax.texts if t.arrow_patch is not None]) == 4
    ax = draw_round(s, 1)
    assert "round 2" in ax.get_title()


def test_topology_and_heatmap_from_a_simulation():
    r = simulate("all_reduce", "ring", 1 << 20, cluster("dgx_a100", 2, nics_per_node=2))
    ax = draw_topology(r.topology, link_values=r.link_utilisation)
    assert len(ax.collections[0].get_segments()) == r.topology.num_links // 2
    ax = link_heatmap(r)
    shown = ax.images[0].get_array()
    assert shown.shape[1] == len(r.round_time) and 0 <= shown.min() and shown.max() <= 1 + 1e-6


def test_busbw_plot_marks_the_crossovers():
    res = sweep(
        "all_reduce", ["recursive_doubling", "ring"], dgx_a100(), [1 << 10, 1 << 16, 1 << 22, 1 << 28]
    )
    changes = best_changes(res)
    assert changes and changes[0][1:] == ("recursive_doubling", "ring")
    ax = busbw_plot(res)
    assert len(ax.lines) == 2 + len(changes)


def test_animation_is_self_contained_html():
    s = build(Spec("all_reduce", 3, count=3), "ring")
    html = to_html(animate(s, interval=100))
    assert "<script" in html and html.count("data:image/png;base64") >= 1
    assert f"frames[{len(s.rounds) - 1}]" in html
    assert 'class="fa ' not in html  # buttons labelled without Font Awesome
    assert "https://" not in html and "http://" not in html  # nothing loaded off the machine


@pytest.mark.browser
@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs a chromium browser")
def test_animation_plays_in_a_browser(tmp_path):
    s = build(Spec("broadcast", 4, count=4), "binomial")
    page = tmp_path / "anim.html"
    page.write_text(to_html(animate(s, interval=100)))
    cmd = [
        "chromium",
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--virtual-time-budget=2000",
        "--dump-dom",
    ]
    dom = subprocess.run([*cmd, page.as_uri()], capture_output=True, text=True, timeout=60).stdout
    assert 'src="data:image/png;base64' in dom  # the player put a frame on the page


def test_step_through_builds_a_widget():
    pytest.importorskip("ipywidgets")
    from mycollectives.viz import step_through

    box = step_through(build(Spec("all_reduce", 3, count=3), "ring"))
    assert box.children[0].max == 3


def test_chunk_labels_name_what_each_arrow_carries():
    from mycollectives.viz import chunk_bounds, chunk_label

    s = build(Spec("all_reduce", 4, count=8), "ring")
    bounds = chunk_bounds(s)
    assert bounds.tolist() == [0, 2, 4, 6, 8]
    assert chunk_label(bounds, [(2, 2)]) == "c1"
    assert chunk_label(bounds, [(0, 4)]) == "c0-1"
    assert chunk_label(bounds, [(0, 2), (4, 2)]) == "c0,2"
    assert chunk_label(np.array([0, 8]), [(0, 8)]) == ""  # one chunk: nothing to name
    for k, rnd in enumerate(s.rounds):
        ax = draw_round(s, k)
        labels = [t.get_text() for t in ax.texts if t.arrow_patch is None and t.get_text().startswith("c")]
        want = sorted(f"c{off // 2}" for off in rnd.doff.tolist())
        assert sorted(labels) == want, (k, labels, want)
        heads = [t.arrow_patch for t in ax.texts if t.arrow_patch is not None]
        assert len(heads) == 4 and all(a.shrinkB >= 10 for a in heads)  # the head stops short of the disc
        plt.close("all")


def test_buffers_are_labelled_by_chunk_and_whole_buffers_by_element():
    ring = build(Spec("all_reduce", 4, count=8), "ring")
    ax = draw_buffers(ring, 1)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["c0", "c1", "c2", "c3"]
    bino = build(Spec("broadcast", 4, count=8), "binomial")
    ax = draw_round(bino, 0)
    assert not [t for t in ax.texts if t.arrow_patch is None and t.get_text().startswith("c")]
    assert draw_buffers(bino, 1).get_xlabel() == "element"


def test_animation_fits_a_book_column():
    from mycollectives.viz.animation import FIGSIZE

    assert FIGSIZE[0] * 100 <= 720  # shown unscaled in a ~700 px column: text keeps its size
    anim = animate(build(Spec("all_gather", 5, count=1), "bruck"), interval=100)
    assert anim._fig.get_size_inches()[0] == FIGSIZE[0]
    assert "<script" in to_html(anim)


def test_message_lanes_give_every_message_its_own_bar():
    import torch

    world = mc.LocalWorld(4)
    world.run(lambda rank: mc.all_reduce(torch.ones(8), algorithm="ring"))
    ax = mc.viz.message_lanes(world.trace, collective="all_reduce")
    bars = [b for c in ax.containers for b in c]
    assert len(ax.containers) == 6 and len(bars) == 24  # 2(p-1) rounds, p messages each
    assert len({round(b.get_y(), 3) for b in bars}) == 24  # no two messages share a row
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "0 \u2192 1",
        "1 \u2192 2",
        "2 \u2192 3",
        "3 \u2192 0",
    ]
    with pytest.raises(ValueError):
        mc.viz.message_lanes([])


def test_time_panels_draw_one_panel_per_algorithm():
    from mycollectives.bench.predicted import Point
    from mycollectives.book.bench.figures import time_panels

    algs = ("ring", "direct", "bruck", "pairwise")
    pts = {
        m: [Point("all_gather", a, 1 << k, 4, 10.0 * k, f * k) for a in algs for k in (10, 12, 14)]
        for m, f in (("one", 9.0), ("two", 11.0))
    }
    fig = time_panels(pts, "all_gather", "test")
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in shown] == list(algs) and len(fig.axes) == 6  # 2 rows of 3
    assert all(len(ax.get_lines()) == 3 for ax in shown)  # measured, then one line per model
    assert list(shown[2].get_lines()[1].get_ydata()) == [90.0, 108.0, 126.0]  # bruck, model "one"
