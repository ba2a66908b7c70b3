"""``p4hub_hook``: a DDP communication hook that averages each gradient bucket through
a p4hub group, whatever process group DDP itself runs on (Gloo, typically).

    ddp.register_comm_hook(HookState(dist.new_group(backend="p4hub")), p4hub_hook)

What it overlaps: DDP calls the hook for a bucket as soon as backward has produced all
of that bucket's gradients, so a bucket's all-reduce runs while backward computes the
next buckets (the earlier layers). ``backward()`` returns only when every bucket's
future is complete, so communication never overlaps the next forward pass; that needs
per-parameter scheduling (P3/ByteScheduler), not a comm hook.

The hook only enqueues (DDP calls it on the backward thread, holding the GIL); the
group's completion thread writes the average into the bucket and completes the future.
"""

# No ``from __future__ import annotations`` here: DDP compares the hook's annotations
# with the real objects (dist.GradBucket, Future[Tensor]), and strings fail that check.
import torch
import torch.distributed as dist

from p4hub.hosts.errors import BackendError


class HookState:
    """The p4hub group a hook averages through (default: the default group, if p4hub)."""

    def __init__(self, group: dist.ProcessGroup | None = None) -> None:
        group = group if group is not None else dist.distributed_c10d._get_default_group()
        if not hasattr(group, "average_future"):
            raise BackendError(f"p4hub_hook needs a p4hub process group, got {group!r}: "
                               f"make one with dist.new_group(backend='p4hub')")
        self.group = group


def p4hub_hook(state: HookState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """Average ``bucket``'s flattened gradients over the group, in place."""
    return state.group.average_future(bucket.buffer())
