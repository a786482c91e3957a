"""Make the child's world safe and CPU-only before the user's code runs.

- Without a GPU, hard-coded CUDA (``.cuda()``, ``.to("cuda")``,
  ``device="cuda"``, ``torch.cuda.synchronize()``...) runs on the CPU: a
  TorchFunctionMode rewrites device arguments, and the few ``torch.cuda``
  helpers that raise without a GPU become no-ops.
- The network is off: connecting anywhere but the loopback raises, so a
  download fails fast (and the verdict says so) instead of hanging or
  fetching gigabytes.
"""

from __future__ import annotations

import errno
import socket

import torch
from torch.overrides import TorchFunctionMode

NETWORK_OFF = "network access is disabled under graphlint --confirm"
_LOOPBACK = {"localhost", "127.0.0.1", "::1", "", None, "0.0.0.0"}


def _is_cuda(value) -> bool:
    if isinstance(value, str):
        return value.split(":")[0].strip().lower() == "cuda"
    if isinstance(value, torch.device):
        return value.type == "cuda"
    return False


def _cpu(value):
    return "cpu" if _is_cuda(value) else value


class CudaOnCpu(TorchFunctionMode):
    """Run code written for a GPU on the CPU."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in (torch.Tensor.cuda, torch.Tensor.pin_memory):
            return args[0]
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
        if func is torch.Tensor.to:
            args = tuple(_cpu(a) for a in args)
        return func(*args, **kwargs)


def _returning(value):
    # A new function per attribute: torch._dynamo refuses one object under two names.
    def stand_in(*args, **kwargs):
        return value

    return stand_in


def install_cpu_only() -> object | None:
    """Activate the CUDA-to-CPU mode when no GPU is present; returns the mode."""
    if torch.cuda.is_available():
        return None
    for name in ("synchronize", "set_device", "empty_cache", "reset_peak_memory_stats", "ipc_collect"):
        if hasattr(torch.cuda, name):
            setattr(torch.cuda, name, _returning(None))
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
                 "current_device"):
        if hasattr(torch.cuda, name):
            setattr(torch.cuda, name, _returning(0))
    original_load = torch.load

    def load(*args, **kwargs):
        location = kwargs.get("map_location")
        if location is None or _is_cuda(location):
            kwargs["map_location"] = "cpu"
        return original_load(*args, **kwargs)

    torch.load = load
    original_module_cuda = torch.nn.Module.cuda
    torch.nn.Module.cuda = lambda self, device=None: self
    torch.nn.Module.cuda.__wrapped__ = original_module_cuda
    mode = CudaOnCpu()
    mode.__enter__()
    return mode


def install_network_off() -> None:
    original_connect = socket.socket.connect
    original_connect_ex = socket.socket.connect_ex
    original_getaddrinfo = socket.getaddrinfo

    def allowed(sock, address) -> bool:
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return True
        host = address[0] if isinstance(address, tuple) and address else address
        return host in _LOOPBACK or str(host).startswith("127.")

    def connect(self, address):
        if not allowed(self, address):
            raise OSError(errno.ENETUNREACH, NETWORK_OFF)
        return original_connect(self, address)

    def connect_ex(self, address):
        if not allowed(self, address):
            return errno.ENETUNREACH
        return original_connect_ex(self, address)

    def getaddrinfo(host, *args, **kwargs):
        if host not in _LOOPBACK and not str(host).startswith("127."):
            raise socket.gaierror(socket.EAI_NONAME, NETWORK_OFF)
        return original_getaddrinfo(host, *args, **kwargs)

    socket.socket.connect = connect
    socket.socket.connect_ex = connect_ex
    socket.getaddrinfo = getaddrinfo
