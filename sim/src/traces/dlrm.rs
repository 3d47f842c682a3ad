//! Alibaba GPU-disaggregated DLRM inference (`cluster-trace-gpu-v2025`, Yang et al., NSDI'25):
//! `dlrm_inference/instances.csv`, the 7,386 one-GPU (`HN`) instances of 156 services over a
//! 31-day window. There is no node list for this cluster.
//!
//! Times are seconds from trace start and may be fractional (e.g. `3973.0000000000005`), so
//! they are `f64`. An empty time means NaN upstream and is `None` here.

use std::path::Path;

use serde::Deserialize;

use super::reader::{read_file, Fault};
use super::JobKind;
use crate::SimError;

/// The end of the trace window in seconds, used for `duration_s` of instances still alive at
/// the end. The README calls it the largest timestamp in the file, but the largest time column
/// value is 2,676,149 s; the figure presumably comes from upstream columns not shipped.
pub const TRACE_END_S: f64 = 2_677_541.0;

/// Which ends of an instance's life fall outside the trace window (`censored`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Censored {
    /// `none`: created and deleted inside the window.
    Uncensored,
    /// `left`: already existed at trace start (`creation_s` is `None`).
    Left,
    /// `right`: still existed at trace end (`deletion_s` is `None`).
    Right,
    /// `both`: existed for the whole window.
    Both,
}

impl Censored {
    fn parse(value: &str) -> Result<Censored, Fault> {
        match value {
            "none" => Ok(Censored::Uncensored),
            "left" => Ok(Censored::Left),
            "right" => Ok(Censored::Right),
            "both" => Ok(Censored::Both),
            _ => Err(Fault::new(
                "censored",
                format!("unknown value `{value}` (expected none, left, right or both)"),
            )),
        }
    }

    /// Whether the instance existed before the trace started.
    pub fn left(self) -> bool {
        matches!(self, Censored::Left | Censored::Both)
    }

    /// Whether the instance still existed when the trace ended.
    pub fn right(self) -> bool {
        matches!(self, Censored::Right | Censored::Both)
    }
}

/// An inference instance (one replica of a service) of `dlrm_inference/instances.csv`.
#[derive(Debug, Clone, PartialEq)]
pub struct DlrmInstance {
    /// `creation_s`, or 0 for an instance that existed at trace start. Seconds.
    pub submit_s: f64,
    /// Whole GPUs: always 1.
    pub gpus: u32,
    /// Seconds from `scheduled_s` (else `creation_s`, else 0) to `deletion_s` (else
    /// [`TRACE_END_S`]). May be 0.
    pub duration_s: f64,
    /// Always [`JobKind::Infer`].
    pub kind: JobKind,
    /// The service (upstream `app_name`), e.g. `app_0`.
    pub user_or_group: Option<String>,
    /// Upstream instance number.
    pub instance: u32,
    /// Which ends of the instance's life are outside the window.
    pub censored: Censored,
    /// CPU cores requested.
    pub cpu: u32,
    /// Memory requested, in GiB.
    pub memory_gib: f64,
    /// Share of an RDMA NIC, in percent.
    pub rdma_pct: u32,
    /// Anti-affinity: the most instances of one service on one node; `None` for no limit
    /// (upstream −1).
    pub max_per_node: Option<u32>,
    /// Creation time, seconds from trace start; `None` if before the trace (NaN upstream).
    pub creation_s: Option<f64>,
    /// Scheduling time, seconds from trace start; `None` if before the trace.
    pub scheduled_s: Option<f64>,
    /// Deletion time, seconds from trace start; `None` if after the trace.
    pub deletion_s: Option<f64>,
}

impl DlrmInstance {
    /// The service name (`user_or_group`); empty if the trace has none.
    pub fn service(&self) -> &str {
        self.user_or_group.as_deref().unwrap_or("")
    }
}

/// Columns `dlrm_inference/instances.csv` must have.
pub const INSTANCE_COLUMNS: &[&str] = &[
    "submit_s",
    "gpus",
    "duration_s",
    "kind",
    "user_or_group",
    "instance",
    "censored",
    "cpu",
    "memory_gib",
    "rdma_pct",
    "max_per_node",
    "creation_s",
    "scheduled_s",
    "deletion_s",
];

#[derive(Deserialize)]
struct RawInstance {
    submit_s: f64,
    gpus: u32,
    duration_s: f64,
    kind: String,
    user_or_group: Option<String>,
    instance: u32,
    censored: String,
    cpu: u32,
    memory_gib: f64,
    rdma_pct: u32,
    max_per_node: i32,
    creation_s: Option<f64>,
    scheduled_s: Option<f64>,
    deletion_s: Option<f64>,
}

/// Loads `dlrm_inference/instances.csv`.
///
/// Errors: [`SimError::Io`], [`SimError::MissingColumn`], [`SimError::Malformed`], including
/// for a negative or non-finite time or amount, `max_per_node` below −1, and a `censored`
/// value that disagrees with which of `creation_s` / `deletion_s` are empty.
pub fn load_instances(path: &Path) -> Result<Vec<DlrmInstance>, SimError> {
    read_file(path, INSTANCE_COLUMNS, instance_from_raw)
}

fn instance_from_raw(raw: RawInstance) -> Result<DlrmInstance, Fault> {
    let seconds = [
        ("submit_s", Some(raw.submit_s)),
        ("duration_s", Some(raw.duration_s)),
        ("memory_gib", Some(raw.memory_gib)),
        ("creation_s", raw.creation_s),
        ("scheduled_s", raw.scheduled_s),
        ("deletion_s", raw.deletion_s),
    ];
    for (column, value) in seconds {
        if let Some(v) = value {
            if !v.is_finite() || v < 0.0 {
                return Err(Fault::new(
                    column,
                    format!("{v} is not a finite number >= 0"),
                ));
            }
        }
    }
    let censored = Censored::parse(&raw.censored)?;
    if censored.left() != raw.creation_s.is_none() {
        return Err(Fault::new(
            "censored",
            format!(
                "`{}` disagrees with creation_s being {}",
                raw.censored,
                empty_or_set(raw.creation_s)
            ),
        ));
    }
    if censored.right() != raw.deletion_s.is_none() {
        return Err(Fault::new(
            "censored",
            format!(
                "`{}` disagrees with deletion_s being {}",
                raw.censored,
                empty_or_set(raw.deletion_s)
            ),
        ));
    }
    let max_per_node = match raw.max_per_node {
        -1 => None,
        n if n >= 0 => Some(n.unsigned_abs()),
        n => {
            return Err(Fault::new(
                "max_per_node",
                format!("{n} is below -1 (-1 = no limit)"),
            ))
        }
    };
    Ok(DlrmInstance {
        submit_s: raw.submit_s,
        gpus: raw.gpus,
        duration_s: raw.duration_s,
        kind: JobKind::parse_column(&raw.kind)?,
        user_or_group: raw.user_or_group,
        instance: raw.instance,
        censored,
        cpu: raw.cpu,
        memory_gib: raw.memory_gib,
        rdma_pct: raw.rdma_pct,
        max_per_node,
        creation_s: raw.creation_s,
        scheduled_s: raw.scheduled_s,
        deletion_s: raw.deletion_s,
    })
}

fn empty_or_set(value: Option<f64>) -> &'static str {
    if value.is_some() {
        "set"
    } else {
        "empty"
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::traces::reader::parse;

    const HEADER: &str = "submit_s,gpus,duration_s,kind,user_or_group,instance,censored,cpu,memory_gib,rdma_pct,max_per_node,creation_s,scheduled_s,deletion_s\n";

    fn instances(body: &str) -> Result<Vec<DlrmInstance>, SimError> {
        let text = format!("{HEADER}{body}");
        parse(
            Path::new("instances.csv"),
            text.as_bytes(),
            INSTANCE_COLUMNS,
            instance_from_raw,
        )
    }

    fn line_and_column(result: Result<Vec<DlrmInstance>, SimError>) -> (u64, String) {
        match result {
            Err(SimError::Malformed { line, column, .. }) => (line, column),
            other => panic!("expected a malformed-row error, got {other:?}"),
        }
    }

    #[test]
    fn empty_times_are_none_and_minus_one_is_no_limit() {
        let rows = instances(concat!(
            "0,1,2677541,infer,app_0,0,both,12,120.0,25,-1,,,\n",
            "3973.0000000000005,1,100.5,infer,app_1,7,none,8,16.0,1,2,3973.0000000000005,3974,4074.5\n",
        ))
        .unwrap();
        assert_eq!(rows[0].censored, Censored::Both);
        assert_eq!(
            (rows[0].creation_s, rows[0].scheduled_s, rows[0].deletion_s),
            (None, None, None)
        );
        assert_eq!(rows[0].max_per_node, None);
        assert_eq!(rows[0].service(), "app_0");
        assert_eq!(rows[0].duration_s, TRACE_END_S);
        assert_eq!(rows[1].max_per_node, Some(2));
        assert_eq!(rows[1].creation_s, Some(3973.0000000000005));
        assert_eq!(rows[1].deletion_s, Some(4074.5));
        assert_eq!(rows[1].memory_gib, 16.0);
        assert_eq!(rows[1].kind, JobKind::Infer);
    }

    #[test]
    fn censored_must_agree_with_empty_times() {
        // `left` but creation_s is set.
        let r = instances("0,1,1,infer,a,0,left,1,1.0,1,-1,5,5,6\n");
        assert_eq!(line_and_column(r), (2, "censored".into()));
        // `none` but deletion_s is empty.
        let r = instances("0,1,1,infer,a,0,none,1,1.0,1,-1,5,5,\n");
        assert_eq!(line_and_column(r), (2, "censored".into()));
        let r = instances("0,1,1,infer,a,0,sometimes,1,1.0,1,-1,5,5,6\n");
        assert_eq!(line_and_column(r), (2, "censored".into()));
    }

    #[test]
    fn bad_numbers_name_their_column() {
        let ok = "0,1,1,infer,a,0,none,1,1.0,1,-1,5,5,6\n";
        let cases = [
            ("0,1,1,infer,a,0,none,1,1.0,1,-2,5,5,6\n", "max_per_node"),
            ("0,1,NaN,infer,a,0,none,1,1.0,1,-1,5,5,6\n", "duration_s"),
            ("0,1,1,infer,a,0,none,1,1.0,1,-1,5,5,-6\n", "deletion_s"),
            ("0,1,1,infer,a,0,none,1,lots,1,-1,5,5,6\n", "memory_gib"),
            ("0,1,1,infer,a,0,none,1.5,1.0,1,-1,5,5,6\n", "cpu"),
        ];
        for (row, want) in cases {
            assert_eq!(
                line_and_column(instances(&format!("{ok}{row}"))),
                (3, want.into()),
                "{row}"
            );
        }
    }
}
