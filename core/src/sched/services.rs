//! Inference services: long-lived deployments whose replicas the core keeps at the target
//! count, level-triggered. Replicas are job-like pending and running entries with ids from
//! [`REPLICA_ID_BASE`] up, or from the driver's job id sequence
//! ([`Scheduler::share_job_ids`]: the controller's case); they are never preempted, and
//! scaling up may preempt training.

use super::types::PendingJob;
use super::{Decision, RunningJob, Scheduler, ServiceId, ServiceSpec, REPLICA_ID_BASE};
use crate::cluster::Time;
use crate::job::{JobId, JobSpec};
use std::collections::{BTreeMap, BTreeSet};

/// The driver's job id space replicas draw from ([`Scheduler::share_job_ids`]).
#[derive(Debug, Clone)]
pub(super) struct SharedJobIds {
    /// `FirstJobId`.
    first: u64,
    /// `MaxJobId` (never given).
    max: u64,
    /// Ids of the driver's records (finished ones too, until purged).
    held: BTreeSet<u64>,
}

/// Priority every replica gets on top of its service's priority: inference is scheduled first.
pub(super) const SERVICE_PRIORITY_BASE: u64 = 1 << 40;

impl Scheduler {
    /// Inference services by id.
    pub fn services(&self) -> &BTreeMap<ServiceId, ServiceSpec> {
        &self.services
    }

    /// Replicas of a service, running and pending.
    pub fn service_replicas(&self, service: ServiceId) -> (Vec<JobId>, Vec<JobId>) {
        let mut running = Vec::new();
        let mut pending = Vec::new();
        for (id, s) in &self.replica_service {
            if *s != service {
                continue;
            }
            if let Some(r) = self.running.get(id) {
                if !r.stopping {
                    running.push(*id);
                }
            } else if self.pending.contains_key(id) {
                pending.push(*id);
            }
        }
        (running, pending)
    }

    /// True for a replica id.
    pub fn is_replica(&self, id: JobId) -> bool {
        self.replica_service.contains_key(&id)
    }

    /// Restores a running replica of `service` (controller restart): its resources as
    /// recorded, counted toward the service's replicas. Panics like
    /// [`Scheduler::restore_running`] when they are not free.
    pub fn restore_replica(&mut self, service: ServiceId, job: RunningJob) {
        let id = job.spec.id;
        // Only an id of the range ids are handed out from moves the sequence on: a replica
        // of an older state (from `REPLICA_ID_BASE`) restored while ids are job ids does not.
        if (id.0 >= REPLICA_ID_BASE) == (self.next_replica >= REPLICA_ID_BASE) {
            self.next_replica = self.next_replica.max(id.0 + 1);
        }
        self.replica_service.insert(id, service);
        self.restore_running(job);
    }

    /// The next replica id the core will hand out (from [`REPLICA_ID_BASE`] up, or the
    /// driver's next job id after [`Scheduler::share_job_ids`]).
    pub fn next_replica_id(&self) -> u64 {
        self.next_replica
    }

    /// Replica ids start at `next` or above from now on (a restarted driver passes the
    /// persisted sequence so a replica id is never reused). Ids stay in the range they are
    /// in: from [`REPLICA_ID_BASE`] up unless [`Scheduler::share_job_ids`] was called. With
    /// shared ids the sequence is one: `next` is where it stands (it may have wrapped).
    pub fn set_next_replica_id(&mut self, next: u64) {
        if self.shared_ids.is_some() {
            self.next_replica = next;
            return;
        }
        let floor = if self.next_replica < REPLICA_ID_BASE { 0 } else { REPLICA_ID_BASE };
        self.next_replica = self.next_replica.max(next).max(floor);
    }

    /// Replicas get ids from the driver's job id space from now on, so that every id a Slurm
    /// tool sees is a 32-bit Slurm job id: `first..max` (Slurm's `FirstJobId` and
    /// `MaxJobId`, which is never given), the next one `next`. The driver takes its own ids
    /// from the same sequence ([`Scheduler::take_job_id`]) and tells the core which ids its
    /// records hold ([`Scheduler::hold_job_id`], [`Scheduler::free_job_id`]), so that after
    /// the sequence wraps no id in use is given again.
    ///
    /// # Panics
    /// If `max` is above [`REPLICA_ID_BASE`] or `first` is not below it.
    pub fn share_job_ids(&mut self, next: u64, first: u64, max: u64) {
        assert!(max <= REPLICA_ID_BASE && first < max, "job id space {first}..{max} is not below the replica id range");
        self.next_replica = next;
        self.shared_ids = Some(SharedJobIds { first, max, held: BTreeSet::new() });
    }

    /// The driver has a record with job id `id` (shared ids only; otherwise nothing).
    pub fn hold_job_id(&mut self, id: u64) {
        if let Some(s) = self.shared_ids.as_mut() {
            s.held.insert(id);
        }
    }

    /// The driver's record with job id `id` is gone: the id may be given again.
    pub fn free_job_id(&mut self, id: u64) {
        if let Some(s) = self.shared_ids.as_mut() {
            s.held.remove(&id);
        }
    }

    /// The next job id (Slurm 22.05's `get_next_job_id`, `job_mgr.c`): from the sequence, the
    /// first id that no record of the driver holds and no job or replica of the core has,
    /// wrapping from `MaxJobId` (never given) to `FirstJobId`; the sequence goes on after
    /// it. `None` when every id of the space is in use (Slurm: "We have exhausted our supply
    /// of valid job id values"). Without shared ids: the next replica id of the core's own
    /// range.
    pub fn take_job_id(&mut self) -> Option<u64> {
        let Some(s) = self.shared_ids.as_ref() else {
            let id = self.next_replica;
            self.next_replica += 1;
            return Some(id);
        };
        let (first, max) = (s.first, s.max);
        let mut id = self.next_replica.max(first);
        for _ in 0..(max - first) {
            if id >= max {
                id = first;
            }
            let used = s.held.contains(&id) || self.pending.contains_key(&JobId(id)) || self.running.contains_key(&JobId(id));
            if !used {
                self.next_replica = id + 1;
                return Some(id);
            }
            id += 1;
        }
        None
    }

    /// Bookkeeping when a running job or replica leaves.
    pub(super) fn forget_running(&mut self, id: JobId) {
        self.borrowed.remove(&id);
        if self.replica_service.remove(&id).is_some() {
            self.relocating.remove(&id);
            self.relocating.retain(|_, (old, _)| *old != id);
        }
    }

    /// Level-triggered reconciliation of every service to its target replica count:
    /// missing replicas become pending jobs; surplus replicas stop, pending first, then the
    /// newest running. Replicas of deleted services stop.
    pub(super) fn reconcile_services(&mut self, now: Time, out: &mut Vec<Decision>) {
        let services: Vec<ServiceSpec> = self.services.values().cloned().collect();
        let orphans: BTreeSet<ServiceId> = self
            .replica_service
            .values()
            .filter(|s| !self.services.contains_key(s))
            .copied()
            .collect();
        for spec in &services {
            let (running, pending) = self.service_replicas(spec.id);
            let target = spec.target() as usize;
            let have = running.len() + pending.len();
            if have < target {
                for _ in have..target {
                    // Every job id in use: the replica waits for one (next cycle).
                    let Some(id) = self.take_job_id().map(JobId) else { break };
                    let mut js = JobSpec::simple(id.0, now, spec.replica.clone(), None);
                    js.partition = spec.partition;
                    js.account = spec.account.clone();
                    js.user = spec.user.clone();
                    js.base_priority = spec.priority;
                    self.queue_changed(id);
                    self.replica_service.insert(id, spec.id);
                    let shape = self.intern(&js.request);
                    self.pending.insert(
                        id,
                        PendingJob::new(js, shape),
                    );
                }
            } else if have > target {
                let mut surplus = have - target;
                for id in pending.iter().rev() {
                    if surplus == 0 {
                        break;
                    }
                    self.queue_changed(*id);
                    self.pending.remove(id);
                    self.replica_service.remove(id);
                    self.drop_reservation(*id, out);
                    surplus -= 1;
                }
                let mut newest: Vec<(Time, JobId)> = running.iter().map(|id| (self.running[id].start, *id)).collect();
                newest.sort_unstable_by(|a, b| b.cmp(a));
                for (_, id) in newest.into_iter().take(surplus) {
                    self.stop_replica(spec.id, id, out);
                }
            }
        }
        for service in orphans {
            let (running, pending) = self.service_replicas(service);
            for id in pending {
                self.queue_changed(id);
                self.pending.remove(&id);
                self.replica_service.remove(&id);
                self.drop_reservation(id, out);
            }
            for id in running {
                self.stop_replica(service, id, out);
            }
        }
    }

    fn stop_replica(&mut self, service: ServiceId, id: JobId, out: &mut Vec<Decision>) {
        if let Some(r) = self.running.get_mut(&id) {
            if !r.stopping {
                r.stopping = true;
                out.push(Decision::StopReplica { service, replica: id });
            }
        }
    }
}
