//! Microsoft ITP clusters (ElasticFlow, Gu et al., ASPLOS'23): `itp/jobs.csv`, 69,351 training
//! jobs on 10 clusters, 2021-03-04 to 2021-05-03.
//!
//! Node shape is not in the trace; ElasticFlow's simulator uses 8-GPU nodes, and so should a
//! replay (say so when reporting).

use std::path::Path;

use serde::Deserialize;

use super::reader::{read_file, Fault};
use super::JobKind;
use crate::SimError;

/// A job of `itp/jobs.csv`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItpJob {
    /// Submission time, seconds from the start of collection, one clock for all clusters.
    pub submit_s: u64,
    /// Whole GPUs requested (a power of two, 1–64).
    pub gpus: u32,
    /// Run time in seconds (never zero).
    pub duration_s: u64,
    /// Always [`JobKind::Train`].
    pub kind: JobKind,
    /// Always `None`: no user or VC is recorded.
    pub user_or_group: Option<String>,
    /// Cluster name, `cluster01` … `cluster10`.
    pub cluster: String,
    /// 0-based row in the upstream cluster file (it stands in for the upstream UUID).
    pub job_idx: u32,
}

/// Columns `itp/jobs.csv` must have.
pub const JOB_COLUMNS: &[&str] = &[
    "submit_s",
    "gpus",
    "duration_s",
    "kind",
    "user_or_group",
    "cluster",
    "job_idx",
];

#[derive(Deserialize)]
struct RawJob {
    submit_s: u64,
    gpus: u32,
    duration_s: u64,
    kind: String,
    user_or_group: Option<String>,
    cluster: String,
    job_idx: u32,
}

/// Loads `itp/jobs.csv`, in file order (by cluster, then upstream row = submission order).
///
/// Errors: [`SimError::Io`], [`SimError::MissingColumn`], [`SimError::Malformed`] (also for
/// an empty `cluster`).
pub fn load_jobs(path: &Path) -> Result<Vec<ItpJob>, SimError> {
    read_file(path, JOB_COLUMNS, job_from_raw)
}

fn job_from_raw(raw: RawJob) -> Result<ItpJob, Fault> {
    if raw.cluster.is_empty() {
        return Err(Fault::new("cluster", "empty cluster name"));
    }
    Ok(ItpJob {
        submit_s: raw.submit_s,
        gpus: raw.gpus,
        duration_s: raw.duration_s,
        kind: JobKind::parse_column(&raw.kind)?,
        user_or_group: raw.user_or_group,
        cluster: raw.cluster,
        job_idx: raw.job_idx,
    })
}

/// The jobs of one cluster, keeping their order. Empty if no job has that cluster.
pub fn select_cluster(jobs: Vec<ItpJob>, cluster: &str) -> Vec<ItpJob> {
    jobs.into_iter().filter(|j| j.cluster == cluster).collect()
}

/// The distinct cluster names, sorted.
pub fn clusters(jobs: &[ItpJob]) -> Vec<&str> {
    let mut names: Vec<&str> = jobs.iter().map(|j| j.cluster.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::traces::reader::parse;

    fn jobs(body: &str) -> Result<Vec<ItpJob>, SimError> {
        let text = format!("submit_s,gpus,duration_s,kind,user_or_group,cluster,job_idx\n{body}");
        parse(
            Path::new("jobs.csv"),
            text.as_bytes(),
            JOB_COLUMNS,
            job_from_raw,
        )
    }

    #[test]
    fn rows_parse_and_clusters_select() {
        let all = jobs(
            "5,64,2429,train,,cluster02,0\n1,1,10,train,,cluster01,0\n9,2,20,train,,cluster02,1\n",
        )
        .unwrap();
        assert_eq!(clusters(&all), vec!["cluster01", "cluster02"]);
        let c2 = select_cluster(all, "cluster02");
        assert_eq!(c2.iter().map(|j| j.job_idx).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(c2[0].kind, JobKind::Train);
        assert_eq!(c2[0].user_or_group, None);
    }

    #[test]
    fn malformed_rows_name_line_and_column() {
        let err = jobs("5,64,2429,train,,cluster02,0\n5,64,2429,train,,,1\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "jobs.csv:3: column `cluster`: empty cluster name"
        );
        let err = jobs("5,64,2429,train,,cluster02,x\n").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("jobs.csv:2: column `job_idx`: invalid value `x`"),
            "{err}"
        );
    }

    #[test]
    fn io_errors_carry_the_path() {
        let dir = crate::traces::TraceDir::new("/nonexistent/traces");
        let err = dir.itp_jobs().unwrap_err();
        assert!(
            matches!(&err, SimError::Io { path, .. } if path == Path::new("/nonexistent/traces/itp/jobs.csv"))
        );
        assert_eq!(
            err.to_string(),
            "cannot read /nonexistent/traces/itp/jobs.csv"
        );
    }
}
