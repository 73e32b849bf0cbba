"""Sharding the logits computation over processes launched by ``torchrun``.

``torchrun --nproc-per-node K python -m relu_core logits ...`` sets ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``,
``MASTER_ADDR`` and ``MASTER_PORT``; the process group is initialised on first use (NCCL when the engine
runs on CUDA, gloo on the CPU). Rank r computes the contiguous shard ``shard_bounds(n, K, r)`` and the
shards are all-gathered as padded float32 tensors, so every rank ends with the full logits in the original
order (the CLI writes them from rank 0 only).
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable

import numpy as np
import torch
import torch.distributed as dist


def world_size() -> int:
    """Number of processes (``WORLD_SIZE``, 1 when not launched by ``torchrun``)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    """This process's global rank (``RANK``, 0 when not launched by ``torchrun``)."""
    return int(os.environ.get("RANK", "0"))


def is_main_process() -> bool:
    """True on rank 0 (and in a single process): the one that writes outputs."""
    return rank() == 0


def shard_bounds(n: int, size: int, index: int) -> tuple[int, int]:
    """``[start, stop)`` of shard ``index`` of ``size`` contiguous, near-equal shards of ``n`` items."""
    base, extra = divmod(n, size)
    start = index * base + min(index, extra)
    return start, start + base + (index < extra)


def init_process_group(device: torch.device) -> None:
    """Initialise the default process group from the ``torchrun`` environment once (NCCL on CUDA, else gloo)."""
    if dist.is_initialized():
        return
    if device.type == "cuda":
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        dist.init_process_group("gloo")
    atexit.register(_shutdown)


def _shutdown() -> None:
    """Tear the group down in step on every rank: a rank exiting while gloo's threads still talk aborts."""
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def sharded_logits(compute: Callable[[int, int, torch.device], np.ndarray], n: int, device: torch.device) -> np.ndarray:
    """Run ``compute(start, stop, device)`` on this rank's shard of ``n`` items and return all shards' rows.

    Every rank gets the concatenation in the original item order. With fewer items than ranks every rank
    computes everything (nothing to split).
    """
    size = world_size()
    if size <= 1 or n < size:
        return compute(0, n, device)
    init_process_group(device)
    if dist.get_world_size() != size:
        raise RuntimeError(f"WORLD_SIZE={size} but the process group has {dist.get_world_size()} ranks")
    start, stop = shard_bounds(n, size, dist.get_rank())
    local = torch.from_numpy(np.ascontiguousarray(compute(start, stop, device), dtype=np.float32))
    comm_device = device if dist.get_backend() == "nccl" else torch.device("cpu")
    longest = shard_bounds(n, size, 0)[1]  # shard 0 is never shorter than the others
    padded = torch.zeros((longest, local.shape[1]), dtype=torch.float32, device=comm_device)
    padded[: local.shape[0]] = local.to(comm_device)
    gathered = [torch.empty_like(padded) for _ in range(size)]
    dist.all_gather(gathered, padded)
    pieces = []
    for index, block in enumerate(gathered):
        lo, hi = shard_bounds(n, size, index)
        pieces.append(block[: hi - lo].cpu())
    return torch.cat(pieces).numpy()
