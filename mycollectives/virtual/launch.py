"""``python -m mycollectives.virtual``: a torchrun script, unmodified, on a virtual cluster.

::

    python -m mycollectives.virtual --nnodes 2 --nproc-per-node 8 train.py --epochs 1
    python -m mycollectives.virtual --cluster dgx_b200 --trace run.json -m mypkg.train

takes torchrun's flags (``--nnodes``, ``--nproc-per-node``, ``-m``; the
rendezvous flags are accepted and mean nothing here) and the cluster's
(``--cluster``, ``--nics-per-node``, ``--nic``, ``--fabric``, ``--slow``,
``--degrade``, ...: what :func:`mycollectives.virtual.run` takes). Every rank
is a thread of this process running the script as ``__main__`` with globals
of its own, in virtual time: it sees torchrun's environment (``RANK``,
``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``,
``MASTER_ADDR``, ``MASTER_PORT``) in an ``os.environ`` of its own
(:mod:`.environ`), a virtual CUDA device (:mod:`.cuda`), and a
``torch.distributed`` whose ``init_process_group`` joins the run
(:mod:`mycollectives.torchpg.ondemand`). At the end it prints a table per rank
in virtual time (:mod:`.trace`); ``--trace FILE`` writes the timeline.

The tensors live on the CPU underneath. To the script's own code (not
torch's or a library's) a tensor reads as on the GPU the script last named
(``x.device == torch.device("cuda", local_rank)``, ``x.is_cuda``); what
differs from a GPU node (:mod:`.devices`): a tensor made without naming a
device reads as on the GPU too; torch and libraries see ``cpu``, so
``print(x)`` shows no ``device=``, and ``x.numpy()`` works where CUDA
refuses it. ``torch.cuda.synchronize()`` waits for the rank's collectives,
async ones included; a stream's or event's ``synchronize`` does not.

Exit codes: 0; 1 when a rank fails (its rank and traceback are printed, the
other ranks are stopped), deadlocks (who waits on whom) or uses a CUDA
feature not emulated (one line); 2 for bad arguments, before anything runs.
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import importlib.util
import os
import shutil
import sys
import tempfile
import traceback
import types
from dataclasses import dataclass

from ..topology.nodes import NODES, node_spec
from ..transport.base import TransportDeadlock
from . import cuda as _cuda
from . import cudapatch as _cudapatch
from . import environ as _environ
from .cliopts import add_options, cluster_kwargs

PROG = "python -m mycollectives.virtual"
FLIGHT_ENV = "MYCOLLECTIVES_FLIGHT_DIR"  # where a failed call's flight record goes (flight/files.py)


@dataclass
class Script:
    """What every rank runs: compiled code, and how ``__main__`` describes it."""

    code: types.CodeType
    file: str | None
    spec: object | None  # the module spec, with -m
    argv: list[str]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Run a torchrun training script, unmodified, on a virtual GPU cluster (virtual time).",
    )
    add_options(p)
    p.add_argument("-m", "--module", action="store_true", help="run the target as a module, as python -m")
    p.add_argument("target", metavar="script.py | module", help="the script torchrun would run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    return p


def load(target: str, module: bool, args: list[str]) -> Script:
    """The target's code (raises ValueError with what is wrong: a missing file, an unknown module)."""
    if not module:
        if not os.path.isfile(target):
            raise ValueError(f"script {target!r} not found")
        with open(target, "rb") as f:
            source = f.read()
        path = os.path.abspath(target)
        return Script(compile(source, path, "exec", dont_inherit=True), path, None, [path, *args])
    try:
        spec = importlib.util.find_spec(target)
        if spec is not None and spec.submodule_search_locations is not None:
            spec = importlib.util.find_spec(target + ".__main__")
    except (ImportError, ValueError) as e:
        raise ValueError(f"module {target!r} not found ({e})") from None
    if spec is None or spec.loader is None:
        raise ValueError(f"module {target!r} not found")
    code = spec.loader.get_code(spec.name)
    if code is None:
        raise ValueError(f"module {target!r} has no code to run")
    return Script(code, spec.origin, spec, [spec.origin or target, *args])


def torchrun_env(rank: int, nproc: int, world: int, master: tuple[str, str]) -> dict[str, str]:
    """The variables torchrun sets for ``rank`` (``nproc`` ranks per node)."""
    env = {
        "RANK": rank,
        "LOCAL_RANK": rank % nproc,
        "WORLD_SIZE": world,
        "LOCAL_WORLD_SIZE": nproc,
        "GROUP_RANK": rank // nproc,
        "ROLE_RANK": rank,
        "ROLE_WORLD_SIZE": world,
        "MASTER_ADDR": master[0],
        "MASTER_PORT": master[1],
        "OMP_NUM_THREADS": 1,
    }
    return {k: str(v) for k, v in env.items()}


def rank_main(script: Script, rank: int, env: dict[str, str], gpus: int, gpu_name: str) -> None:
    """One rank: the script as ``__main__`` with its own globals, environment and virtual GPU."""
    os.environ.give(env)
    try:
        with _cudapatch.setup_gpu(rank, gpus, gpu_name):
            main = types.ModuleType("__main__")
            main.__dict__.update(__builtins__=builtins, __file__=script.file, __spec__=script.spec)
            if script.spec is not None:
                main.__dict__.update(__loader__=script.spec.loader, __package__=script.spec.parent)
            try:
                exec(script.code, main.__dict__)
            except SystemExit as e:
                if e.code not in (None, 0):
                    raise RuntimeError(f"the script called sys.exit({e.code!r})") from None
    finally:
        os.environ.take()


@contextlib.contextmanager
def _process(script: Script):
    """For the run: ``sys.argv``, ``sys.path[0]`` as torchrun's child would have them; environ per thread."""
    argv, path, hook = sys.argv, list(sys.path), sys.excepthook  # each rank's init_process_group wraps it
    sys.argv = list(script.argv)
    if script.spec is None:
        sys.path.insert(0, os.path.dirname(script.file))
    try:
        with _environ.per_thread():
            yield
    finally:
        sys.argv, sys.excepthook = argv, hook
        sys.path[:] = path


def _report(failed: list, err: BaseException) -> str:
    """Why the run failed: a feature not emulated (one line); the run's wall-clock limit (one line: what
    the stopped ranks raised says nothing more); a deadlock's waits; one rank's traceback."""
    first = next((e for _, e in failed if isinstance(e, _cuda.NotEmulated)), None)
    if first is not None:
        return f"{PROG}: error: {first}"
    if isinstance(err, TimeoutError) and str(err).startswith("virtual run still going after"):
        from .runner import WALL_ENV

        return f"{PROG}: error: {err} (--timeout or ${WALL_ENV} gives it longer)"
    if any(_deadlock(e) for e in (err, *(e for _, e in failed))):
        lines = [f"{PROG}: error: the script deadlocked: {_deadlock(err) or err}"]
        for rank, e in failed:
            where = traceback.extract_tb(e.__traceback__)
            mine = [f for f in where if f.filename == _script_file[0]] or where[-1:]
            if mine:
                lines.append(f"  rank {rank} waits at {mine[-1].filename}:{mine[-1].lineno}: {mine[-1].line}")
        return "\n".join(lines)
    rank, e = failed[0] if failed else (None, err)
    who = f"rank {rank}" if rank is not None else "the run"
    tb = "".join(traceback.format_exception(type(e), e, _from_script(e.__traceback__))).rstrip()
    return f"{PROG}: error: {who} failed; the other ranks were stopped. Its traceback:\n{tb}"


_script_file: list = [None]


def _deadlock(err: BaseException | None) -> str | None:
    """The deadlock's own message (who waits on whom), if ``err`` comes from one."""
    seen = 0
    while err is not None and seen < 8:
        text = str(err)
        if isinstance(err, TransportDeadlock) or "deadlock at virtual time" in text:
            return (
                text[text.find("deadlock at virtual time") :].split("\n")[0]
                if "deadlock at" in text
                else text
            )
        err, seen = err.__cause__ or err.__context__, seen + 1
    return None


def _from_script(tb):
    """The traceback from the script's first frame on (the launcher's own frames say nothing to its author)."""
    t = tb
    while t is not None and t.tb_frame.f_code.co_filename != _script_file[0]:
        t = t.tb_next
    return t or tb


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module); returns the exit code."""
    from .runner import topology_of

    p = parser()
    a = p.parse_args(argv)
    try:
        kw, nnodes, nproc = cluster_kwargs(a)
        topo = topology_of(a.cluster, nnodes, kw.pop("degrade", None), **kw.pop("cluster", {}))
        script = load(a.target, a.module, a.args)
        _writable(a.trace)
    except ValueError as e:
        p.error(str(e))
    with _flight_dir(a.flight_dir) as flight:
        code, result = _launch(script, topo, nnodes, nproc, kw, a, flight)
    if code:
        return code
    if not a.quiet:
        print(result.table(), file=sys.stderr)
    if a.trace:
        result.trace(a.trace)
        if not a.quiet:
            print(f"trace written to {a.trace} (open it in https://ui.perfetto.dev)", file=sys.stderr)
    return 0


def _writable(trace: str | None) -> None:
    """``--trace FILE`` can be written once the run ends: its folder exists and is no file."""
    if trace is None:
        return
    folder = os.path.dirname(os.path.abspath(trace))
    if not os.path.isdir(folder) or os.path.isdir(trace):
        what = f"{trace!r} is a directory" if os.path.isdir(trace) else f"folder {folder!r} does not exist"
        raise ValueError(f"--trace {trace}: {what}; expected a file path in an existing folder")


@contextlib.contextmanager
def _flight_dir(given: str | None):
    """Where the ranks' flight records go: ``--flight-dir``, kept; else a directory removed at the end."""
    if given:
        yield given
        return
    path = tempfile.mkdtemp(prefix="mycollectives-virtual-flight-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _launch(script: Script, topo, nnodes: int, nproc: int, kw: dict, a, flight: str):
    """Run every rank; ``(0, run)``, or ``(1, None)`` after saying why it failed."""
    from .runner import run

    world, failed = nnodes * nproc, []
    gpu_name = f"{node_spec(a.cluster).gpu} (virtual)"
    master = (a.master_addr, str(a.master_port))
    _script_file[0] = script.file

    def fn(rank: int) -> None:
        env = torchrun_env(rank, nproc, world, master) | {FLIGHT_ENV: flight}
        try:
            rank_main(script, rank, env, nproc, gpu_name)
        except BaseException as e:
            failed.append((rank, e))
            raise

    with _process(script):
        try:
            return 0, run(fn, topo, world_size=world, **kw)
        except Exception as e:  # noqa: BLE001 - reported by rank, with its traceback
            if not failed and isinstance(e, ValueError) and str(e).startswith("virtual.run:"):
                print(f"{PROG}: error: {e}", file=sys.stderr)  # refused before any rank ran
                return 2, None
            text = _report([f for f in failed if not isinstance(f[1], _aborted())], e)
    if not a.flight_dir:  # the records are gone: say nothing of them
        text = "\n".join(line for line in text.splitlines() if flight not in line)
    print(text, file=sys.stderr)
    return 1, None


def _aborted():
    from .maestro import Aborted

    return Aborted


__all__ = ["main", "parser", "NODES"]
