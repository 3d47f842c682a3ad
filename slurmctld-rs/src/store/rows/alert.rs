//! The core's alert and page decisions as the store keeps them (`alerts.decision`) and as
//! `AlertProgram` receives them (the `decision` member of its JSON on standard input): the
//! shape the core's serde derives gave them up to schema version 4, pinned here so that a
//! renamed field of `flotilla_core::sched::{Decision, Page, PageVictim}` fails to compile in
//! the conversion instead of changing the history or what a site's alert program parses.

use flotilla_core::sched::{AlertKind, Decision, Page, PageVictim};
use serde::Serialize;

/// `Decision::Alert` or `Decision::Page`, externally tagged: `{"Alert":{...}}` / `{"Page":{...}}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum AlertDecisionRow {
    /// A signal for a human.
    #[serde(rename = "Alert")]
    Alert {
        /// `ReservationCannotFill`, `PreemptionBudgetWarn`, `StorageDegraded` or `StorageRecovered`.
        #[serde(rename = "kind")]
        kind: &'static str,
        /// The core's job id it concerns, if any.
        #[serde(rename = "job")]
        job: Option<u64>,
        /// One line for a human.
        #[serde(rename = "message")]
        message: String,
    },
    /// A page: the preemption budget blocks a service scale-up above its floor.
    #[serde(rename = "Page")]
    Page(PageRow),
}

/// A page's numbers (GPUs, percent, GPU-hours), as in [`Page`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PageRow {
    /// Service id.
    #[serde(rename = "service")]
    pub service: u32,
    /// Service name.
    #[serde(rename = "name")]
    pub name: String,
    /// Replicas wanted.
    #[serde(rename = "wanted")]
    pub wanted: u32,
    /// Replicas running.
    #[serde(rename = "have")]
    pub have: u32,
    /// `min_replicas`.
    #[serde(rename = "min")]
    pub min: u32,
    /// GPUs the blocked replicas need.
    #[serde(rename = "gpus_blocked")]
    pub gpus_blocked: u32,
    /// Preempted share of training GPUs over the trailing hour (percent).
    #[serde(rename = "rate_pct")]
    pub rate_pct: u32,
    /// Paging limit (percent).
    #[serde(rename = "limit_pct")]
    pub limit_pct: u32,
    /// Jobs that would be preempted.
    #[serde(rename = "would_preempt")]
    pub would_preempt: Vec<PageVictimRow>,
    /// GPU-hours of training lost by preempting them.
    #[serde(rename = "preempt_cost_gpu_hours")]
    pub preempt_cost_gpu_hours: f64,
    /// GPU-hours per hour of serving forgone by staying degraded.
    #[serde(rename = "degraded_cost_gpu_hours")]
    pub degraded_cost_gpu_hours: f64,
    /// What the human can choose.
    #[serde(rename = "actions")]
    pub actions: Vec<String>,
}

/// A job a page would preempt, as in [`PageVictim`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PageVictimRow {
    /// The core's job id.
    #[serde(rename = "job")]
    pub job: u64,
    /// Its account.
    #[serde(rename = "account")]
    pub account: String,
    /// GPUs it holds.
    #[serde(rename = "gpus")]
    pub gpus: u32,
    /// Seconds it has run.
    #[serde(rename = "runtime_s")]
    pub runtime_s: u64,
    /// Seconds since its last acknowledged checkpoint.
    #[serde(rename = "since_checkpoint_s")]
    pub since_checkpoint_s: u64,
}

fn kind_name(k: &AlertKind) -> &'static str {
    match k {
        AlertKind::ReservationCannotFill => "ReservationCannotFill",
        AlertKind::PreemptionBudgetWarn => "PreemptionBudgetWarn",
        AlertKind::StorageDegraded => "StorageDegraded",
        AlertKind::StorageRecovered => "StorageRecovered",
    }
}

impl From<&PageVictim> for PageVictimRow {
    fn from(v: &PageVictim) -> Self {
        let PageVictim { job, account, gpus, runtime_s, since_checkpoint_s } = v;
        PageVictimRow {
            job: job.0,
            account: account.clone(),
            gpus: *gpus,
            runtime_s: *runtime_s,
            since_checkpoint_s: *since_checkpoint_s,
        }
    }
}

impl From<&Page> for PageRow {
    fn from(p: &Page) -> Self {
        let Page {
            service,
            name,
            wanted,
            have,
            min,
            gpus_blocked,
            rate_pct,
            limit_pct,
            would_preempt,
            preempt_cost_gpu_hours,
            degraded_cost_gpu_hours,
            actions,
        } = p;
        PageRow {
            service: service.0,
            name: name.clone(),
            wanted: *wanted,
            have: *have,
            min: *min,
            gpus_blocked: *gpus_blocked,
            rate_pct: *rate_pct,
            limit_pct: *limit_pct,
            would_preempt: would_preempt.iter().map(PageVictimRow::from).collect(),
            preempt_cost_gpu_hours: *preempt_cost_gpu_hours,
            degraded_cost_gpu_hours: *degraded_cost_gpu_hours,
            actions: actions.clone(),
        }
    }
}

impl AlertDecisionRow {
    /// The row of an alert or page decision; `None` for every other decision.
    pub fn of(d: &Decision) -> Option<AlertDecisionRow> {
        match d {
            Decision::Alert { kind, job, message } => Some(AlertDecisionRow::Alert {
                kind: kind_name(kind),
                job: job.map(|j| j.0),
                message: message.clone(),
            }),
            Decision::Page(p) => Some(AlertDecisionRow::Page(PageRow::from(&**p))),
            _ => None,
        }
    }

    /// As a JSON value (the `decision` of `AlertProgram`'s input; its text is the column).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("an alert row serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_core::job::JobId;
    use flotilla_core::sched::ServiceId;

    /// The text schema version 4 stored (the core's serde derives then), pinned.
    #[test]
    fn alert_and_page_keep_their_stored_json() {
        let a = Decision::Alert { kind: AlertKind::ReservationCannotFill, job: Some(JobId(7)), message: "m".into() };
        assert_eq!(
            AlertDecisionRow::of(&a).unwrap().to_value().to_string(),
            r#"{"Alert":{"job":7,"kind":"ReservationCannotFill","message":"m"}}"#
        );
        let p = Decision::Page(Box::new(Page {
            service: ServiceId(3),
            name: "llm".into(),
            wanted: 4,
            have: 2,
            min: 1,
            gpus_blocked: 8,
            rate_pct: 30,
            limit_pct: 25,
            would_preempt: vec![PageVictim { job: JobId(9), account: "a".into(), gpus: 8, runtime_s: 60, since_checkpoint_s: 30 }],
            preempt_cost_gpu_hours: 0.5,
            degraded_cost_gpu_hours: 2.0,
            actions: vec!["x".into()],
        }));
        assert_eq!(
            AlertDecisionRow::of(&p).unwrap().to_value().to_string(),
            r#"{"Page":{"actions":["x"],"degraded_cost_gpu_hours":2.0,"gpus_blocked":8,"have":2,"limit_pct":25,"min":1,"name":"llm","preempt_cost_gpu_hours":0.5,"rate_pct":30,"service":3,"wanted":4,"would_preempt":[{"account":"a","gpus":8,"job":9,"runtime_s":60,"since_checkpoint_s":30}]}}"#
        );
        // The same text the core's derives write today (a check on this test, not the rule).
        assert_eq!(AlertDecisionRow::of(&p).unwrap().to_value(), serde_json::to_value(&p).unwrap());
        assert_eq!(AlertDecisionRow::of(&a).unwrap().to_value(), serde_json::to_value(&a).unwrap());
    }
}
