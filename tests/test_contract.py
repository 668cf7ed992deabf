"""The transport contract is declared, not guessed: every transport subclasses
``TransportBase``, ``bind`` installs one, subgroups are one generic view, and
no module of the package probes a transport, writes another module's private
names or imports another subpackage's private ones (read off the source)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
import torch

import mycollectives as mc
from mycollectives.collectives import functions
from mycollectives.transport import SubGroup, TransportBase, bind, current_local

PACKAGE = Path(mc.__file__).resolve().parent
TRANSPORTISH = {"t", "transport", "parent", "group", "p2p", "inner", "world"}


def _name(node) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def _head(node) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _target(n: ast.ImportFrom, package: str) -> str:
    """The module an import of the package names (``package``: the importing file's package)."""
    return importlib.util.resolve_name("." * n.level + (n.module or ""), package) if n.level else n.module


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a name inside a module, not a module
        return False


def _ours(n: ast.ImportFrom) -> bool:
    return bool(n.level) or (n.module or "").startswith("mycollectives.")


def _modules_bound(tree: ast.Module, package: str) -> dict[str, str]:
    """Names this file binds to a module of the package, and the module each names
    (``from ..transport import local as _local``: ``_local`` -> ``mycollectives.transport.local``)."""
    bound = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                if a.name.startswith("mycollectives"):
                    bound[a.asname or "mycollectives"] = a.name if a.asname else "mycollectives"
        elif isinstance(n, ast.ImportFrom) and _ours(n):
            base = _target(n, package)
            bound |= {
                a.asname or a.name: f"{base}.{a.name}" for a in n.names if _is_module(f"{base}.{a.name}")
            }
    return bound


def _subpackage(module: str) -> list[str]:
    return module.split(".")[:2]


def violations(source: str, module: str, package: str | None = None) -> list[str]:
    """What breaks the contract in ``source``, the text of ``module`` (of ``package``: the module's
    parent by default, the module itself for a package's ``__init__``)."""
    package = package or module.rsplit(".", 1)[0]
    tree, found = ast.parse(source), []
    modules = _modules_bound(tree, package)
    written = {
        id(x)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
        for target in (n.targets if isinstance(n, ast.Assign) else [n.target])
        for x in ast.walk(target)
    }  # a write's own names: reported as a write
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and _name(n.func) in ("getattr", "hasattr") and n.args:
            arg = _name(n.args[0]) or ""
            if arg in TRANSPORTISH or "transport" in arg.lower():
                found.append(f"{module}:{n.lineno}: probes a transport: {ast.unparse(n)}")
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for target in n.targets if isinstance(n, ast.Assign) else [n.target]:
                for a in (x for x in ast.walk(target) if isinstance(x, ast.Attribute) and _private(x.attr)):
                    head = _head(a)
                    if head in modules or head in TRANSPORTISH or "transport" in (head or ""):
                        found.append(f"{module}:{n.lineno}: writes a private name: {ast.unparse(target)}")
        if isinstance(n, ast.Attribute) and id(n) not in written and _private(n.attr):
            bound = modules.get(_name(n.value) or "") if isinstance(n.value, ast.Name) else None
            if bound is not None and _subpackage(bound) != _subpackage(module):
                found.append(
                    f"{module}:{n.lineno}: reads another subpackage's private name: {ast.unparse(n)}"
                )
        if isinstance(n, ast.ImportFrom) and _ours(n):
            target = _target(n, package)
            if _subpackage(target) == _subpackage(module):
                continue  # inside one subpackage
            names = [*target.split(".")[1:], *(a.name for a in n.names)]
            if any(_private(x) for x in names):
                found.append(
                    f"{module}:{n.lineno}: imports another subpackage's private name: {ast.unparse(n)}"
                )
    return found


def _library() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        if "book" not in rel.parts:
            out[".".join(rel.parts).removesuffix(".__init__")] = path
    return out


def test_no_module_probes_a_transport_or_writes_or_imports_private_names():
    found = []
    for module, path in _library().items():
        found += violations(path.read_text(), module, module if path.name == "__init__.py" else None)
    assert found == []


@pytest.mark.parametrize(
    "line,what",
    [
        ('custom = getattr(transport, "new_lane", None)', "probes a transport"),
        ('p2p = getattr(t, "inner", t)', "probes a transport"),
        ('ok = hasattr(parent, "subgroup")', "probes a transport"),
        ("from ..transport import local as _local\n_local._current.transport = t", "writes a private name"),
        ("transport._flight = rec", "writes a private name"),
        ("from ..sim.engine import _messages", "imports another subpackage's private name"),
        ("from ..transport import _transports", "imports another subpackage's private name"),
        ("from ..nccl import model\nbus = model._ll_max_bw(s)", "reads another subpackage's private name"),
    ],
)
def test_the_check_catches_each_old_pattern(line, what):
    found = violations(line, "mycollectives.virtual.runner")
    assert len(found) == 1 and what in found[0], found


def test_what_the_check_lets_through():
    ok = (
        "x = getattr(opts, 'asyncOp', True)\nself._n = 1\nfrom .maestro import _here\nfrom ..transport import bind"
        "\nfrom . import maestro as _m\nwho = _m._here"
    )
    assert violations(ok, "mycollectives.virtual.runner") == []


def test_every_transport_subclasses_the_base():
    from mycollectives.transport.local_rank import LocalTransport
    from mycollectives.transport.shm import ShmTransport
    from mycollectives.transport.torch_dist import TorchDistTransport
    from mycollectives.virtual.transport import VirtualTransport

    for cls in (LocalTransport, TorchDistTransport, ShmTransport, VirtualTransport, SubGroup):
        assert issubclass(cls, TransportBase), cls
    for name in ("subgroup", "new_lane", "exchange", "describe", "point_to_point", "settled", "join_heap"):
        assert callable(getattr(TransportBase, name)), name


def test_every_api_function_is_exported_by_plain_imports():
    source = (PACKAGE / "api" / "__init__.py").read_text() + (PACKAGE / "__init__.py").read_text()
    assert "setattr(" not in source and "globals()" not in source
    for fn in functions():
        assert callable(getattr(mc.api, fn)) and getattr(mc, fn) is getattr(mc.api, fn), fn
        assert fn in mc.__all__ and fn in mc.api.__all__, fn


def test_bind_installs_a_transport_for_the_block_and_restores_the_one_before():
    world = mc.LocalWorld(2)
    a, b = world.transports
    assert current_local() is None
    with bind(a):
        assert current_local() is a
        with bind(b):
            assert current_local() is b
        assert current_local() is a
    assert current_local() is None
    with pytest.raises(TypeError, match="bind: expected a transport"):
        with bind(object()):
            pass


def test_a_local_worlds_subgroup_is_the_generic_view():
    def body(rank):
        t = current_local()
        sub = t.subgroup([3, 1])
        if rank not in (1, 3):
            assert sub is None
            return None
        assert isinstance(sub, SubGroup) and sub.rank == [3, 1].index(rank) and sub.world_size == 2
        x = torch.tensor([float(rank)])
        mc.all_reduce(x, group=sub)
        job, _, name, ranks = sub.describe()
        return x.item(), name, ranks, job == t.describe()[0]

    out = mc.run_local(body, 4)
    assert out[0] is None and out[2] is None
    assert out[1] == out[3] == (4.0, "local world subgroup", [3, 1], True)


def test_a_subgroup_refuses_bad_members_and_a_tag_past_its_parents_limit():
    def body(rank, members, tag):
        return SubGroup(current_local(), members, tag)

    with pytest.raises(ValueError, match="repeat a rank"):
        mc.run_local(body, 2, [0, 0, 1], 0)
    with pytest.raises(ValueError, match=r"members \[5\] are not ranks of a group of 2"):
        mc.run_local(body, 2, [0, 5], 0)

    class Bounded(TransportBase):
        rank, world_size, tag_limit = 0, 2, 1 << 31
        device = torch.device("cpu")

    with pytest.raises(ValueError, match="leaves no room below the parent's limit"):
        SubGroup(Bounded(), [0, 1], (3 << 29) + 1)
    derived = Bounded().subgroup([0, 1])
    assert derived.tag + 2 * mc.transport.COLLECTIVE_TAG <= 1 << 31


def test_a_transport_without_messages_is_refused_before_anything_runs():
    from mycollectives.algorithms import schedule_for
    from mycollectives.executor import execute
    from mycollectives.transport.contract import Capabilities

    class LoadsOnly(TransportBase):
        rank, world_size, timeout = 1, 2, 5.0
        device = torch.device("cpu")
        capabilities = Capabilities(messages=False, heap_loads=True)

        def isend(self, *args, **kwargs):
            raise AssertionError("nothing may be sent")

        irecv = isend

    x = torch.arange(4.0)
    with pytest.raises(ValueError, match="all_reduce on rank 1: LoadsOnly declares no messages"):
        execute(schedule_for("all_reduce", "ring", 2, 16), LoadsOnly(), {0: x}, torch.Tensor.add_)
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0]
