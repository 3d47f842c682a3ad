//! The controller's side of scheduling core II (`core::sched::services`): inference services
//! (`sdeploy`), their replicas as job-like records, preemption with the core's deadline, the
//! per-run accounting rows, and alerts and pages (persisted, `scontrol show alerts`, handed
//! to `AlertProgram`).
//!
//! A replica the core binds becomes a record in the job table with its replica id (a job id:
//! the core takes replica ids from the controller's job id sequence,
//! `Scheduler::share_job_ids`, so squeue, scontrol, sacct and alerts show a 32-bit Slurm job
//! id within `FirstJobId`..`MaxJobId`), the service's name as job name and the service
//! command as batch script, and is launched on its node like any job; its end is reported to the core
//! (`JobEnded`), which starts a replacement while the service wants it. Replicas are never
//! requeued and have no time limit.

use super::{Controller, Ident, PROV, SIGTERM};
use crate::job::{JobRecord, JobState, StopWhy, Stopping};
use flotilla_core::job::JobId;
use flotilla_core::sched::{Allocation, Decision, Event as CoreEvent};
use flotilla_proto::errno::*;
use flotilla_proto::{CtlToNode, Request, Response, SlurmError};
use std::collections::{BTreeMap, BTreeSet};
use tracing::{info, info_span, warn};
use crate::service::{replica_script, ServiceRecord};
use crate::svcstore::{AlertRow, RunRow, ServiceOp, SvcLoaded, ALERTS_KEPT};
use crate::store::rows::AlertDecisionRow;
use flotilla_core::cluster::PartId;
use flotilla_core::hostlist::compress_sorted;
use flotilla_core::sched::ServiceId;
use flotilla_proto::{AlertInfo, LargestPlaceableWire, ServiceCreate, ServiceInfo};
use std::collections::VecDeque;
use std::io::Write;
use std::path::PathBuf;

/// Services, alerts and sequences the controller keeps beside the job table.
#[derive(Debug, Default)]
pub(super) struct SvcState {
    services: BTreeMap<u32, ServiceRecord>,
    next_service_id: u32,
    alerts: VecDeque<AlertRow>,
    next_alert_id: u64,
    /// Alerts committed in this turn, as JSON for `AlertProgram` (sent after the commit).
    alert_out: Vec<String>,
}

fn svc_error(text: &str) -> SlurmError {
    SlurmError::with_message(ESLURM_INVALID_JOB_ID, text)
}

impl Controller {
    /// Restores services, sequences and recent alerts (before running replicas are restored).
    pub(super) fn recover_services(&mut self, l: SvcLoaded, now: i64) {
        self.svc.next_service_id = l.next_service_id.max(1);
        // An older controller's replica sequence counted from `REPLICA_ID_BASE`; one below
        // it (never written now) only moves the job id sequence on.
        if l.next_replica_id < flotilla_core::sched::REPLICA_ID_BASE {
            self.next_job_id = self.next_job_id.max(l.next_replica_id);
        }
        self.sched.share_job_ids(self.next_job_id, self.opts.first_job_id.max(1), self.opts.max_job_id.max(self.opts.first_job_id.max(1) + 1));
        self.svc.next_alert_id = l.alerts.last().map_or(1, |a| a.id + 1);
        self.svc.alerts = l.alerts.into();
        for (id, text) in l.services {
            let mut rec: ServiceRecord = match crate::store::rows::service_from_json(&text) {
                Ok(r) => r,
                Err(e) => panic!("service {id}: corrupt record in the state database: {e}"),
            };
            let Some(part) = self.sched.cluster().partition_id(&rec.template.partition) else {
                warn!(service = id, partition = %rec.template.partition, "service's partition is no longer configured: not restored");
                continue;
            };
            rec.template.spec.partition = part;
            self.core_event(CoreEvent::ServiceUpsert(rec.spec(part)), now);
            self.svc.services.insert(id, rec);
        }
    }

    /// The `sdeploy` requests and `scontrol show alerts`.
    pub(super) fn service_rpc(&mut self, ident: Ident, req: Request, now: i64) -> Response {
        match req {
            Request::ServiceCreate(c) => self.service_create(ident, *c, now),
            Request::ServiceScale { id, replicas } => self.service_change(ident, id, Some(replicas), now),
            Request::ServiceDelete { id } => self.service_change(ident, id, None, now),
            Request::QueryServices { ids } => Response::Services(self.query_services(&ids)),
            Request::QueryAlerts => Response::Alerts(
                self.svc
                    .alerts
                    .iter()
                    .map(|a| AlertInfo {
                        id: a.id,
                        time: a.time,
                        kind: a.kind.clone(),
                        job_id: a.job_id,
                        service_id: a.service,
                        message: a.message.clone(),
                    })
                    .collect(),
            ),
            _ => Response::Error(SlurmError::new(SLURM_UNEXPECTED_MSG_ERROR)),
        }
    }

    fn service_create(&mut self, ident: Ident, c: ServiceCreate, now: i64) -> Response {
        if let Err(e) = crate::authz::valid_id(ident, c.uid, c.gid) {
            warn!(uid = ident.uid, claimed_uid = c.uid, claimed_gid = c.gid, "service creation refused: {}", e.text);
            return Response::Error(e);
        }
        let id = self.svc.next_service_id;
        let mut rec = match ServiceRecord::new(id, c, self.sched.cluster(), &self.opts.admission, now) {
            Ok(r) => r,
            Err(e) => return Response::Error(e),
        };
        if let Err(e) = self.authorize_service(ident, &mut rec) {
            warn!(uid = ident.uid, name = %rec.create.name, "service creation refused: {}", e.text);
            return Response::Error(e);
        }
        self.svc.next_service_id += 1;
        self.batch.svc.next_service_id = Some(self.svc.next_service_id);
        let part = rec.template.spec.partition;
        info!(service = id, name = %rec.create.name, gpus = rec.create.gpus_per_replica, "service created");
        self.core_event(CoreEvent::ServiceUpsert(rec.spec(part)), now);
        self.save_service(&rec);
        self.svc.services.insert(id, rec);
        self.sched_dirty = true;
        Response::ServiceCreated { id }
    }

    /// Who may create `rec` ([`crate::authz`]): the partition's access keys and the account
    /// as for a job, then the service policy (`ServiceAccounts`, `ServiceMax*`). A service
    /// a non-admin creates has the partition's `MaxTime` as its replicas' time limit (each
    /// replica ends there and the service starts a replacement); an admin's replicas have
    /// none.
    fn authorize_service(&self, ident: Ident, rec: &mut ServiceRecord) -> Result<(), SlurmError> {
        let t = &rec.template;
        let access = &self.opts.access;
        access.check_partition(ident, (t.uid, t.gid), &t.partition, &t.account, &t.qos)?;
        access.check_account(&t.user, &t.account)?;
        let mine = self.svc.services.values().filter(|s| s.create.uid == rec.create.uid).map(|s| &s.create);
        access.services.check(ident, &rec.create, &t.account, mine)?;
        if !ident.admin {
            let max = self.sched.cluster().partitions[t.spec.partition.0 as usize].max_time_min;
            let min = max.map(|m| m.min(u64::from(u32::MAX - 2)) as u32);
            rec.template.set_time_limit(min);
        }
        Ok(())
    }

    /// `scale` (`Some(replicas)`) or `delete` (`None`).
    fn service_change(&mut self, ident: Ident, id: u32, replicas: Option<u32>, now: i64) -> Response {
        let Some(rec) = self.svc.services.get_mut(&id) else {
            return Response::Error(svc_error("Invalid service id specified"));
        };
        if !ident.admin && rec.create.uid != ident.uid {
            warn!(service = id, uid = ident.uid, "change of another user's service refused");
            return Response::Error(SlurmError::new(ESLURM_ACCESS_DENIED));
        }
        match replicas {
            Some(n) => {
                rec.desired_replicas = n;
                info!(service = id, desired = n, "service scaled");
                let rec = rec.clone();
                self.core_event(CoreEvent::ServiceScale { service: ServiceId(id), desired: n }, now);
                self.save_service(&rec);
            }
            None => {
                info!(service = id, "service deleted: its replicas stop");
                self.svc.services.remove(&id);
                self.core_event(CoreEvent::ServiceDelete(ServiceId(id)), now);
                self.batch.svc.services.push(ServiceOp::Delete(id));
            }
        }
        self.sched_dirty = true;
        Response::JobResults(Vec::new())
    }

    fn save_service(&mut self, rec: &ServiceRecord) {
        let record = crate::store::rows::service_to_json(rec);
        self.batch.svc.services.push(ServiceOp::Upsert {
            id: rec.id,
            name: rec.create.name.clone(),
            record,
        });
    }

    fn query_services(&self, ids: &[u32]) -> Vec<ServiceInfo> {
        self.svc
            .services
            .values()
            .filter(|s| ids.is_empty() || ids.contains(&s.id))
            .map(|s| {
                let running: Vec<&JobRecord> = self
                    .jobs
                    .values()
                    .filter(|j| j.service == Some(s.id) && matches!(j.state, JobState::Running | JobState::Completing))
                    .collect();
                let (_, pending) = self.sched.service_replicas(ServiceId(s.id));
                // Replicas may share a node: each node once.
                let nodes: Vec<String> = running
                    .iter()
                    .flat_map(|j| j.nodes.iter().cloned())
                    .collect::<BTreeSet<String>>()
                    .into_iter()
                    .collect();
                ServiceInfo {
                    id: s.id,
                    name: s.create.name.clone(),
                    user: s.template.user.clone(),
                    account: s.template.account.clone(),
                    partition: s.template.partition.clone(),
                    gpus_per_replica: s.create.gpus_per_replica,
                    gpu_type: s.create.gpu_type.clone(),
                    topology: s.template.topology.clone(),
                    cpus_per_replica: (s.template.spec.request.cpu_milli_per_node / 1000) as u32,
                    mem_per_replica_mib: s.template.mem_per_node_mib,
                    min_replicas: s.create.min_replicas,
                    max_replicas: s.create.max_replicas,
                    desired_replicas: s.desired_replicas,
                    running_replicas: running.len() as u32,
                    pending_replicas: pending.len() as u32,
                    priority: s.create.priority,
                    command: s.create.command.clone(),
                    create_time: s.create_time,
                    replica_ids: running.iter().map(|j| j.id).collect(),
                    nodes: compress_sorted(&nodes),
                }
            })
            .collect()
    }

    /// The core started `replica` of `service` on `allocs`: a job-like record, launched as a job.
    pub(super) fn bind_replica(&mut self, service: ServiceId, replica: JobId, allocs: Vec<Allocation>, now: i64) {
        let Some(s) = self.svc.services.get(&service.0) else {
            warn!(service = service.0, replica = replica.0, "replica of an unknown service: released");
            self.core_event(CoreEvent::JobEnded(replica), now);
            return;
        };
        let rec = s.replica_record(replica.0, s.template.spec.partition, now);
        let env = serde_json::to_string(&s.create.environment).unwrap_or_else(|_| "[]".into());
        self.batch.scripts.push((replica.0, replica_script(&s.create.command), env));
        self.sched.hold_job_id(replica.0);
        self.jobs.insert(replica.0, rec);
        info!(service = service.0, replica = replica.0, "replica starting");
        self.bind_job(replica.0, allocs, now);
    }

    /// Stops a replica (scale-down, deletion, relocation): SIGTERM, SIGKILL after `KillWait`;
    /// its end is reported to the core, which then releases its GPUs.
    pub(super) fn stop_replica(&mut self, replica: JobId, now: i64) {
        match self.jobs.get(&replica.0) {
            Some(r) if r.state == JobState::Running && r.stopping.is_none() => {
                info!(replica = replica.0, "stopping replica");
                self.start_stop(replica.0, StopWhy::Cancel, now);
            }
            Some(_) => {}
            None => {
                self.core_event(CoreEvent::JobEnded(replica), now);
            }
        }
    }

    /// The core preempts `core`: SIGTERM to the batch step now, SIGKILL at the core's
    /// `deadline` unless the job acknowledges its checkpoint or exits first; then requeued.
    pub(super) fn preempt(&mut self, core: u64, for_job: u64, deadline: u64, now: i64) {
        let Some(id) = self.job_of_core(core) else { return };
        let rec = self.jobs.get_mut(&id).expect("job exists");
        if rec.stopping.is_some() || rec.state != JobState::Running {
            return;
        }
        let kill_at = i64::try_from(deadline).unwrap_or(i64::MAX);
        rec.stopping = Some(Stopping {
            why: StopWhy::Preempt,
            term_at: now,
            kill_sent: false,
            kill_at: Some(kill_at),
        });
        let batch_host = rec.nodes.first().cloned();
        let _span = info_span!("job", job = id).entered();
        info!(for_job, deadline = kill_at, "preempted: SIGTERM to the batch step, SIGKILL at the deadline unless it acknowledges its checkpoint");
        self.dirty(id);
        if let Some(n) = batch_host {
            self.send(&n, CtlToNode::Signal {
                job_id: id,
                signal: SIGTERM,
                batch_only: true,
            });
        }
    }

    /// Records the end of the current run of `id` as `state` (`sacct --duplicates`).
    pub(super) fn record_run(&mut self, id: u64, state: &str) {
        let rec = &self.jobs[&id];
        if rec.start_time.is_none() {
            return;
        }
        self.batch.svc.runs.push(RunRow {
            job_id: id,
            step: rec.restarts,
            state: state.to_string(),
            exit_code: rec.exit_code,
            signal: rec.exit_signal,
            start_time: rec.start_time,
            end_time: rec.end_time,
            nodes: compress_sorted(&rec.nodes),
            requid: None,
            reason_prev: rec.acct.reason_prev.map(|r| r.as_str().to_string()),
            alloc: None,
        });
    }

    /// An alert or a page of the core: logged, kept (`scontrol show alerts`), persisted, and
    /// queued for `AlertProgram` (run after the commit).
    pub(super) fn raise_alert(&mut self, d: &Decision, now: i64) {
        let (kind, job_id, service, message) = match d {
            Decision::Alert { kind, job, message } => {
                // A replica not bound yet has no record: its id is its job id already.
                let job_id = job.and_then(|j| self.job_of_core(j.0).or((j.0 & PROV == 0).then_some(j.0)));
                (format!("{kind:?}"), job_id, None, message.clone())
            }
            Decision::Page(p) => (
                "Page".to_string(),
                None,
                Some(p.service.0),
                format!(
                    "service {} ({}) wants {} replicas and runs {} (min {}): preempting {} job(s) for {} GPUs would take the preempted share of training to {}% (page limit {}%); preempting costs {:.2} GPU-hours of training, staying degraded {:.2} GPU-hours per hour; choose: {}",
                    p.service.0,
                    p.name,
                    p.wanted,
                    p.have,
                    p.min,
                    p.would_preempt.len(),
                    p.gpus_blocked,
                    p.rate_pct,
                    p.limit_pct,
                    p.preempt_cost_gpu_hours,
                    p.degraded_cost_gpu_hours,
                    p.actions.join(" | ")
                ),
            ),
            _ => return,
        };
        let id = self.svc.next_alert_id.max(1);
        self.svc.next_alert_id = id + 1;
        warn!(alert = id, kind = %kind, job = ?job_id, service = ?service, "{message}");
        let decision = AlertDecisionRow::of(d).map_or(serde_json::Value::Null, |r| r.to_value());
        let row = AlertRow {
            id,
            time: now,
            kind,
            job_id,
            service,
            message,
            decision: decision.to_string(),
        };
        if self.opts.alert_program.is_some() {
            let json = serde_json::json!({
                "id": row.id,
                "time": row.time,
                "kind": row.kind,
                "job_id": row.job_id,
                "service_id": row.service,
                "message": row.message,
                "decision": decision,
            });
            self.svc.alert_out.push(json.to_string());
        }
        self.batch.svc.alerts.push(row.clone());
        self.svc.alerts.push_back(row);
        while self.svc.alerts.len() > ALERTS_KEPT {
            self.svc.alerts.pop_front();
        }
    }

    /// Runs `AlertProgram` once per alert committed this turn, with the alert as JSON on its
    /// standard input, each in its own thread: the owner task never waits for it.
    pub(super) fn run_alert_programs(&mut self) {
        if self.svc.alert_out.is_empty() {
            return; // every turn's flush: nothing to clone or spawn
        }
        let out = std::mem::take(&mut self.svc.alert_out);
        let Some(prog) = self.opts.alert_program.clone() else { return };
        for json in out {
            let prog: PathBuf = prog.clone();
            std::thread::spawn(move || {
                let child = std::process::Command::new(&prog)
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn();
                let mut child = match child {
                    Ok(c) => c,
                    Err(e) => {
                        warn!(program = %prog.display(), "AlertProgram cannot be started: {e}");
                        return;
                    }
                };
                if let Some(mut stdin) = child.stdin.take() {
                    let _ = stdin.write_all(json.as_bytes());
                    let _ = stdin.write_all(b"\n");
                }
                match child.wait() {
                    Ok(st) if !st.success() => warn!(program = %prog.display(), "AlertProgram failed: {st}"),
                    Ok(_) => {}
                    Err(e) => warn!(program = %prog.display(), "AlertProgram: {e}"),
                }
            });
        }
    }

    /// `largest_placeable` of partition `i` (sinfo `-O LargestPlaceable`, `--largest`).
    pub(super) fn largest_placeable_of(&self, i: usize) -> LargestPlaceableWire {
        let lp = self.sched.largest_placeable_in(PartId(i as u32));
        LargestPlaceableWire {
            node: lp.node,
            pod: lp.pod,
            any: lp.any,
        }
    }

    /// Elastic growth of partition `i` (`sinfo --largest`, `-O LargestReclaimable`, the
    /// metrics): the grown GPUs that may be taken back and the partition's
    /// `largest_placeable` if they were (`Scheduler::reclaimable_in`).
    pub(super) fn reclaimable_of(&self, i: usize) -> (u32, LargestPlaceableWire) {
        let r = self.sched.reclaimable_in(PartId(i as u32));
        (
            r.grown_gpus,
            LargestPlaceableWire {
                node: r.largest.node,
                pod: r.largest.pod,
                any: r.largest.any,
            },
        )
    }
}
