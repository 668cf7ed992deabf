"""The package's layers, and the imports between its modules (appendix "The package").

Every module belongs to a layer; a module imports only from its own layer
or the ones below, and no chain of imports comes back to where it started.
:func:`import_graph` reads every import of the package's source (at the top
of a file or inside a function alike) and :func:`violations` lists those
that break either rule; a test holds it to none.

>>> layer_of("mycollectives.algorithms.registry") < layer_of("mycollectives.api.core")
True
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the package, mycollectives/

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("errors", "ops", "schedule", "nccl", "topology", "flight", "timing", "cliargs", "datafree")),
    ("transport", ("transport", "symmetric")),
    ("collectives", ("collectives",)),
    ("algorithms", ("algorithms",)),
    ("consumers of schedules", ("verify", "plan", "cost")),
    ("execution and choice", ("executor", "landing", "loadstore", "auto")),
    ("API", ("api",)),
    (
        "above the API",
        (
            "pingpong",
            "patch",
            "sim",
            "viz",
            "bench",
            "memory",
            "parallel",
            "steptime",
            "doctor",
            "virtual",
            "torchpg",
        ),
    ),
    ("the package", ("",)),
    ("the book's support", ("book",)),  # on top: it may use the package's public names; nothing imports it
)


def layer_of(module: str) -> int:
    """The layer of a module of the package, by its first name below ``mycollectives``."""
    parts = module.split(".")
    head = parts[1] if len(parts) > 1 else ""
    for i, (_, names) in enumerate(LAYERS):
        if head in names:
            return i
    raise KeyError(f"{module} is in no layer of mycollectives.book.layers.LAYERS")


def modules() -> dict[str, Path]:
    """Every module of the package, by dotted name."""
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        name = ".".join(rel.parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _resolve(module: str, is_package: bool, node: ast.ImportFrom | ast.Import, known) -> list[str]:
    """The package's modules an import statement of ``module`` reaches."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "mycollectives" and a.name in known]
    base = module if is_package else module.rsplit(".", 1)[0]
    if node.level:
        for _ in range(node.level - 1):
            base = base.rsplit(".", 1)[0]
        target = f"{base}.{node.module}" if node.module else base
    else:
        target = node.module or ""
    if target.split(".")[0] != "mycollectives":
        return []
    out = []
    for alias in node.names:  # `from pkg import mod` reaches the module, else the package
        sub = f"{target}.{alias.name}"
        out.append(sub if sub in known else target)
    return [m for m in dict.fromkeys(out) if m in known]


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (anywhere in its source)."""
    known = modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        is_package = path.name == "__init__.py"
        edges = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges.update(_resolve(name, is_package, node, known))
        edges.discard(name)
        graph[name] = edges
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of imports, if there is one (depth-first search)."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return stack[stack.index(n) :] + [n]
            if n not in state and (found := visit(n)):
                return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def violations(graph: dict[str, set[str]] | None = None) -> list[str]:
    """Every import that goes up a layer, and one cycle if there is one."""
    graph = import_graph() if graph is None else graph
    out = []
    for src, targets in sorted(graph.items()):
        for dst in sorted(targets):
            if layer_of(dst) > layer_of(src):
                up, down = LAYERS[layer_of(dst)][0], LAYERS[layer_of(src)][0]
                out.append(f"{src} ({down}) imports {dst} ({up}), a layer above it")
    cycle = _cycle(graph)
    if cycle:
        out.append("a cycle of imports: " + " -> ".join(cycle))
    return out
