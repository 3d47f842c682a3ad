//! The invariants of DESIGN.md's list that the core owns, checked on demand.

use super::reservations::outranks;
use super::Scheduler;
use crate::cluster::{GpuMask, NodeAvail, NodeId};
use crate::config::TopologyKind;
use crate::placement;
use std::collections::{BTreeMap, BTreeSet};

impl Scheduler {
    /// Checks the invariants the core owns (DESIGN.md's list: 1 accounting, 2 all or nothing,
    /// 3 topology, 5 reservations ordered and disjoint, 6 backfill ends before the fill, 8
    /// nothing on a down node), returning the first violation. Used after every cycle by
    /// tests and, in debug builds, the simulator.
    pub fn check_invariants(&self) -> Result<(), String> {
        crate::cluster::check_accounting(&self.cluster, self.allocations().map(|a| &a.part))?;
        self.check_node_jobs()?;
        for (id, r) in &self.running {
            if r.spec.elastic.is_some() {
                // Elastic jobs: min <= size <= max inside the topology set (2 and 3).
                self.check_elastic(*id, r)?;
            } else {
                self.check_rigid(*id, r)?;
            }
            // 8: nothing lives on a node whose epoch changed (requeue happens at once), and
            // nothing runs on a down node.
            self.check_on_up_nodes(*id, r)?;
            // 6: backfill on reserved GPUs ends before the fill estimate of each reservation
            // whose GPUs it uses.
            for res in &self.reservations {
                if !r.backfill_for.contains(&res.job) {
                    continue;
                }
                if let Some(end) = r.end {
                    if end > res.est_fill && res.created <= r.start && !r.preempt_pending {
                        return Err(format!("backfill job {id} ends after the fill of {}", res.job));
                    }
                }
            }
        }
        self.check_reservations()
    }

    /// The per-node index of running jobs (`node_jobs`, which reservation completion and
    /// defragmentation read instead of scanning every running job) lists exactly the running
    /// jobs with an allocation on each node.
    fn check_node_jobs(&self) -> Result<(), String> {
        let mut want: Vec<BTreeSet<crate::job::JobId>> = vec![BTreeSet::new(); self.node_jobs.len()];
        for (id, r) in &self.running {
            for a in &r.allocs {
                want[a.part.node.0 as usize].insert(*id);
            }
        }
        for (i, (w, have)) in want.iter().zip(&self.node_jobs).enumerate() {
            let have: BTreeSet<crate::job::JobId> = have.iter().map(|(j, _)| *j).collect();
            if *w != have {
                return Err(format!("node {i}: running jobs indexed {have:?}, allocated {w:?}"));
            }
        }
        Ok(())
    }

    /// Invariants 2 (all or nothing) and 3 (topology) for a rigid job.
    fn check_rigid(&self, id: crate::job::JobId, r: &super::RunningJob) -> Result<(), String> {
        // 2: all or nothing — the GPUs held are exactly what was asked.
        let req = &r.spec.request;
        let held: u32 = r.allocs.iter().map(|a| a.part.gpus.count()).sum();
        let size = placement::node_size(&self.cluster, r.spec.partition);
        let want = if req.exclusive {
            r.allocs.len() as u32 * size
        } else if let Some(gpn) = req.gpus_per_node {
            gpn * r.allocs.len() as u32
        } else {
            req.gpus
        };
        if held != want {
            return Err(format!("job {id} holds {held} GPUs, asked for {want}"));
        }
        // 3: topology.
        let nodes: BTreeSet<NodeId> = r.allocs.iter().map(|a| a.part.node).collect();
        if nodes.len() != r.allocs.len() {
            return Err(format!("job {id} has two allocations on one node"));
        }
        match req.topology {
            TopologyKind::Node if req.gpus_per_node.is_none() => {
                if req.gpus <= size && nodes.len() > 1 {
                    return Err(format!("node-topology job {id} spans nodes"));
                }
                if nodes.len() > 1 && r.allocs.iter().any(|a| a.part.gpus.count() != self.cluster.node(a.part.node).gpus) {
                    return Err(format!("node-topology job {id} split a node"));
                }
            }
            TopologyKind::Pod => {
                let pods: BTreeSet<_> = nodes.iter().map(|n| self.cluster.node(*n).pod).collect();
                if pods.len() > 1 {
                    return Err(format!("pod-topology job {id} spans pods"));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Invariant 5: reservations sorted by rank and disjoint.
    fn check_reservations(&self) -> Result<(), String> {
        // 5: reservations are sorted by rank and disjoint.
        for w in self.reservations.windows(2) {
            if !outranks(&w[0].rank, &w[1].rank) {
                return Err("reservations out of rank order".into());
            }
        }
        let mut seen: BTreeMap<NodeId, GpuMask> = BTreeMap::new();
        for r in &self.reservations {
            for &(n, g) in &r.gpus {
                let s = seen.entry(n).or_default();
                if !s.intersect(g).is_empty() {
                    return Err(format!("reservations overlap on node {}", self.cluster.node(n).name));
                }
                *s = s.union(g);
            }
        }
        Ok(())
    }

    /// Invariant 8's half a job can break: no allocation on a down node.
    fn check_on_up_nodes(&self, id: crate::job::JobId, r: &super::RunningJob) -> Result<(), String> {
        for a in &r.allocs {
            if matches!(self.cluster.node(a.part.node).avail, NodeAvail::Down { .. }) {
                return Err(format!("job {id} holds an allocation on down node"));
            }
        }
        Ok(())
    }
}
