//! The controller's record of an inference service (DESIGN.md §2) created by `sdeploy
//! create`: what the user asked for, the replica template, and the core's
//! [`ServiceSpec`]. A replica is a job-like record cloned from the template (job id from
//! [`flotilla_core::sched::REPLICA_ID_BASE`] up, job name = service name) running the
//! service command as its batch script; admission checks the replica shape exactly as it
//! checks a batch job (`--gpus-per-node`, `-N 1`, the topology, the partition).

use crate::admission::{self, AdmissionConf, Reject};
use crate::job::JobRecord;
use flotilla_core::cluster::{Cluster, PartId};
use flotilla_core::sched::{ServiceId, ServiceSpec};
use flotilla_proto::{GpuCount, ServiceCreate, SlurmError, SubmitJob, TimeLimitWire};

/// A service as stored (the `services` table: the JSON of [`crate::store::rows::ServiceRow`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceRecord {
    /// Service id.
    pub id: u32,
    /// What `sdeploy create` sent.
    pub create: ServiceCreate,
    /// Replicas wanted (`sdeploy scale`).
    pub desired_replicas: u32,
    /// Replica template: a pending job record without id, no time limit, never requeued.
    pub template: JobRecord,
    /// Created (s since epoch).
    pub create_time: i64,
}

/// The batch script a replica runs: the service command under `/bin/sh`.
pub fn replica_script(command: &str) -> String {
    format!("#!/bin/sh\n{command}\n")
}

impl ServiceRecord {
    /// Checks `c` as admission checks a job of one replica's shape and builds the record.
    /// Errors: Slurm's (`Invalid partition name specified`, `Requested node configuration is
    /// not available`, ...). Replicas get no time limit whatever the partition's `MaxTime`.
    pub fn new(id: u32, c: ServiceCreate, cluster: &Cluster, conf: &AdmissionConf, now: i64) -> Result<ServiceRecord, SlurmError> {
        if c.gpus_per_replica == 0 || c.command.trim().is_empty() || c.name.is_empty() {
            return Err(SlurmError::with_message(
                flotilla_proto::errno::ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE,
                "a service needs a name, a command and at least one GPU per replica",
            ));
        }
        if c.max_replicas < c.min_replicas {
            return Err(SlurmError::with_message(
                flotilla_proto::errno::ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE,
                format!("max replicas {} is below min replicas {}", c.max_replicas, c.min_replicas),
            ));
        }
        let sub = SubmitJob {
            name: Some(c.name.clone()),
            script: replica_script(&c.command),
            work_dir: c.work_dir.clone(),
            environment: c.environment.clone(),
            uid: c.uid,
            gid: c.gid,
            user: c.user.clone(),
            partition: c.partition.clone(),
            account: c.account.clone(),
            nodes_min: Some(1),
            nodes_max: Some(1),
            ntasks: Some(1),
            cpus_per_task: c.cpus_per_replica,
            mem_per_node_mib: c.mem_per_replica_mib,
            gpus_per_node: Some(GpuCount {
                gpu_type: c.gpu_type.clone(),
                count: c.gpus_per_replica,
            }),
            time_limit: Some(TimeLimitWire::Unlimited),
            requeue: Some(false),
            topology: Some(c.topology.clone().unwrap_or_else(|| "node".into())),
            ..SubmitJob::default()
        };
        let mut template = match admission::admit(&sub, cluster, conf, now) {
            Ok(a) => a.record,
            Err(Reject::BeforeId(e)) | Err(Reject::AfterId { error: e, .. }) => return Err(e),
        };
        // Replicas run until stopped: no time limit, whatever the partition's MaxTime.
        template.time_limit_min = None;
        template.spec.time_limit_s = None;
        template.service = Some(id);
        Ok(ServiceRecord {
            id,
            desired_replicas: c.desired_replicas,
            create: c,
            template,
            create_time: now,
        })
    }

    /// The core's spec of this service, in partition `part` (re-resolved by name at load).
    pub fn spec(&self, part: PartId) -> ServiceSpec {
        ServiceSpec {
            id: ServiceId(self.id),
            name: self.create.name.clone(),
            partition: part,
            account: self.template.account.clone(),
            user: self.template.user.clone(),
            replica: self.template.spec.request.clone(),
            min_replicas: self.create.min_replicas,
            max_replicas: self.create.max_replicas,
            desired_replicas: self.desired_replicas,
            priority: self.create.priority,
        }
    }

    /// The record of replica `replica` starting now: the template with its id.
    pub fn replica_record(&self, replica: u64, part: PartId, now: i64) -> JobRecord {
        let mut r = self.template.clone();
        r.id = replica;
        r.spec.id = flotilla_core::job::JobId(replica);
        r.spec.partition = part;
        r.spec.submit_time = now.max(0) as u64;
        r.submit_time = now;
        r
    }
}
