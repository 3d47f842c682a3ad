//! The controller's lifecycle: recovery from the store, the owner loop and its turn (events,
//! timer work, the debounced scheduling cycle, one commit, then effects), and how the core's
//! decisions are carried out (binds, requeues after a node loss).

use super::{answers_between_phases, check_core_invariants, prov_decode, reset_for_requeue, Controller, Due, Event, Ident, Inbox, Outgoing, MAX_BATCH, PROV};
use crate::deps;
use crate::job::{JobRecord, JobState, StopWhy};
use crate::store::AllocOp;
use flotilla_core::cluster::{NodeAvail, NodeId};
use flotilla_core::hostlist::compress_sorted;
use flotilla_core::job::JobId;
use flotilla_core::sched::{Allocation, Decision, Event as CoreEvent, RequeueReason, RunningJob};
use flotilla_proto::errno::*;
use flotilla_proto::{Bind, CtlToNode, LaunchDetails, Response, SlurmError};
use std::collections::{BTreeMap, HashSet};
use std::time::Instant;
use tokio::sync::{mpsc, watch};
use tracing::{error, info, info_span, warn};

impl Controller {
    /// Rebuilds the controller from the store at `now`. Logs `recovered state` with how long
    /// each part took (ms): `purge_ms` (finished jobs past `MinJobAge` deleted), `load_ms` (the
    /// rows read and parsed, [`crate::store::Store::load`]) and `rebuild_ms` (the scheduler and
    /// the tables rebuilt from them): what a takeover spends on the state
    /// (`benches/takeover.rs`).
    pub(super) fn recover(&mut self, now: i64) -> Result<(), crate::store::StoreError> {
        let t0 = Instant::now();
        // Jobs that finished past MinJobAge while the controller was down (or before purging
        // reached the store) leave it with their scripts; a full disk only delays that.
        match self.store.purge_finished(now - self.opts.min_job_age_s) {
            Ok(0) => {}
            Ok(n) => info!(jobs = n, "purged finished jobs from the state database"),
            Err(e) => warn!("cannot purge finished jobs from the state database: {e}"),
        }
        let t_load = Instant::now();
        // A standby that followed the store reads only the rows changed since its last look.
        let mut follower = self.store.take_follower();
        let mut loaded = self.store.load_with(now - self.opts.min_job_age_s, follower.as_mut())?;
        let t_rebuild = Instant::now();
        self.next_job_id = loaded.next_job_id.max(self.opts.first_job_id);
        self.recover_services(std::mem::take(&mut loaded.svc), now);
        self.recover_usage(now)?;
        let mut known: HashSet<String> = HashSet::new();
        for row in &loaded.nodes {
            if let Some(id) = self.sched.cluster().node_id(&row.name) {
                let avail = match crate::store::rows::avail_from_json(&row.avail) {
                    Ok(NodeAvail::Down { reason }) if reason == "Not responding" => NodeAvail::Up,
                    Ok(a) => a,
                    Err(_) => self.sched.cluster().node(id).avail.clone(),
                };
                self.sched.restore_node(id, row.boot_epoch, avail);
                self.nodes[id.0 as usize].reason_set = crate::store::rows::reason_set_from_json(&row.avail);
                known.insert(row.name.clone());
            }
        }
        // A node never registered waits for its daemon before it takes work.
        for i in 0..self.sched.cluster().nodes.len() {
            let node = &self.sched.cluster().nodes[i];
            if !known.contains(&node.name) && node.avail == NodeAvail::Up {
                let epoch = node.boot_epoch;
                self.sched.restore_node(NodeId(i as u32), epoch, NodeAvail::Unknown);
            }
            self.nodes[i].down_since = Some(now);
        }
        let (mut pending, mut running) = (0, 0);
        let mut vanished = Vec::new();
        for mut rec in loaded.jobs {
            // Slurm's `_load_job_state` (`job_mgr.c`): a job keeps the priority its state
            // file holds, and the lowest kept number that is not an operator's (one above 1)
            // is where `set_job_prio` numbers on. A record written before priorities were
            // kept has none: a held job's is 0, an operator's stays, the others are numbered
            // again below, in job id order.
            if rec.priority == crate::job::PRIO_UNSET {
                if rec.spec.held.is_some() {
                    rec.priority = 0;
                } else if rec.spec.base_priority != 0 {
                    rec.priority = rec.spec.base_priority;
                }
            } else if rec.priority > 1 && rec.spec.base_priority == 0 {
                self.lowest_prio = self.lowest_prio.min(rec.priority);
            }
            if let Some(p) = self.sched.cluster().partition_id(&rec.partition) {
                rec.spec.partition = p;
            }
            match rec.state {
                JobState::Pending => {
                    pending += 1;
                    if let Some(d) = rec.dependency.as_deref().and_then(|d| deps::parse(d).ok().flatten()) {
                        self.deps.insert(rec.id, d);
                    }
                    if !rec.is_array_meta() {
                        self.core_event(CoreEvent::Submit(rec.spec.clone()), now);
                        if rec.array_task_id.is_some() {
                            // A pending task record of its own (split off, requeued, or the
                            // array record left with its last task): the throttle decides
                            // again.
                            self.split_tasks.insert(rec.id, true);
                        }
                    }
                }
                JobState::Running | JobState::Completing
                    if rec.nodes.iter().any(|n| self.sched.cluster().node_id(n).is_none()) =>
                {
                    vanished.push(rec.id);
                }
                JobState::Running | JobState::Completing => {
                    running += 1;
                    let mut allocs = rec.allocs.clone();
                    for (a, name) in allocs.iter_mut().zip(&rec.nodes) {
                        let Some(nid) = self.sched.cluster().node_id(name) else { unreachable!("checked above") };
                        a.part.node = nid;
                        self.nodes[nid.0 as usize].jobs.insert(rec.id);
                    }
                    rec.allocs = allocs.clone();
                    let start = rec.start_time.unwrap_or(now).max(0) as u64;
                    let preempting = rec.stopping.filter(|s| s.why == StopWhy::Preempt);
                    let running = RunningJob {
                        spec: rec.spec.clone(),
                        allocs,
                        start,
                        end: rec.spec.time_limit_s.map(|l| start + l),
                        backfill_for: Vec::new(),
                        preempt_pending: preempting.is_some(),
                        stopping: rec.service.is_some() && rec.stopping.is_some(),
                        last_checkpoint: rec.last_checkpoint_ack.map(|t| t.max(0) as u64),
                        preempt_deadline: preempting.and_then(|s| s.kill_at).map(|t| t.max(0) as u64),
                        grown: rec.elastic.as_ref().map(|e| e.grown.clone()).unwrap_or_default(),
                        resized_at: rec.elastic.as_ref().and_then(|e| e.resizes.last()).map(|r| r.time.max(0) as u64),
                        // (Read at the start only, into the accounting record.)
                        reason_prev: None,
                    };
                    match rec.service {
                        Some(s) => self.sched.restore_replica(flotilla_core::sched::ServiceId(s), running),
                        None => self.sched.restore_running(running),
                    }
                }
                _ => {}
            }
            if rec.spec.id.0 != rec.id {
                self.core_map.insert(rec.spec.id.0, rec.id);
            }
            if rec.is_array_meta() {
                self.array_metas.insert(rec.id);
            }
            self.sched.hold_job_id(rec.id);
            if rec.deadline.is_some() && !rec.state.is_finished() {
                self.deadlines.insert(rec.id);
            }
            self.jobs.insert(rec.id, rec);
        }
        // Live jobs of an older record without a kept priority are numbered on below the
        // lowest kept one, in job id order.
        let unnumbered: Vec<u64> = self
            .jobs
            .values()
            .filter(|r| r.priority == crate::job::PRIO_UNSET && !r.state.is_finished())
            .map(|r| r.id)
            .collect();
        for id in unnumbered {
            self.number_job(id);
        }
        for id in vanished {
            self.node_vanished(id, now);
        }
        check_core_invariants(&self.sched);
        let ms = |d: std::time::Duration| d.as_millis() as u64;
        info!(
            next_job_id = self.next_job_id,
            pending,
            running,
            purge_ms = ms(t_load - t0),
            load_ms = ms(t_rebuild - t_load),
            rebuild_ms = ms(t_rebuild.elapsed()),
            "recovered state"
        );
        Ok(())
    }

    /// A job the store has running on a node slurm.conf no longer names (found at recovery,
    /// before the core knows the job): it ends `NODE_FAIL` and is requeued when it may be,
    /// as Slurm 22.05's `reset_job_bitmaps` does ("Invalid nodes (...) for JobId=N", then
    /// `JOB_NODE_FAIL` and a requeue of a batch job that allows it); its other nodes are told
    /// to kill it once they register (the reconciler kills what they still run).
    fn node_vanished(&mut self, id: u64, now: i64) {
        let rec = &self.jobs[&id];
        let gone: Vec<&String> = rec.nodes.iter().filter(|n| self.sched.cluster().node_id(n).is_none()).collect();
        error!(job = id, nodes = ?gone, "invalid nodes for job: no longer configured; job ends NODE_FAIL");
        let nodes = rec.nodes.clone();
        let requeue = rec.requeue && !rec.interactive && rec.service.is_none();
        self.jobs.get_mut(&id).expect("job exists").end_time = Some(now);
        self.record_run(id, JobState::NodeFail.as_str());
        self.batch.allocs.push(AllocOp::DeleteJob(id));
        for n in &nodes {
            self.send(n, CtlToNode::Kill { job_id: id });
        }
        if requeue {
            self.acct_requeued(id, now, Some("NODE_FAIL"), "REQUEUED");
            let rec = self.jobs.get_mut(&id).expect("job exists");
            reset_for_requeue(rec, false);
            self.stats.requeued += 1;
            info!(job = id, "requeued: its node is no longer configured");
            self.requeue_to_core(id, false, now);
        } else {
            let rec = self.jobs.get_mut(&id).expect("job exists");
            rec.state = JobState::NodeFail;
            rec.allocs.clear();
            self.batch.acct.insert(id);
            self.batch.steps.insert(id);
            self.stats.failed += 1;
        }
        self.dirty(id);
    }

    /// The owner loop: runs until `shutdown` turns true or every sender is gone. Each wake-up
    /// (an event, the next tick, or a debounced cycle coming due) is one [`Controller::turn`]
    /// over every event waiting (at most 8192), with the timer work its tokio timers say is
    /// [`Due`], measured after the events are handled.
    pub async fn run(mut self, mut rx: mpsc::Receiver<Event>, mut shutdown: watch::Receiver<bool>) {
        // The periods are in controller time: a scaled clock (trace replay) shortens them.
        let clock = self.opts.clock.clone();
        let (tick, sched_interval, debounce) = (clock.real(self.opts.tick), clock.real(self.opts.sched_interval), clock.real(self.opts.debounce));
        let batch_sched_delay = clock.real(self.opts.batch_sched_delay.unwrap_or_default());
        let mut next_tick = tokio::time::Instant::now();
        let mut next_cycle: Option<tokio::time::Instant> = Some(next_tick);
        let mut last_cycle = tokio::time::Instant::now() - debounce;
        // The gap before an event-triggered cycle: the debounce, or as long as the last cycle
        // took when that is longer, counted from its end, so that under a stream of events
        // (a submission storm) cycles take at most about half of the owner's time and the
        // other turns answer (Slurm's main scheduler likewise defers to `sched_min_interval`).
        let mut gap = debounce;
        let mut last_periodic = last_cycle;
        let mut events = Vec::with_capacity(1024);
        // Events that arrived during the last turn and were not queries answered between its
        // phases ([`Inbox`]): this turn handles them first, in their order, without waiting.
        let mut held = Vec::new();
        loop {
            std::mem::swap(&mut events, &mut held);
            if events.is_empty() {
                let deadline = next_cycle.map_or(next_tick, |c| c.min(next_tick));
                tokio::select! {
                    ev = rx.recv() => match ev {
                        Some(e) => events.push(e),
                        None => break,
                    },
                    _ = tokio::time::sleep_until(deadline) => {}
                    _ = shutdown.changed() => break,
                }
            } else if shutdown.has_changed().unwrap_or(true) {
                break;
            }
            while events.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(e) => events.push(e),
                    Err(_) => break,
                }
            }
            let now = clock.now();
            let started = Instant::now();
            let n_events = self.handle_all(&mut events, now);
            let inst = tokio::time::Instant::now();
            // Slurm's pacing of its scheduling pass (`CtlOptions::batch_sched_delay`): the
            // periodic cycle too waits for it, unless a job ended.
            let pace = self.cycle_pace(batch_sched_delay);
            let due = Due {
                tick: inst >= next_tick,
                periodic: inst >= last_periodic + sched_interval && inst >= last_cycle + pace,
                debounced: inst >= last_cycle + gap.max(pace),
            };
            if due.tick {
                next_tick = inst + tick;
            }
            if due.periodic {
                last_periodic = inst;
            }
            let cycled = self.finish_turn(due, n_events, now, Some(&mut Inbox { rx: &mut rx, held: &mut held }));
            if cycled {
                let end = tokio::time::Instant::now();
                gap = debounce.max(end - inst);
                last_cycle = end;
                self.record_turn_time(started);
            }
            // A change the cycle has not seen yet wakes the loop when the gap ends. While
            // commits fail, the retry waits for the next tick or event instead.
            let pace = self.cycle_pace(batch_sched_delay);
            next_cycle = (!cycled && self.sched_dirty && !self.degraded()).then(|| last_cycle + gap.max(pace));
        }
        info!("controller owner task stopped");
    }

    /// One turn of the owner loop at `now` (s since the epoch): handles `events` in order, does
    /// the timer work `due` names, runs a scheduling cycle of the core when the periodic one
    /// is due or when something changed and the debounce gap has passed, commits everything
    /// in one transaction, then sends the replies and node messages (decisions, then effects).
    /// Returns whether a scheduling cycle ran. [`Controller::run`] drives it from its timers;
    /// an in-process driver passes its own clock and `due`.
    pub fn turn(&mut self, mut events: Vec<Event>, now: i64, due: Due) -> bool {
        let started = Instant::now();
        let n = self.handle_all(&mut events, now);
        let cycled = self.finish_turn(due, n, now, None);
        if cycled {
            self.record_turn_time(started);
        }
        cycled
    }

    /// [`Controller::turn`] with the events that arrive while it runs in `inbox.rx`: between
    /// the turn's phases the read-only job, node and partition queries among them are
    /// answered ([`Inbox`]) and the others are appended to `inbox.held`, which the caller
    /// hands to the next turn first. [`Controller::run`] does this with its channel.
    pub fn turn_answering(&mut self, mut events: Vec<Event>, inbox: &mut Inbox<'_>, now: i64, due: Due) -> bool {
        let started = Instant::now();
        let n = self.handle_all(&mut events, now);
        let cycled = self.finish_turn(due, n, now, Some(inbox));
        if cycled {
            self.record_turn_time(started);
        }
        cycled
    }

    /// Between two phases of a turn: takes the events waiting in `inbox` (up to the batch
    /// limit of held ones), answers the read-only job, node and partition queries among them
    /// at once ([`answers_between_phases`]) and holds the rest, in order, for the next turn.
    /// A query so answered reads the state as the turn has left it so far: every change
    /// whose reply was sent (after an earlier commit) and this turn's own, which it shows
    /// before their commit as an answer at the end of the events' phase always did; a held
    /// change has had no reply yet, so nobody can have seen it.
    fn answer_waiting(&mut self, inbox: &mut Inbox<'_>, now: i64) {
        while inbox.held.len() < MAX_BATCH {
            let Ok(e) = inbox.rx.try_recv() else { break };
            if answers_between_phases(&e) {
                self.handle(e, now);
            } else {
                inbox.held.push(e);
            }
        }
        self.send_answers();
    }

    /// Keeps the duration of a turn that ran a cycle (`Request::QueryTurnTimes`).
    fn record_turn_time(&mut self, started: Instant) {
        if self.turn_times.len() == super::TURN_TIMES_KEPT {
            self.turn_times.pop_front();
        }
        self.turn_times.push_back(started.elapsed().as_micros() as u64);
    }

    /// Turns completed since the controller started (each commits at most one transaction).
    pub fn turns(&self) -> u64 {
        self.turns
    }

    /// Handles and drains `events`; returns how many there were.
    fn handle_all(&mut self, events: &mut Vec<Event>, now: i64) -> u64 {
        let n = events.len() as u64;
        for e in events.drain(..) {
            self.handle(e, now);
        }
        n
    }

    /// The rest of a turn after its events: timer work, the cycle, the commit and its effects.
    /// With an `inbox`, the queries that arrived meanwhile are answered after the timer work
    /// and after the cycle ([`Controller::answer_waiting`]), not after the commit.
    fn finish_turn(&mut self, due: Due, n_events: u64, now: i64, mut inbox: Option<&mut Inbox<'_>>) -> bool {
        // Query answers (`squeue`, `sinfo`, `scontrol show`) were made as their events were
        // handled and wait for no commit: they leave now, not after this turn's cycle and
        // commit (at 10,000 nodes and 100,000 pending jobs a cycle takes hundreds of ms).
        self.send_answers();
        if due.tick {
            self.tick(now);
        }
        if due.periodic {
            self.sched_dirty = true;
        }
        // While commits fail nothing new is bound (`durability`).
        let cycle = (due.periodic || (self.sched_dirty && due.debounced)) && !self.degraded();
        if cycle {
            // A query that came during the events or the timer work does not wait for the cycle.
            if let Some(inbox) = inbox.as_deref_mut() {
                self.answer_waiting(inbox, now);
            }
            self.schedule(now);
            self.persist_usage(now);
            // Nor one that came during the cycle for the commit. An array whose last pending
            // task the cycle started becomes that task's record first, as the commit would
            // write it (`flush` settles again: nothing is left then), so that no answer
            // shows the array between the two.
            if let Some(inbox) = inbox {
                self.settle_last_tasks(now);
                self.answer_waiting(inbox, now);
            }
        }
        self.flush(n_events, now);
        match self.store.renew_lease_if_due() {
            Ok(()) => {}
            Err(e) if e.may_recover() => warn!("cannot renew the leader lease: {e}"),
            Err(e) => super::step_down(&e),
        }
        self.turns += 1;
        cycle
    }

    /// The timer work at `now`: time limits and kill escalation of running jobs, silent node
    /// daemons, finished jobs past `MinJobAge`.
    fn tick(&mut self, now: i64) {
        self.tick_jobs(now);
        self.tick_shrinks(now);
        self.tick_nodes(now);
        self.purge_finished(now);
        self.expire_ended_steps(now);
    }

    /// Running jobs at `now`: past the time limit, SIGTERM (`TIMEOUT`); stopping and past
    /// `KillWait` (or the core's preemption deadline), SIGKILL; `--signal=SIG@T` due, the
    /// signal to the steps.
    fn tick_jobs(&mut self, now: i64) {
        let mut to_stop = Vec::new();
        let mut to_kill = Vec::new();
        let mut to_warn = Vec::new();
        for rec in self.jobs.values() {
            if rec.state != JobState::Running {
                continue;
            }
            match rec.stopping {
                Some(s) => {
                    if !s.kill_sent && now >= s.kill_at.unwrap_or(s.term_at + self.opts.kill_wait_s) {
                        to_kill.push(rec.id);
                    }
                }
                None => {
                    if let (Some(st), Some(l)) = (rec.start_time, rec.time_limit_min) {
                        let end = st + i64::from(l) * self.opts.minute_s;
                        if now >= end {
                            to_stop.push(rec.id);
                        } else if let Some(w) = rec.signal.as_ref().filter(|w| !w.batch_only && !rec.warn_sent) {
                            // `--signal=SIG@T` without `B:` goes to the job's steps, from the
                            // controller (Slurm's slurmctld sends it to the steps only; `B:` is
                            // the batch host's supervisor's).
                            if now >= end - i64::from(w.secs_before) {
                                to_warn.push((rec.id, w.signal));
                            }
                        }
                    }
                }
            }
        }
        for (id, signal) in to_warn {
            let rec = self.jobs.get_mut(&id).expect("job exists");
            rec.warn_sent = true;
            let nodes = rec.nodes.clone();
            self.dirty(id);
            for n in nodes {
                self.send(&n, CtlToNode::SignalSteps { job_id: id, signal });
            }
        }
        for id in to_stop {
            self.start_stop(id, StopWhy::Timeout, now);
        }
        for id in to_kill {
            let rec = self.jobs.get_mut(&id).expect("job exists");
            if let Some(s) = rec.stopping.as_mut() {
                s.kill_sent = true;
            }
            let nodes = rec.nodes.clone();
            self.dirty(id);
            for n in nodes {
                self.send(&n, CtlToNode::Kill { job_id: id });
            }
            if self.jobs[&id].interactive {
                // No batch script reports an end: the allocation ends with the kill.
                let admin = Ident { uid: 0, gid: 0, admin: true };
                let release = flotilla_proto::step::ReleaseAllocation { job_id: id, exit_code: 0, signal: 9 };
                self.release_allocation(admin, release, now);
            }
        }
    }

    /// A node daemon disconnected for `SlurmdTimeout` is marked down (`Not responding`); the
    /// core requeues what ran there.
    fn tick_nodes(&mut self, now: i64) {
        for i in 0..self.nodes.len() {
            let rt = &self.nodes[i];
            let silent = rt.sess.is_none() && rt.down_since.is_some_and(|d| now - d >= self.opts.slurmd_timeout_s);
            let nid = NodeId(i as u32);
            if silent && !rt.marked_down && self.sched.cluster().node(nid).avail == NodeAvail::Up {
                self.nodes[i].marked_down = true;
                warn!(node = %self.sched.cluster().node(nid).name, "node not responding: marked down");
                let ds = self.sched.handle(
                    CoreEvent::NodeAvail {
                        node: nid,
                        avail: NodeAvail::Down {
                            reason: "Not responding".into(),
                        },
                    },
                    now as u64,
                );
                self.apply(ds, now);
                self.reason_set(nid, None, now);
                self.save_node(nid);
            }
        }
    }

    /// Forgets finished jobs that ended more than `MinJobAge` ago, in memory and in the store
    /// with their script and environment (Slurm's `purge_old_job` and its script purge);
    /// their accounting stays.
    fn purge_finished(&mut self, now: i64) {
        let cutoff = now - self.opts.min_job_age_s;
        // A job whose records this turn still writes (finalized in this turn: a multi-node
        // job whose last node confirmed its end more than MinJobAge after the batch script
        // ended) is purged at the next tick, once its accounting record is committed.
        let old: Vec<u64> = self
            .jobs
            .values()
            .filter(|r| r.state.is_finished() && r.end_time.is_some_and(|e| e < cutoff))
            .filter(|r| !self.batch.acct.contains(&r.id) && !self.batch.steps.contains(&r.id))
            .map(|r| r.id)
            .collect();
        for id in old {
            if let Some(r) = self.jobs.remove(&id) {
                self.submit_charges.mark(id);
                self.sched.free_job_id(id);
                self.core_map.remove(&r.spec.id.0);
                self.batch.purged.push((id, r.array_job_id.unwrap_or(id)));
            }
            self.deps.remove(&id);
        }
    }

    /// How long after the last cycle the next may run besides the debounce gap: `delay`
    /// ([`super::CtlOptions::batch_sched_delay`], in real time), or nothing after a job's end
    /// or an interactive allocation's request.
    fn cycle_pace(&self, delay: std::time::Duration) -> std::time::Duration {
        if self.cycle_unpaced {
            std::time::Duration::ZERO
        } else {
            delay
        }
    }

    fn schedule(&mut self, now: i64) {
        self.cycle_unpaced = false;
        self.sched_dirty = false;
        self.reason_until_cycle.clear();
        self.end_missed_deadlines(now);
        self.refresh_arrays(now);
        self.refresh_deps(now);
        let queue = self.sched.pending_len() as u64;
        let t = Instant::now();
        let ds = self.sched.cycle(now as u64);
        self.last_cycle_at = now;
        self.update.cycled(now);
        let us = t.elapsed().as_micros() as u64;
        self.diag.cycle(us, queue, self.sched.reservations().len() as u64, now);
        self.stats.cycles += 1;
        self.stats.last_cycle_us = us;
        self.stats.cycle_us_total += us;
        self.stats.max_cycle_us = self.stats.max_cycle_us.max(us);
        self.stats.cycle_hist.observe_us(us);
        self.apply(ds, now);
        if self.opts.check_invariants {
            check_core_invariants(&self.sched);
        }
    }

    /// Feeds the core an event that happened at `now` and carries out the decisions it
    /// forces through [`Controller::apply`].
    pub(super) fn core_event(&mut self, event: CoreEvent, now: i64) {
        let d = self.sched.handle(event, now as u64);
        self.apply(d, now);
    }

    /// The controller's one path for the core's decisions (of a cycle or of an event).
    pub(super) fn apply(&mut self, decisions: Vec<Decision>, now: i64) {
        self.diag.decisions(&decisions);
        for d in decisions {
            match d {
                Decision::Bind { job, allocs, .. } => self.bind_job(job.0, allocs, now),
                Decision::Reserve { .. } | Decision::ReleaseReservation { .. } => {}
                Decision::PreemptBackfill { job, for_job } => {
                    if let Some(id) = self.job_of_core(job.0) {
                        if self.jobs[&id].stopping.is_none() && self.jobs[&id].state == JobState::Running {
                            info!(job = id, for_job = for_job.0, "preempting backfill job for a completed reservation");
                            self.start_stop(id, StopWhy::Preempt, now);
                        }
                    }
                }
                Decision::Preempt { job, for_job, deadline, .. } => self.preempt(job.0, for_job.0, deadline, now),
                Decision::Requeue { job, reason } => self.core_requeued(job.0, &reason, now),
                d @ (Decision::Alert { .. } | Decision::Page(_)) => self.raise_alert(&d, now),
                Decision::BindReplica { service, replica, allocs } => self.bind_replica(service, replica, allocs, now),
                Decision::StopReplica { replica, .. } => self.stop_replica(replica, now),
                Decision::Relocate { service, from, to, allocs, .. } => {
                    // Start the new replica, then drain the old one.
                    self.bind_replica(service, to, allocs, now);
                    self.stop_replica(from, now);
                }
                Decision::Grow { job, allocs } => self.grow_job(job.0, allocs, now),
                Decision::Shrink { job, allocs, deadline, .. } => self.shrink_job(job.0, &allocs, deadline, now),
                Decision::MembersLost { job, allocs, reason } => self.members_lost(job.0, &allocs, &reason, now),
            }
        }
    }

    pub(super) fn job_of_core(&self, core: u64) -> Option<u64> {
        if let Some(&id) = self.core_map.get(&core) {
            return Some(id);
        }
        (core & PROV == 0 && self.jobs.contains_key(&core)).then_some(core)
    }

    pub(super) fn bind_job(&mut self, core: u64, allocs: Vec<Allocation>, now: i64) {
        let id = match self.job_of_core(core) {
            Some(id) => id,
            None => match prov_decode(core) {
                Some((aid, task)) => self.start_array_task(aid, task, core),
                None => panic!("the core bound job {core}, which the controller does not know"),
            },
        };
        let names: Vec<String> = allocs.iter().map(|a| self.sched.cluster().node(a.part.node).name.clone()).collect();
        for (a, n) in allocs.iter().zip(&names) {
            self.batch.allocs.push(AllocOp::Insert {
                job_id: id,
                node: n.clone(),
                alloc: a.clone(),
            });
            let i = a.part.node.0 as usize;
            self.nodes[i].jobs.insert(id);
            self.node_out.push((i, Outgoing::Bind(id)));
        }
        let cores = self.pick_cores(id, &allocs, &names);
        let reason_prev = self.sched.running().get(&JobId(core)).and_then(|r| r.reason_prev);
        let rec = self.jobs.get_mut(&id).expect("job exists");
        rec.cores = cores;
        // What the accounting record gets with the job's start (Slurm's `job_start` sends
        // `state_reason_prev_db`): `sacct -o Reason`.
        rec.acct.reason_prev = reason_prev;
        info!(job = id, nodes = %compress_sorted(&names), "job started");
        let eligible = rec.submit_time.max(rec.spec.begin_time.map_or(0, |b| b as i64));
        let gpus: u64 = allocs.iter().map(|a| u64::from(a.part.gpus.count())).sum();
        self.stats.queue_wait.observe(gpus, (now - eligible).max(0) as u64);
        rec.state = JobState::Running;
        rec.start_time = Some(now);
        rec.end_time = None;
        if let Some(d) = rec.deadline {
            let part = &self.sched.cluster().partitions[rec.spec.partition.0 as usize];
            rec.time_limit_min = crate::admission::limit_at_start(d, rec.time_limit_min, part, now, self.opts.minute_s);
        }
        whole_node_tres(rec, &allocs);
        rec.set_start_nodes(allocs.len() as u32);
        rec.allocs = allocs;
        rec.nodes = names;
        rec.stopping = None;
        rec.end_state = None;
        rec.exit_code = 0;
        rec.exit_signal = 0;
        rec.reason = None;
        crate::acct::on_start(rec, now);
        self.deps.remove(&id);
        self.dirty(id);
        self.batch.acct.insert(id);
        self.batch.steps.insert(id);
        self.stats.started += 1;
    }

    /// The cores job `id` gets on each node of `allocs` (named `names`), as Slurm's
    /// select/cons_tres picks them ([`flotilla_core::cores::pick_cores`], after
    /// `_cyclic_sync_core_bitmap`): the CPUs the scheduling core gave it there, among the
    /// cores the node's other jobs do not hold; every core for an `--exclusive` job.
    fn pick_cores(&self, id: u64, allocs: &[Allocation], names: &[String]) -> BTreeMap<String, Vec<u32>> {
        let Some(rec) = self.jobs.get(&id) else { return BTreeMap::new() };
        allocs
            .iter()
            .zip(names)
            .map(|(a, n)| {
                let layout = self.core_layout(n, a.part.node);
                let used: Vec<u32> = self.nodes[a.part.node.0 as usize]
                    .jobs
                    .iter()
                    .filter(|&&j| j != id)
                    .filter_map(|j| self.jobs.get(j)?.cores.get(n))
                    .flatten()
                    .copied()
                    .collect();
                let cpus = u32::try_from(a.part.cpu_milli.div_ceil(1000)).unwrap_or(u32::MAX);
                (n.clone(), flotilla_core::cores::pick_cores(layout, &used, cpus, rec.cpus_per_task, rec.exclusive))
            })
            .collect()
    }

    /// Node `name`'s sockets, cores and threads (slurm.conf), or one socket of its CPUs.
    pub(super) fn core_layout(&self, name: &str, node: NodeId) -> flotilla_core::cores::CoreLayout {
        match self.opts.core_layouts.get(name) {
            Some(l) => *l,
            None => {
                let cpus = self.sched.cluster().node(node).cpu_milli / 1000;
                flotilla_core::cores::CoreLayout::flat(u32::try_from(cpus).unwrap_or(u32::MAX))
            }
        }
    }

    fn core_requeued(&mut self, core: u64, reason: &RequeueReason, now: i64) {
        let Some(id) = self.job_of_core(core) else { return };
        let rec = self.jobs.get_mut(&id).expect("job exists");
        let nodes = rec.nodes.clone();
        let _span = info_span!("job", job = id).entered();
        info!(?reason, requeue = rec.requeue, "node lost: job requeued by the core");
        rec.end_time = Some(now);
        self.record_run(id, JobState::NodeFail.as_str());
        self.batch.allocs.push(AllocOp::DeleteJob(id));
        for n in &nodes {
            if let Some(nid) = self.sched.cluster().node_id(n) {
                self.nodes[nid.0 as usize].jobs.remove(&id);
            }
            self.send(n, CtlToNode::Kill { job_id: id });
        }
        if self.jobs[&id].requeue {
            self.acct_requeued(id, now, Some("NODE_FAIL"), "REQUEUED");
        }
        let rec = self.jobs.get_mut(&id).expect("job exists");
        if rec.requeue {
            reset_for_requeue(rec, false);
            self.stats.requeued += 1;
            // The core keeps it pending; an array task waits for its throttle.
            self.requeue_to_core(id, true, now);
        } else {
            rec.state = JobState::NodeFail;
            rec.end_time = Some(now);
            rec.allocs.clear();
            self.core_event(CoreEvent::Cancel(JobId(core)), now);
            self.batch.acct.insert(id);
            self.batch.steps.insert(id);
            self.stats.failed += 1;
        }
        self.dirty(id);
        self.sched_dirty = true;
    }

    fn bind_msg(&self, job_id: u64, nid: usize) -> Option<Bind> {
        let rec = self.jobs.get(&job_id)?;
        if rec.state != JobState::Running {
            return None;
        }
        let name = &self.sched.cluster().nodes[nid].name;
        let pos = rec.nodes.iter().position(|n| n == name)?;
        let a = &rec.allocs[pos];
        let key = rec.array_job_id.unwrap_or(rec.id);
        let (script, env) = match self.store.script(key) {
            Ok(Some(s)) => s,
            Ok(None) => (String::new(), "[]".into()),
            Err(e) => panic!("cannot read job script: {e}"),
        };
        Some(Bind {
            job_id,
            run: rec.restarts,
            array: rec.array_job_id.zip(rec.array_task_id),
            name: rec.name.clone(),
            gpu_mask: a.part.gpus.0,
            cpus: (a.part.cpu_milli / 1000) as u32,
            mem_mib: a.part.mem_mib,
            batch_host: pos == 0,
            nodes: compress_sorted(&rec.nodes),
            uid: rec.uid,
            gid: rec.gid,
            user: rec.user.clone(),
            script,
            argv: rec.argv.clone(),
            environment: elastic_env(serde_json::from_str(&env).unwrap_or_default(), rec.spec.elastic.as_ref()),
            work_dir: rec.work_dir.clone(),
            stdout: rec.stdout.clone(),
            stderr: rec.stderr.clone(),
            time_limit_s: rec.spec.time_limit_s,
            partition: rec.partition.clone(),
        })
    }

    fn launch_details(&self, job_id: u64) -> LaunchDetails {
        let rec = &self.jobs[&job_id];
        LaunchDetails {
            account: rec.account.clone(),
            qos: rec.qos.clone(),
            submit_host: rec.submit_host.clone(),
            cpus_per_node: rec.allocs.iter().map(|a| (a.part.cpu_milli / 1000) as u32).collect(),
            cpus_per_task: rec.cpus_per_task.max(1),
            mem_per_cpu_mib: rec.mem_per_cpu_mib,
            mem_per_node_mib: rec.mem_per_node_mib,
            array_tasks: rec.array_tasks,
            signal: rec.signal.clone(),
            interactive: rec.interactive,
            ntasks: if rec.ntasks_given { rec.ntasks } else { 0 },
        }
    }

    /// Sends the answers made so far (queries, and refusals that need no commit).
    fn send_answers(&mut self) {
        for (tx, r) in self.answers.drain(..) {
            let _ = tx.send(r);
        }
    }

    /// Commits the batch, then sends replies and node messages (decisions, then effects).
    fn flush(&mut self, events: u64, now: i64) {
        self.settle_last_tasks(now);
        self.sync_job_ids();
        let dirty: Vec<u64> = self.batch.jobs.iter().copied().collect();
        let throttled = if dirty.iter().any(|id| self.jobs.get(id).is_some_and(|r| r.state == JobState::Pending && r.array_job_id.is_some())) {
            self.throttled_arrays()
        } else {
            Default::default()
        };
        for &id in &dirty {
            // After every change of the turn: the record's key as it is now.
            self.index_prio(id);
        }
        self.trim_prio_index();
        self.submit_charges.settle(&self.jobs);
        for id in dirty {
            let Some(r) = self.jobs.get_mut(&id) else { continue };
            // A pending record of an array its `ArrayTaskThrottle` holds out is written with
            // no eligible time: Slurm's `as_mysql_job_start` gives a job whose reason is
            // `WAIT_ARRAY_TASK_LIMIT` the eligible time INFINITE, which no `sacct` time
            // window selects (golden 0282: no row for array 64's last pending task). It gets
            // one again when it is written while the throttle has room, or at its start.
            let held_out = r.state == JobState::Pending
                && super::arrays::may_start(r, now)
                && r.array_job_id.is_some_and(|a| throttled.contains(&a));
            let rewrite = if held_out {
                r.acct.eligible_time.take().is_some()
            } else {
                crate::acct::refresh_eligible(r, now)
            };
            // An array's pending remainder is accounted as `A_[tasks]`: rewritten as tasks
            // start or are cancelled.
            if rewrite || r.is_array_meta() {
                self.batch.acct.insert(id);
            }
        }
        self.update.committing(&self.batch, now);
        let batch = std::mem::take(&mut self.batch);
        let mut committed = true;
        let batch_empty = batch.is_empty();
        if !batch_empty {
            let t = Instant::now();
            let jobs = &self.jobs;
            match self.store.commit(&batch, &|id| jobs.get(&id)) {
                Ok(()) => {
                    self.stats.commits += 1;
                    self.stats.commit_us_total += t.elapsed().as_micros() as u64;
                    self.stats.batch_events_total += events;
                }
                Err(e) => {
                    // A full disk or an I/O error: hold this turn's effects, retry next turn
                    // (`durability`); anything else fails stop inside.
                    self.commit_failed(batch, e, now);
                    committed = false;
                }
            }
        }
        if committed {
            self.commit_succeeded();
            for (tx, r) in self.replies.drain(..) {
                let _ = tx.send(r);
            }
            self.run_alert_programs();
        }
        self.send_answers();
        for (q, tx) in std::mem::take(&mut self.acct_queries) {
            let r = match crate::acct::query(self.store.db(), &q) {
                Ok(jobs) => Response::Acct(jobs),
                Err(e) => {
                    error!("accounting query failed: {e}");
                    Response::Error(SlurmError::new(ESLURM_INTERNAL))
                }
            };
            let _ = tx.send(r.into());
        }
        if committed && batch_empty && !self.node_out.is_empty() {
            // Nothing was committed this turn, so no fence checked the lease: a controller
            // that lost it must not reach a node (the nodes refuse an older epoch as well).
            match self.store.check_lease() {
                Ok(()) => {}
                Err(e) if e.may_recover() => {
                    warn!("cannot check the leader lease before sending to nodes: {e}; held for the next turn");
                    return;
                }
                Err(e) => super::step_down(&e),
            }
        }
        let out = std::mem::take(&mut self.node_out);
        for (nid, o) in out {
            if self.nodes[nid].sess.is_none() {
                continue;
            }
            let msg = match o {
                Outgoing::Msg(m) => m,
                Outgoing::Bind(id) => match self.bind_msg(id, nid) {
                    Some(b) => CtlToNode::Launch {
                        bind: Box::new(b),
                        details: Box::new(self.launch_details(id)),
                    },
                    None => continue,
                },
            };
            if let Some(s) = &self.nodes[nid].sess {
                let _ = s.tx.send(msg);
            }
        }
    }
}

/// An elastic job's environment gets its range as torchrun's `--nnodes=MIN:MAX` takes it:
/// `FLOTILLA_ELASTIC_NNODES=2:4` (or `FLOTILLA_ELASTIC_NGPUS=` for a GPU-granular job); the
/// batch host's daemon then adds `FLOTILLA_RDZV_ENDPOINT` and `FLOTILLA_NODES_FILE`. A rigid
/// job's environment is left as it was submitted.
fn elastic_env(mut env: Vec<(String, String)>, e: Option<&flotilla_core::job::Elastic>) -> Vec<(String, String)> {
    if let Some(e) = e {
        let key = match e.unit {
            flotilla_core::job::ElasticUnit::Nodes => "FLOTILLA_ELASTIC_NNODES",
            flotilla_core::job::ElasticUnit::Gpus => "FLOTILLA_ELASTIC_NGPUS",
        };
        env.retain(|(k, _)| k != "FLOTILLA_ELASTIC_NNODES" && k != "FLOTILLA_ELASTIC_NGPUS");
        env.push((key.to_string(), format!("{}:{}", e.min, e.max)));
    }
    env
}

/// What an `--exclusive` job holds as Slurm's `select/cons_tres` allocates a whole node
/// (22.05 `job_test` with `whole_node`, shown in `TRES=`, `AllocTRES` and `scontrol show job
/// -d`'s `Mem=`): every GPU of its nodes (`gres/gpu=8` even for `--gres=gpu:2`) and, when its
/// memory is per CPU (`--mem-per-cpu` or `DefMemPerCPU`), that per CPU of every CPU it got
/// (64 CPUs x 1024 MiB = `mem=64G`). The core's allocation is already the whole node.
fn whole_node_tres(rec: &mut JobRecord, allocs: &[Allocation]) {
    if !rec.exclusive || allocs.is_empty() {
        return;
    }
    rec.gpus = allocs.iter().map(|a| a.part.gpus.count()).sum();
    if let Some(per_cpu) = rec.mem_per_cpu_mib {
        let cpus = allocs.iter().map(|a| a.part.cpu_milli / 1000).max().unwrap_or(0);
        rec.mem_per_node_mib = per_cpu * cpus;
    }
}
