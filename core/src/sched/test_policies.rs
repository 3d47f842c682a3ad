//! Policies the scheduler's unit tests share: a deterministic placement (lowest node id
//! first, GPUs as `GpuMask::choose` picks them) and a priority that ranks by submit time alone.

use crate::cluster::{GpuMask, Node, NodeId};
use crate::placement::{NodeDemand, PlaceCtx, PlacementPolicy, Score};
use crate::sched::{PriorityInput, PriorityPolicy};

/// Lowest node id first, GPUs as [`GpuMask::choose`] picks them (aligned blocks, whatever
/// the node's `gpu_links`).
#[derive(Debug)]
pub(crate) struct Lowest;
impl PlacementPolicy for Lowest {
    fn name(&self) -> &str {
        "lowest"
    }
    fn score(&self, _: &PlaceCtx<'_>, node: NodeId, _: GpuMask, _: &NodeDemand<'_>) -> Score {
        -Score::from(node.0)
    }
    fn pick_gpus(&self, node: &Node, avail: GpuMask, n: u32) -> Option<GpuMask> {
        avail.choose(n, node.gpus)
    }
}

/// Every job priority 0: rank by submit time.
#[derive(Debug)]
pub(crate) struct Fifo;
impl PriorityPolicy for Fifo {
    fn name(&self) -> &str {
        "fifo"
    }
    fn priority(&self, _: PriorityInput<'_>) -> u64 {
        0
    }
}
