"""How :mod:`.cuda` reaches ``torch``: a device mode per rank thread, and patches scoped to the run.

:class:`DeviceMode` is a ``TorchFunctionMode`` (modes are per thread, as
``torch.utils._device.DeviceContext``'s): in a rank thread it turns every
CUDA device a torch call names into the CPU. :func:`installed` replaces the
``torch.cuda`` and ``torch.accelerator`` functions a training script calls,
``torch.load``, ``torch.compile`` and the few constructors that insist on a
device (DDP's ``device_ids``, a ``DeviceMesh`` of ``"cuda"``, ``autocast``).
Each stand-in answers only in a thread that holds a virtual GPU and calls
torch's own function everywhere else; the patches are counted in and out,
and the last rank out puts torch back as it was.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
from types import SimpleNamespace

import torch
from torch.overrides import TorchFunctionMode

from . import cuda as _c
from . import devices as _d
from . import refusals

CPU = torch.device("cpu")
_T = torch.Tensor
# torch functions that draw random numbers and take ``generator=`` (given the rank's when they have none);
# F.dropout takes none: it is computed here as ATen computes it on the CPU (``_dropout``)
_RANDOM = frozenset(
    [torch.rand, torch.randn, torch.randint, torch.randperm, torch.normal, torch.bernoulli, torch.multinomial]
    + [torch.poisson, torch.rand_like, torch.randn_like, torch.randint_like, _T.uniform_, _T.normal_]
    + [_T.random_, _T.bernoulli_, _T.exponential_, _T.geometric_, _T.log_normal_, _T.cauchy_, _T.bernoulli]
    + [_T.multinomial]
)
_PARSE_TO = torch._C._nn._parse_to
_DROPOUT = torch.nn.functional.dropout


def host(d):
    """``d`` with a CUDA device (``torch.device``, ``"cuda[:N]"``, an index) replaced by the CPU (checked;
    tensors read as on it from now on, :mod:`.devices`)."""
    if _names_cuda(d):
        _d.placed(_c.index(d))
        return CPU
    return d


def _names_cuda(d) -> bool:
    cuda = isinstance(d, torch.device) and d.type == "cuda"
    return (
        cuda
        or (isinstance(d, str) and d.startswith("cuda"))
        or (isinstance(d, int) and not isinstance(d, bool))
    )


def _names_cpu(d) -> bool:
    return (isinstance(d, torch.device) and d.type == "cpu") or (isinstance(d, str) and d.startswith("cpu"))


class DeviceMode(TorchFunctionMode):
    """CUDA devices named in torch calls become the CPU (see the module)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs, on_host, to_gpu = kwargs or {}, False, False
        if "device" in kwargs:
            on_host, to_gpu = _names_cpu(kwargs["device"]), _names_cuda(kwargs["device"])
            kwargs = {**kwargs, "device": host(kwargs["device"])}
        if kwargs.get("generator", 0) is None or (func in _RANDOM and "generator" not in kwargs):
            # (nn.init's functions pass generator=None on: the draws inside them do not reach this mode)
            kwargs = {**kwargs, "generator": _c.gpu().rng}
        if func is torch.Tensor.to and len(args) > 1:
            on_host, to_gpu = on_host or _names_cpu(args[1]), to_gpu or _names_cuda(args[1])
            args = (args[0], host(args[1]), *args[2:])
        if func is torch.Tensor.cpu or (func is torch.Tensor.to and on_host):
            return _d.to_host(func, args, kwargs, sys._getframe(1))
        if func is _PARSE_TO and args:  # Module.to's parser
            args = (host(args[0]), *args[1:])
        elif func is torch.Tensor.cuda:
            if args[1:] or "device" not in kwargs:
                _d.placed(_c.index(args[1] if args[1:] else None))
            return _d.to_gpu(args[0])
        elif func is torch.Tensor.pin_memory:
            return args[0]
        elif func is torch.Tensor.is_pinned:
            return True
        elif func is _DROPOUT:
            return _dropout(func, *args, **kwargs)
        out = func(*args, **kwargs)
        if to_gpu and func is torch.Tensor.to and out is args[0]:
            return _d.to_gpu(out)  # a tensor that reads cpu, moved to the GPU: a copy
        return _d.made_on_host(out) if on_host and _d.scripts(sys._getframe(1)) else _d.follows(args, out)


def _dropout(func, input, p=0.5, training=True, inplace=False):
    """``F.dropout`` drawing from the rank's generator: what ATen's CPU dropout computes
    (``noise.bernoulli_(1 - p).div_(1 - p)``, then ``input * noise``), with the rank's generator."""
    if not training or not 0 < p < 1 or input.numel() == 0:
        return func(input, p, training, inplace)
    noise = torch.empty_like(input).bernoulli_(1 - p, generator=_c.gpu().rng).div_(1 - p)
    return input.mul_(noise) if inplace else input * noise


def _props(_device=None) -> SimpleNamespace:
    g = _c.gpu()
    (major, minor), total, sms = _d.spec(g.name)
    return SimpleNamespace(
        name=g.name, total_memory=total, major=major, minor=minor, multi_processor_count=sms
    )


def _mem_get_info(_device=None) -> tuple[int, int]:
    """``(free, total)`` bytes: the GPU's memory less what the rank's tensors hold (the ledger)."""
    total = _d.spec(_c.gpu().name)[1]
    return max(total - _c.memory_allocated(), 0), total


def _load(orig, *args, map_location=None, **kwargs):
    if isinstance(map_location, dict):
        map_location = {k: "cpu" for k in map_location}
    elif not callable(map_location) and map_location is not None:
        map_location = host(map_location)
    return orig(*args, map_location=map_location, **kwargs)


def _ddp_init(orig, self, module, device_ids=None, output_device=None, *args, **kwargs):
    for d in device_ids or ():
        _d.placed(_c.index(d))
    return orig(self, module, None, None, *args, **kwargs)  # the module lives on the CPU underneath


def _mesh_init(orig, self, device_type, *args, **kwargs):
    return orig(self, "cpu" if device_type == "cuda" else device_type, *args, **kwargs)


def _autocast_init(orig, self, device_type, *args, **kwargs):
    return orig(self, "cpu" if device_type == "cuda" else device_type, *args, **kwargs)


def _const(value):
    return lambda *a, **k: value


def _accelerator() -> list[tuple[object, str, object]]:
    """(owner, attribute, stand-in): ``torch.accelerator``'s answers for a rank's virtual GPU."""
    acc, none = torch.accelerator, _const(None)
    return [
        (acc, "is_available", _const(True)),
        (acc, "device_count", lambda: _c.gpu().count),
        (acc, "current_accelerator", _const(torch.device("cuda"))),
        (acc, "set_device_index", _c.set_device),
        (acc, "set_device_idx", _c.set_device),
        (acc, "current_device_index", _c.current_device),
        (acc, "current_device_idx", _c.current_device),
        (acc, "device_index", _c.device),
        (acc, "synchronize", _c.synchronize),
        (acc, "current_stream", _c.current_stream),
        (acc, "set_stream", lambda s: setattr(_c.gpu(), "stream", s)),
        (acc, "memory_allocated", _c.memory_allocated),
        (acc, "max_memory_allocated", _c.max_memory_allocated),
        (acc, "reset_peak_memory_stats", _c.reset_peak_memory_stats),
        (acc, "empty_cache", none),
    ]


def _table() -> list[tuple[object, str, object]]:
    """(owner, attribute, stand-in for a rank thread): every patch (see the module)."""
    import torch.distributed.device_mesh as dm
    from torch.nn.parallel import DistributedDataParallel as DDP

    c, nvtx, none = torch.cuda, torch.cuda.nvtx, _const(None)
    rows = [
        (c, "is_available", _const(True)),
        (c, "is_initialized", _const(True)),
        (c, "init", none),
        (c, "device_count", lambda: _c.gpu().count),
        (c, "set_device", _c.set_device),
        (c, "current_device", _c.current_device),
        (c, "synchronize", _c.synchronize),
        (c, "Event", _c.Event),
        (c, "Stream", _c.Stream),
        (c, "stream", _c.stream),
        (c, "current_stream", _c.current_stream),
        (c, "default_stream", _c.current_stream),
        (c, "device", _c.device),
        (c, "memory_allocated", _c.memory_allocated),
        (c, "max_memory_allocated", _c.max_memory_allocated),
        (c, "memory_reserved", _c.memory_allocated),
        (c, "max_memory_reserved", _c.max_memory_allocated),
        (c, "reset_peak_memory_stats", _c.reset_peak_memory_stats),
        (c, "reset_max_memory_allocated", _c.reset_peak_memory_stats),
        (c, "empty_cache", none),
        (c, "manual_seed", _c.manual_seed),
        (c, "manual_seed_all", _c.manual_seed),
        (c, "get_device_name", _c.get_device_name),
        (c, "get_device_properties", _props),
        (c, "get_device_capability", lambda _device=None: _d.spec(_c.gpu().name)[0]),
        (c, "mem_get_info", _mem_get_info),
        (c, "is_bf16_supported", _const(True)),
        (c, "is_current_stream_capturing", _const(False)),
        (nvtx, "range_push", none),
        (nvtx, "range_pop", none),
        (nvtx, "mark", none),
        *_accelerator(),
        (torch, "load", functools.partial(_load, torch.load)),
        *[(m, "manual_seed", _c.manual_seed) for m in (torch, torch.random)],
        *[(m, "seed", _c.seed) for m in (torch, torch.random)],
        *[(m, "initial_seed", _c.initial_seed) for m in (torch, torch.random)],
        *[(m, "get_rng_state", _c.get_rng_state) for m in (torch, torch.random)],
        *[(m, "set_rng_state", _c.set_rng_state) for m in (torch, torch.random)],
        *refusals.rows(),
        *_d.rows(),
        (DDP, "__init__", functools.partial(_ddp_init, DDP.__init__)),
        (dm.DeviceMesh, "__init__", functools.partial(_mesh_init, dm.DeviceMesh.__init__)),
        (torch.amp.autocast, "__init__", functools.partial(_autocast_init, torch.amp.autocast.__init__)),
    ]
    return rows


def _scoped(orig, virtual, method: bool):
    """``virtual`` in a thread with a virtual GPU, ``orig`` elsewhere."""
    if method:

        def stand_in(self, *args, **kwargs):
            return (virtual if _c.gpu() is not None else orig)(self, *args, **kwargs)
    else:

        def stand_in(*args, **kwargs):
            return (virtual if _c.gpu() is not None else orig)(*args, **kwargs)

    stand_in.__wrapped__ = orig
    stand_in.__name__ = getattr(orig, "__name__", "stand_in")
    stand_in.__doc__ = getattr(orig, "__doc__", None)
    return stand_in


_lock = threading.Lock()
_count = 0
_saved: list[tuple[object, str, object, bool]] = []


def _install() -> None:
    for owner, name, virtual in _table():
        had = name in vars(owner)
        orig = getattr(owner, name, None)
        method = isinstance(owner, type) and name == "__init__"
        if owner is torch.Tensor or isinstance(virtual, type):  # a class stays one (torch tests isinstance
            setattr(owner, name, virtual)  # of events); a tensor's answers read their caller's frame
        elif orig is None:
            setattr(owner, name, _scoped(virtual, virtual, False))
        else:
            setattr(owner, name, _scoped(orig, virtual, method))
        _saved.append((owner, name, orig, had))


def _uninstall() -> None:
    while _saved:
        owner, name, orig, had = _saved.pop()
        if had:
            setattr(owner, name, orig)
        else:
            delattr(owner, name)


class installed:
    """The patches stay while any rank holds one of these (see the module)."""

    def __enter__(self) -> None:
        global _count
        with _lock:
            if _count == 0:
                _install()
            _count += 1

    def __exit__(self, *exc) -> None:
        global _count
        with _lock:
            _count -= 1
            if _count == 0:
                _uninstall()


@contextlib.contextmanager
def setup_gpu(rank: int, count: int, name: str):
    """This thread is rank ``rank``'s virtual GPU (one of ``count`` on its node), torch's CUDA calls
    answered by it, until the block ends."""
    with installed(), _c.attached(rank, count, name) as g, DeviceMode():
        yield g
