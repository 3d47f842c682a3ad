//! Rows of an inference service: [`ServiceRow`] (a `services.record`) and the wire's
//! `sdeploy create` it keeps ([`ServiceCreateRow`]).

use super::job::JobRow;
use crate::service::ServiceRecord;
use flotilla_proto::ServiceCreate;
use serde::{Deserialize, Serialize};

/// A `services.record`: the controller's [`ServiceRecord`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceRow {
    /// Service id.
    #[serde(rename = "id")]
    pub id: u32,
    /// What `sdeploy create` sent.
    #[serde(rename = "create")]
    pub create: ServiceCreateRow,
    /// Replicas wanted.
    #[serde(rename = "desired_replicas")]
    pub desired_replicas: u32,
    /// Replica template.
    #[serde(rename = "template")]
    pub template: JobRow,
    /// Created (s since epoch).
    #[serde(rename = "create_time")]
    pub create_time: i64,
}

/// `sdeploy create` as stored (the wire's [`ServiceCreate`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceCreateRow {
    /// Service name.
    #[serde(rename = "name")]
    pub name: String,
    /// Command of each replica.
    #[serde(rename = "command")]
    pub command: String,
    /// GPUs per replica.
    #[serde(rename = "gpus_per_replica")]
    pub gpus_per_replica: u32,
    /// GPU model.
    #[serde(rename = "gpu_type")]
    pub gpu_type: Option<String>,
    /// Topology of one replica.
    #[serde(rename = "topology")]
    pub topology: Option<String>,
    /// CPUs per replica.
    #[serde(rename = "cpus_per_replica")]
    pub cpus_per_replica: Option<u32>,
    /// Memory per replica (MiB).
    #[serde(rename = "mem_per_replica_mib")]
    pub mem_per_replica_mib: Option<u64>,
    /// Availability floor.
    #[serde(rename = "min_replicas")]
    pub min_replicas: u32,
    /// Ceiling.
    #[serde(rename = "max_replicas")]
    pub max_replicas: u32,
    /// Replicas wanted at creation.
    #[serde(rename = "desired_replicas")]
    pub desired_replicas: u32,
    /// Priority among services.
    #[serde(rename = "priority")]
    pub priority: u32,
    /// Partition.
    #[serde(rename = "partition")]
    pub partition: Option<String>,
    /// Account.
    #[serde(rename = "account")]
    pub account: Option<String>,
    /// Working directory.
    #[serde(rename = "work_dir")]
    pub work_dir: String,
    /// Environment of the replicas, as `[name, value]` pairs.
    #[serde(rename = "environment")]
    pub environment: Vec<(String, String)>,
    /// Owner uid.
    #[serde(rename = "uid")]
    pub uid: u32,
    /// Owner gid.
    #[serde(rename = "gid")]
    pub gid: u32,
    /// Owner name.
    #[serde(rename = "user")]
    pub user: String,
}

impl From<&ServiceCreate> for ServiceCreateRow {
    fn from(c: &ServiceCreate) -> Self {
        let ServiceCreate {
            name,
            command,
            gpus_per_replica,
            gpu_type,
            topology,
            cpus_per_replica,
            mem_per_replica_mib,
            min_replicas,
            max_replicas,
            desired_replicas,
            priority,
            partition,
            account,
            work_dir,
            environment,
            uid,
            gid,
            user,
        } = c;
        ServiceCreateRow {
            name: name.clone(),
            command: command.clone(),
            gpus_per_replica: *gpus_per_replica,
            gpu_type: gpu_type.clone(),
            topology: topology.clone(),
            cpus_per_replica: *cpus_per_replica,
            mem_per_replica_mib: *mem_per_replica_mib,
            min_replicas: *min_replicas,
            max_replicas: *max_replicas,
            desired_replicas: *desired_replicas,
            priority: *priority,
            partition: partition.clone(),
            account: account.clone(),
            work_dir: work_dir.clone(),
            environment: environment.clone(),
            uid: *uid,
            gid: *gid,
            user: user.clone(),
        }
    }
}

impl From<ServiceCreateRow> for ServiceCreate {
    fn from(c: ServiceCreateRow) -> Self {
        let ServiceCreateRow {
            name,
            command,
            gpus_per_replica,
            gpu_type,
            topology,
            cpus_per_replica,
            mem_per_replica_mib,
            min_replicas,
            max_replicas,
            desired_replicas,
            priority,
            partition,
            account,
            work_dir,
            environment,
            uid,
            gid,
            user,
        } = c;
        ServiceCreate {
            name,
            command,
            gpus_per_replica,
            gpu_type,
            topology,
            cpus_per_replica,
            mem_per_replica_mib,
            min_replicas,
            max_replicas,
            desired_replicas,
            priority,
            partition,
            account,
            work_dir,
            environment,
            uid,
            gid,
            user,
        }
    }
}

impl From<&ServiceRecord> for ServiceRow {
    fn from(s: &ServiceRecord) -> Self {
        let ServiceRecord {
            id,
            create,
            desired_replicas,
            template,
            create_time,
        } = s;
        ServiceRow {
            id: *id,
            create: create.into(),
            desired_replicas: *desired_replicas,
            template: template.into(),
            create_time: *create_time,
        }
    }
}

impl From<ServiceRow> for ServiceRecord {
    fn from(s: ServiceRow) -> Self {
        let ServiceRow {
            id,
            create,
            desired_replicas,
            template,
            create_time,
        } = s;
        ServiceRecord {
            id,
            create: create.into(),
            desired_replicas,
            template: template.into(),
            create_time,
        }
    }
}
