//! `scontrol update PartitionName=`: an administrator's change of a partition's `State=`,
//! `MaxTime=` and `DefaultTime=`, and the states as queries show them.

use super::{Controller, Ident};
use flotilla_core::cluster::PartitionState;
use flotilla_core::sched::Event as CoreEvent;
use flotilla_proto::errno::*;
use flotilla_proto::{PartitionStateInfo, Response, SlurmError, TimeLimitWire, UpdatePartition};
use tracing::{info, warn};

impl Controller {
    /// `scontrol update PartitionName= State= MaxTime= DefaultTime=`: admins only
    /// (`ESLURM_USER_ID_MISSING`, "Invalid user id", as Slurm answers another user); an
    /// unknown name is `ESLURM_INVALID_PARTITION_NAME`. The times go to the core
    /// ([`CoreEvent::PartitionTimes`]: a `DefaultTime` above the `MaxTime` is ignored, as
    /// `update_part` ignores it). None of it is stored: a restarted controller, or
    /// one taking over, starts from slurm.conf's, as Slurm 22.05 restarts without
    /// `ReconfigFlags=KeepPartState` (`read_slurm_conf` restores partitions only with that
    /// flag or `-R`: on the reference a `DRAIN` partition is `UP` again after a restart and
    /// after `scontrol reconfigure`). Slurm's backup keeps it at a takeover (`-R`'s
    /// recovery); Flotilla's standby does not.
    pub(super) fn update_partition(&mut self, ident: Ident, u: UpdatePartition, now: i64) -> Response {
        if !ident.admin {
            warn!(uid = ident.uid, "partition update by a non-admin refused");
            return Response::Error(SlurmError::new(ESLURM_USER_ID_MISSING));
        }
        let Some(part) = self.sched.cluster().partition_id(&u.name) else {
            return Response::Error(SlurmError::new(ESLURM_INVALID_PARTITION_NAME));
        };
        if let Some(word) = u.state.as_deref() {
            let Some(state) = PartitionState::parse(word) else {
                return Response::Error(SlurmError::new(ESLURM_NOT_SUPPORTED));
            };
            info!(partition = %u.name, state = state.as_str(), uid = ident.uid, "partition state updated by an admin");
            let d = self.sched.handle(CoreEvent::PartitionState { part, state }, now as u64);
            self.apply(d, now);
            self.update.partitions_changed(now);
            self.sched_dirty = true;
        }
        if u.max_time.is_some() || u.default_time.is_some() {
            let minutes = |t: TimeLimitWire| t.minutes().map(u64::from);
            let (max_time_min, default_time_min) = (u.max_time.map(minutes), u.default_time.map(minutes));
            info!(partition = %u.name, ?max_time_min, ?default_time_min, uid = ident.uid, "partition times updated by an admin");
            let d = self.sched.handle(CoreEvent::PartitionTimes { part, max_time_min, default_time_min }, now as u64);
            self.apply(d, now);
            self.update.partitions_changed(now);
            self.sched_dirty = true;
        }
        Response::JobResults(Vec::new())
    }

    /// `Request::QueryPartitionStates`: the partitions the caller may see
    /// ([`Controller::visible_partitions`]), each with its `State=` word.
    pub(super) fn query_partition_states(&self, ident: Ident) -> Vec<PartitionStateInfo> {
        self.visible_partitions(ident)
            .map(|(_, p)| PartitionStateInfo { name: p.name.clone(), state: p.state.as_str().to_string() })
            .collect()
    }
}
