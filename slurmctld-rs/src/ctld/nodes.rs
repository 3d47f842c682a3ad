//! Node sessions: registration, heartbeats and the level-triggered reconciler, GPU health
//! verdicts, checkpoint acknowledgements, batch-script exits and the end of a job on every
//! node, and `scontrol update nodename=`.

use super::{reset_for_requeue, Controller, Ident, NodeSess, Outgoing};
use crate::job::{JobState, StopWhy, Stopping};
use crate::store::{AllocOp, NodeRow};
use flotilla_core::cluster::{NodeAvail, NodeId};
use flotilla_core::sched::Event as CoreEvent;
use flotilla_proto::errno::*;
use flotilla_proto::{CtlToNode, HealthLevel, JobExit, NodeJob, NodeToCtl, Register, Response, SlurmError};
use std::collections::{HashMap, HashSet};
use tokio::sync::mpsc;
use tracing::{debug, error, info, info_span, warn};

/// A node session heard from within this many seconds is live: a second registration of
/// the node is refused while it is (a holder of the cluster key cannot take over a working
/// node's session and its launches). Slurm's `MessageTimeout` default; node daemons
/// heartbeat every 2 s by default. A daemon restarted after a crash is not held up: its old
/// connection died with it (the controller sees the close, and the session is gone), and
/// one whose old session is half-open (power lost, network cut) gets in once that session
/// has been silent this long; `slurmd` retries a refused registration every 2 s.
pub const NODE_SESSION_LIVE_S: i64 = 10;

impl Controller {
    /// `scontrol update NodeName=`: drain, fail, resume or down nodes (admins only, as Slurm).
    pub(super) fn update_node(&mut self, ident: Ident, u: flotilla_proto::UpdateNode, now: i64) -> Response {
        if !ident.admin {
            warn!(uid = ident.uid, "node update by a non-admin refused");
            return Response::Error(SlurmError::new(ESLURM_USER_ID_MISSING));
        }
        let mut ids = Vec::new();
        for n in &u.names {
            match self.sched.cluster().node_id(n) {
                Some(id) => ids.push(id),
                None => return Response::Error(SlurmError::new(ESLURM_INVALID_NODE_NAME)),
            }
        }
        if u.features.is_some() || u.features_act.is_some() {
            if let Err(e) = self.update_node_features(&ids, u.features.as_deref(), u.features_act.as_deref(), now) {
                return Response::Error(e);
            }
        }
        let reason = u.reason.clone().unwrap_or_default();
        let state = u.state.as_deref().map(str::to_ascii_uppercase);
        let avail = match state.as_deref() {
            None => return Response::JobResults(Vec::new()),
            Some("DRAIN") => NodeAvail::Drain { reason },
            Some("DOWN") => NodeAvail::Down { reason },
            // Slurm 22.05 `node_mgr.c` `update_node`: FAIL takes the node out of the
            // available set (no new work, running jobs continue) and replaces a DRAIN, as a
            // DRAIN replaces a FAIL (the two flags are cleared before either is set).
            Some("FAIL") => NodeAvail::Fail { reason },
            Some("RESUME" | "IDLE" | "UNDRAIN") => NodeAvail::Up,
            Some(_) => return Response::Error(SlurmError::new(ESLURM_NOT_SUPPORTED)),
        };
        // Slurm 22.05 `node_mgr.c` `update_node` and `_valid_node_state_change`: RESUME only
        // takes a node out of DOWN, DRAIN or FAIL (here also a quarantine or a node not
        // registered yet); the other nodes named are updated, the answer is the error.
        let mut invalid = false;
        if state.as_deref() == Some("RESUME") {
            ids.retain(|&id| {
                let up = self.sched.cluster().node(id).avail == NodeAvail::Up;
                invalid |= up;
                !up
            });
        }
        for id in ids {
            info!(node = %self.sched.cluster().node(id).name, ?avail, "node availability updated by an admin");
            let d = self.sched.handle(CoreEvent::NodeAvail { node: id, avail: avail.clone() }, now as u64);
            self.apply(d, now);
            self.reason_set(id, Some(ident.uid), now);
            self.save_node(id);
        }
        self.sched_dirty = true;
        if invalid {
            return Response::Error(SlurmError::new(ESLURM_INVALID_NODE_STATE));
        }
        Response::JobResults(Vec::new())
    }

    /// `AvailableFeatures=` (`avail`) and `ActiveFeatures=` (`act`) of `scontrol update
    /// NodeName=` on nodes `ids`, as Slurm 22.05's `node_mgr.c` `update_node` sets them
    /// without a node_features plugin: the active ones (given, else the current ones) must be
    /// a subset of the available ones (given, else the current ones), checked before either
    /// changes, else `ESLURM_ACTIVE_FEATURE_NOT_SUBSET` and that node is left as it was; new
    /// available features without active ones make both the same. Comma-separated; empty
    /// clears. The active ones are what `--constraint` matches (the core's node features).
    /// Like Slurm without `-R`, a restart goes back to slurm.conf's `Features=`.
    fn update_node_features(&mut self, ids: &[NodeId], avail: Option<&str>, act: Option<&str>, now: i64) -> Result<(), SlurmError> {
        let list = |s: &str| -> Vec<String> { s.split(',').filter(|f| !f.is_empty()).map(str::to_string).collect() };
        let mut err = None;
        for &id in ids {
            let cur_act = self.sched.cluster().node(id).features.clone();
            let shown = self.nodes[id.0 as usize].shown_features.clone();
            let cur_avail = match &shown {
                Some((a, _)) => a.as_deref().map(list).unwrap_or_default(),
                None => cur_act.clone(),
            };
            let new_avail = avail.map(list).unwrap_or_else(|| cur_avail.clone());
            let checked_act = act.map(list).unwrap_or_else(|| cur_act.clone());
            if !checked_act.iter().all(|f| new_avail.contains(f)) {
                warn!(node = %self.sched.cluster().node(id).name, "ActiveFeatures not a subset of AvailableFeatures: update refused");
                err = Some(SlurmError::new(ESLURM_ACTIVE_FEATURE_NOT_SUBSET));
                continue;
            }
            // The active ones: as given, else the available ones given (the caller passes one
            // at least), shown as written (`Some("")` once emptied).
            let new_act = act.map_or_else(|| new_avail.clone(), list);
            let act_shown = act.or(avail).map(str::to_string);
            // The available ones: as given, `(null)` when emptied; else as they were.
            let avail_shown = match avail {
                Some(v) => (!v.is_empty()).then(|| v.to_string()),
                None => shown.map_or_else(|| super::queries::joined(&cur_avail), |s| s.0),
            };
            info!(node = %self.sched.cluster().node(id).name, avail = %new_avail.join(","), active = %new_act.join(","), "node features updated by an admin");
            self.nodes[id.0 as usize].shown_features = Some((avail_shown, act_shown));
            let d = self.sched.handle(CoreEvent::NodeFeatures { node: id, features: new_act }, now as u64);
            self.apply(d, now);
        }
        self.sched_dirty = true;
        err.map_or(Ok(()), Err)
    }

    pub(super) fn node_register(&mut self, conn: u64, reg: Register, tx: mpsc::UnboundedSender<CtlToNode>, now: i64) -> Response {
        let Some(nid) = self.sched.cluster().node_id(&reg.node) else {
            warn!(node = %reg.node, "registration of an unknown node refused");
            return Response::Error(SlurmError::new(ESLURM_INVALID_NODE_NAME));
        };
        let _span = info_span!("node", node = %reg.node).entered();
        let i = nid.0 as usize;
        if let Some(old) = &self.nodes[i].sess {
            let silent = now - old.last_heard;
            if silent < NODE_SESSION_LIVE_S && !old.tx.is_closed() {
                error!(old_conn = old.conn, new_conn = conn, silent_s = silent, epoch = reg.boot_epoch, "second registration of a node whose session is live: refused");
                return Response::Error(SlurmError::with_message(
                    ESLURM_ACCESS_DENIED,
                    format!("node {} already has a live session (heard {silent} s ago); registration refused", reg.node),
                ));
            }
            warn!(old_conn = old.conn, new_conn = conn, silent_s = silent, "registration replaces a silent session");
        }
        self.nodes[i].sess = Some(NodeSess { conn, tx, last_heard: now });
        self.nodes[i].down_since = None;
        if self.nodes[i].marked_down {
            self.nodes[i].marked_down = false;
            let ds = self.sched.handle(CoreEvent::NodeAvail { node: nid, avail: NodeAvail::Up }, now as u64);
            self.apply(ds, now);
        }
        let old = self.sched.cluster().node(nid).boot_epoch;
        let ds = self.sched.handle(
            CoreEvent::NodeRegistered {
                node: nid,
                boot_epoch: reg.boot_epoch,
            },
            now as u64,
        );
        if old != reg.boot_epoch {
            info!(old, new = reg.boot_epoch, requeued = ds.len(), "node registered with a new boot epoch");
        }
        self.apply(ds, now);
        self.save_node(nid);
        self.reconcile(nid, &reg.running, &reg.finished, now);
        self.sched_dirty = true;
        Response::Registered
    }

    pub(super) fn save_node(&mut self, nid: NodeId) {
        let n = self.sched.cluster().node(nid);
        self.batch.nodes.push(NodeRow {
            name: n.name.clone(),
            boot_epoch: n.boot_epoch,
            avail: crate::store::rows::avail_to_json_with(&n.avail, self.nodes[nid.0 as usize].reason_set),
        });
    }

    /// The node's reason was set now by `uid` (Slurm's `reason_time`, `reason_uid`: the
    /// requester of `scontrol update`, else the controller's own user).
    pub(super) fn reason_set(&mut self, nid: NodeId, uid: Option<u32>, now: i64) {
        let uid = uid.unwrap_or_else(|| nix::unistd::geteuid().as_raw());
        self.nodes[nid.0 as usize].reason_set = Some((now, uid));
    }

    pub(super) fn node_msg(&mut self, conn: u64, node: &str, msg: NodeToCtl, now: i64) {
        let Some(nid) = self.sched.cluster().node_id(node) else { return };
        match self.nodes[nid.0 as usize].sess.as_mut() {
            Some(s) if s.conn == conn => s.last_heard = now,
            _ => return,
        }
        match msg {
            NodeToCtl::Heartbeat {
                boot_epoch,
                running,
                finished,
            } => {
                if boot_epoch != self.sched.cluster().node(nid).boot_epoch {
                    let ds = self.sched.handle(CoreEvent::NodeRegistered { node: nid, boot_epoch }, now as u64);
                    self.apply(ds, now);
                    self.save_node(nid);
                }
                self.reconcile(nid, &running, &finished, now);
            }
            NodeToCtl::JobExited(exit) => {
                self.job_exited(nid, &exit, now);
                self.node_out.push((nid.0 as usize, Outgoing::Msg(CtlToNode::AckExits { job_ids: vec![exit.job_id] })));
            }
            NodeToCtl::CheckpointAck { job_id, run, at } => self.checkpoint_ack(job_id, run, at, now),
            NodeToCtl::Health { verdict, reason, events } => self.node_health(nid, verdict, reason, &events, now),
            NodeToCtl::StepUsage(u) => self.step_usage(nid, u, now),
        }
    }

    /// A node's report of what a step used there: recorded (`step_usage`) when the job is
    /// known and ran on that node, under the node's own name whatever the report says; the
    /// batch step's only for the job's current run. The last report of an `srun` step on a
    /// node carries the step's end there ([`Controller::node_step_end`]).
    fn step_usage(&mut self, nid: NodeId, mut u: flotilla_proto::StepUsage, now: i64) {
        let name = self.sched.cluster().node(nid).name.clone();
        let Some(rec) = self.jobs.get(&u.job_id) else { return };
        if !rec.nodes.contains(&name) || u.step == "batch" && u.run != rec.restarts {
            debug!(job = u.job_id, step = %u.step, node = %name, "usage report of a job not running there: ignored");
            return;
        }
        u.node = name;
        let end = u.exit.zip(u.step.parse::<u32>().ok()).filter(|_| u.done);
        let (job_id, node) = (u.job_id, u.node.clone());
        self.batch.usage.push(u);
        if let Some((exit, step_id)) = end {
            self.node_step_end(job_id, step_id, node, exit, now);
        }
    }

    /// A node's GPU health verdict. Quarantine: the node is drained with the reason (persisted
    /// with the node, so it survives a restart; re-registering does not lift it), the core
    /// requeues its jobs (killed there, like a node failure) and places nothing there again
    /// until an admin resumes it. A node already quarantined keeps its first reason. Warn:
    /// logged.
    fn node_health(&mut self, nid: NodeId, verdict: HealthLevel, reason: String, events: &[String], now: i64) {
        let name = self.sched.cluster().node(nid).name.clone();
        let _span = info_span!("node", node = %name).entered();
        match verdict {
            HealthLevel::Warn => warn!(reason = %reason, ?events, "GPU health warning"),
            HealthLevel::Quarantine => {
                if matches!(self.sched.cluster().node(nid).avail, NodeAvail::Quarantined { .. }) {
                    info!(reason = %reason, "GPU health: node already quarantined");
                    return;
                }
                error!(reason = %reason, ?events, "GPU health: node quarantined");
                let ds = self.sched.handle(
                    CoreEvent::NodeAvail {
                        node: nid,
                        avail: NodeAvail::Quarantined { reason },
                    },
                    now as u64,
                );
                self.apply(ds, now);
                self.reason_set(nid, None, now);
                self.save_node(nid);
                self.sched_dirty = true;
            }
        }
    }

    /// A job being stopped saved its checkpoint: SIGKILL now instead of at the deadline.
    fn checkpoint_ack(&mut self, id: u64, run: u32, at: i64, now: i64) {
        let Some(rec) = self.jobs.get_mut(&id) else { return };
        if rec.restarts != run || rec.state != JobState::Running {
            return;
        }
        rec.last_checkpoint_ack = Some(at);
        let core = rec.spec.id;
        self.dirty(id);
        self.core_event(CoreEvent::CheckpointAck { job: core, at: at.max(0) as u64 }, now);
        let rec = self.jobs.get_mut(&id).expect("present");
        let Some(s) = rec.stopping.as_mut().filter(|s| !s.kill_sent) else { return };
        s.kill_sent = true;
        let _span = info_span!("job", job = id).entered();
        info!(acked_at = at, "checkpoint acknowledged: killing without waiting for the deadline");
        let nodes = rec.nodes.clone();
        self.dirty(id);
        for n in nodes {
            self.send(&n, CtlToNode::Kill { job_id: id });
        }
    }

    /// Level-triggered: converges the node on the table. Ended jobs are recorded; jobs the
    /// table runs there but the node does not are bound again (a bind lost in a crash between
    /// commit and send); jobs the node runs but the table does not are killed; completing
    /// jobs the node no longer runs are finished.
    fn reconcile(&mut self, nid: NodeId, running: &[NodeJob], finished: &[JobExit], now: i64) {
        let i = nid.0 as usize;
        let name = self.sched.cluster().node(nid).name.clone();
        for exit in finished {
            self.job_exited(nid, exit, now);
        }
        if !finished.is_empty() {
            self.node_out.push((i, Outgoing::Msg(CtlToNode::AckExits {
                job_ids: finished.iter().map(|e| e.job_id).collect(),
            })));
        }
        let reported: HashMap<u64, u32> = running.iter().map(|r| (r.job_id, r.run)).collect();
        let ended: HashSet<u64> = finished.iter().map(|e| e.job_id).collect();
        let active: Vec<u64> = self.nodes[i].jobs.iter().copied().collect();
        for id in &active {
            let Some(rec) = self.jobs.get(id) else { continue };
            let here = reported.get(id).is_some_and(|&run| run == rec.restarts);
            match rec.state {
                JobState::Running => {
                    if here {
                        if rec.stopping.is_some_and(|s| s.kill_sent) {
                            self.node_out.push((i, Outgoing::Msg(CtlToNode::Kill { job_id: *id })));
                        }
                    } else if !ended.contains(id) {
                        debug!(job = id, node = %name, "bind not acknowledged by the node: sending it again");
                        self.node_out.push((i, Outgoing::Bind(*id)));
                    }
                }
                JobState::Completing if rec.completing_nodes.contains(&name) => {
                    if reported.contains_key(id) {
                        self.node_out.push((i, Outgoing::Msg(CtlToNode::Kill { job_id: *id })));
                    } else {
                        let rec = self.jobs.get_mut(id).expect("present");
                        rec.completing_nodes.retain(|n| *n != name);
                        let done = rec.completing_nodes.is_empty();
                        self.dirty(*id);
                        if done {
                            self.finalize(*id, now);
                        }
                    }
                }
                _ => {}
            }
        }
        for r in running {
            let ours = self.jobs.get(&r.job_id).is_some_and(|rec| {
                matches!(rec.state, JobState::Running | JobState::Completing)
                    && rec.restarts == r.run
                    && rec.nodes.contains(&name)
            });
            if !ours {
                warn!(job = r.job_id, node = %name, "node runs a job the controller does not place there: killing it");
                self.node_out.push((i, Outgoing::Msg(CtlToNode::Kill { job_id: r.job_id })));
            }
        }
    }

    fn job_exited(&mut self, nid: NodeId, exit: &JobExit, now: i64) {
        let name = &self.sched.cluster().node(nid).name;
        let Some(rec) = self.jobs.get_mut(&exit.job_id) else { return };
        if rec.restarts != exit.run || rec.state != JobState::Running || rec.nodes.first() != Some(name) || rec.interactive {
            // (An interactive allocation has no batch script: it ends when given back.)
            return;
        }
        let _span = info_span!("job", job = rec.id).entered();
        rec.exit_code = exit.exit_code;
        rec.exit_signal = exit.signal;
        // `RequeueExit`/`RequeueExitHold` (Slurm 22.05 `job_hold_requeue` and
        // `_set_job_requeue_exit_value`): a script that ended by itself with one of the codes
        // (its `WEXITSTATUS`: 0 after a signal) is requeued as `scontrol requeue` would, even
        // when submitted `--no-requeue`; held in state `SPECIAL_EXIT` for a hold code. The run
        // ends `REQUEUED`; the job waits out the hold-off (`BeginTime`) and keeps its exit code.
        if rec.stopping.is_none() && !rec.is_array_meta() {
            let code = if exit.signal != 0 { 0 } else { exit.exit_code };
            let hold = usize::try_from(code).ok().and_then(|c| self.opts.requeue_on_exit.get(c).copied().flatten());
            if let Some(hold) = hold {
                info!(exit_code = code, hold, "requeued for its exit code (RequeueExit/RequeueExitHold)");
                rec.stopping = Some(Stopping { why: StopWhy::Requeue { hold }, term_at: now, kill_sent: true, kill_at: None });
                rec.spec.begin_time = Some(super::requeue_begin(now, self.opts.requeue_holdoff_s));
                rec.special_exit = hold;
                rec.acct.cancelled_by = None;
                self.exit_requeues.insert(rec.id, (exit.exit_code, hold));
            }
        }
        // A job stopped for good, or a run stopped by a requeue, ended at its stop (Slurm's
        // `_job_complete` leaves the `end_time` of a job already ended alone;
        // `_job_requeue_op` set it at the requeue); any other ends now.
        let ended_at_stop = rec.stopped_for_good().is_some() || rec.requeued_at_stop();
        rec.end_time = Some(rec.end_time.filter(|_| ended_at_stop).unwrap_or(now));
        rec.end_state = Some(match rec.stopping.map(|s| s.why) {
            Some(StopWhy::Cancel) => JobState::Cancelled,
            Some(StopWhy::Timeout) => JobState::Timeout,
            Some(StopWhy::Preempt | StopWhy::Requeue { .. }) => JobState::Pending,
            None if exit.oom => JobState::OutOfMemory,
            None if exit.signal != 0 || exit.exit_code != 0 => JobState::Failed,
            None => JobState::Completed,
        });
        if let Some(r) = end_reason(rec.stopping.map(|s| s.why), exit) {
            rec.reason = Some(r.to_string());
        }
        info!(exit_code = exit.exit_code, signal = exit.signal, state = ?rec.end_state, "batch script ended");
        self.cycle_unpaced = true;
        rec.completing_nodes = rec.nodes.iter().skip(1).cloned().collect();
        rec.state = JobState::Completing;
        let others = rec.completing_nodes.clone();
        let id = rec.id;
        self.dirty(id);
        for n in others {
            self.send(&n, CtlToNode::Kill { job_id: id });
        }
        if self.jobs[&id].completing_nodes.is_empty() {
            self.finalize(id, now);
        }
    }

    /// A job's processes are gone everywhere: release its resources, then finish or requeue.
    fn finalize(&mut self, id: u64, now: i64) {
        let rec = self.jobs.get_mut(&id).expect("job exists");
        let core = rec.spec.id;
        let nodes = rec.nodes.clone();
        let why = rec.stopping.map(|s| s.why);
        self.batch.allocs.push(AllocOp::DeleteJob(id));
        for n in &nodes {
            if let Some(nid) = self.sched.cluster().node_id(n) {
                self.nodes[nid.0 as usize].jobs.remove(&id);
            }
        }
        self.batch.steps.insert(id);
        self.batch.acct.insert(id);
        self.end_steps(id, now);
        let run_state = match why {
            Some(StopWhy::Preempt) => JobState::Preempted.as_str(),
            Some(StopWhy::Requeue { .. }) => "REQUEUED",
            _ => self.jobs[&id].end_state.unwrap_or(JobState::Completed).as_str(),
        };
        self.record_run(id, run_state);
        if matches!(why, Some(StopWhy::Preempt | StopWhy::Requeue { .. })) {
            self.acct_requeued(id, now, None, run_state);
        }
        match why {
            Some(StopWhy::Preempt) => {
                self.core_event(CoreEvent::Requeued(core), now);
                let rec = self.jobs.get_mut(&id).expect("job exists");
                reset_for_requeue(rec, false);
                rec.spec.preempt_count += 1;
                self.stats.requeued += 1;
                self.requeue_to_core(id, true, now);
            }
            Some(StopWhy::Requeue { hold }) => {
                self.core_event(CoreEvent::JobEnded(core), now);
                let rec = self.jobs.get_mut(&id).expect("job exists");
                reset_for_requeue(rec, hold);
                if let Some((code, hold)) = self.exit_requeues.remove(&id) {
                    // Requeued for its exit code: the code stays, and a hold shows as the
                    // user's (`JobHeldUser`), not as a requeue's.
                    rec.exit_code = code;
                    if hold {
                        rec.reason = None;
                    }
                }
                self.requeue_to_core(id, false, now);
                self.stats.requeued += 1;
            }
            _ => {
                self.core_event(CoreEvent::JobEnded(core), now);
                let rec = self.jobs.get_mut(&id).expect("job exists");
                let st = rec.end_state.take().unwrap_or(JobState::Completed);
                rec.state = st;
                rec.allocs.clear();
                rec.completing_nodes.clear();
                rec.stopping = None;
                match st {
                    JobState::Completed => self.stats.completed += 1,
                    JobState::Cancelled => self.stats.cancelled += 1,
                    _ => self.stats.failed += 1,
                }
                if core.0 != id {
                    self.core_map.remove(&core.0);
                }
            }
        }
        self.dirty(id);
        self.sched_dirty = true;
    }
}

/// The reason a job that ended keeps (Slurm 22.05 `job_mgr.c` `_job_complete` and
/// `_job_timed_out`): `TimeLimit` for a time limit, `OutOfMemory`, `NonZeroExitCode` for a
/// script that exited with a status, `JobLaunchFailure` for one a signal ended; none for a
/// cancel, a requeue or a clean exit (the reason it had stays).
fn end_reason(why: Option<StopWhy>, exit: &JobExit) -> Option<&'static str> {
    match why {
        Some(StopWhy::Timeout) => Some("TimeLimit"),
        Some(_) => None,
        None if exit.oom => Some("OutOfMemory"),
        None if exit.exit_code != 0 => Some("NonZeroExitCode"),
        None if exit.signal != 0 => Some("JobLaunchFailure"),
        None => None,
    }
}
