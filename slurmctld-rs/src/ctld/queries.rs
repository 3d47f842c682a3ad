//! Read-only answers: job views (`squeue`, `scontrol show job`) borrowed from the records,
//! node and partition queries, and the controller's statistics (`sdiag`).

use super::{prov_id, Controller, Ident, Reply};
use crate::job::{JobRecord, JobState};
use flotilla_core::cluster::{GpuMask, NodeAvail};
use flotilla_core::hostlist::compress_sorted;
use flotilla_core::job::{HoldKind, JobId};
use flotilla_core::sched::{PendingInfo, Reason, Scheduler};
use flotilla_proto::errno::*;
use flotilla_proto::{
    FieldSet, JobFilter, JobQuery, JobRef, JobView, NodeInfo, NodeQuery, PartitionInfo, Response, SlurmError, Stats, Str,
    TimeLimitWire,
};
use std::sync::atomic::Ordering;
use tracing::error;

impl Controller {
    /// What a pending job shows as waiting for, at `now`: the core's reason (with Slurm's
    /// detail, `ReqNodeNotAvail, UnavailableNodes:gpu04`), its expected start and planned
    /// nodes and its priority; before a cycle has evaluated it, the reasons known without
    /// one (`Dependency`, `BeginTime`); the reason of a submission's test, or `None` after a
    /// release or an update, until the next cycle ([`Controller::reason_until_cycle`]); a hold
    /// at once, as in Slurm; and a reason the record
    /// carries (a requeue's hold, `DependencyNeverSatisfied`) over all of them. A job that is
    /// not pending shows `None` and nothing else.
    fn pending_shown<'a>(&'a self, rec: &'a JobRecord, want: FieldSet, now: i64, ctx: &mut ViewCtx<'a>) -> PendingShown<'a> {
        use flotilla_proto::JobField as F;
        let mut p = PendingShown {
            reason: Str::b("None"),
            detail: None,
            expected: None,
            sched_nodes: Str::default(),
            priority: 0,
        };
        let pending_fields = [F::Reason, F::ReasonDetail, F::SchedNodes, F::Priority, F::StartTime, F::EndTime];
        if rec.state == JobState::Pending && want.any(&pending_fields) {
            let state = if rec.is_array_meta() {
                let first = self.in_core_tasks.get(&rec.id).and_then(|s| s.iter().next());
                first.and_then(|&t| self.sched.pending_state(JobId(prov_id(rec.id, t))))
            } else {
                ctx.pending_state(rec.spec.id)
            };
            match state {
                Some((info, prio)) => {
                    p.reason = match &info.slurm_detail {
                        // Slurm's `ReqNodeNotAvail, UnavailableNodes:gpu04`.
                        Some(d) if !d.is_empty() => Str::from(format!("{}, {d}", info.reason.as_str())),
                        _ => Str::b(info.reason.as_str()),
                    };
                    p.detail = info.detail.as_deref().map(Str::b);
                    p.expected = info.expected_start.filter(|&t| t != u64::MAX).map(|t| t as i64);
                    let mut planned = &info.sched_nodes;
                    // Shown as Slurm's backfill plans it (`refresh_start_plan`).
                    if let Some(plan) = self.start_plan.get(&rec.id).filter(|_| info.expected_start.is_some()) {
                        p.expected = Some(plan.start as i64);
                        planned = &plan.nodes;
                    }
                    if !planned.is_empty() && want.has(F::SchedNodes) {
                        let names: Vec<String> = planned.iter().map(|n| self.sched.cluster().node(*n).name.clone()).collect();
                        p.sched_nodes = Str::from(compress_sorted(&names));
                    }
                    p.priority = prio;
                    // A hold the last cycle saw but since released: Slurm shows no reason
                    // until its next pass (`_release_job_rec`: `WAIT_NO_REASON`).
                    if rec.spec.held.is_none() && matches!(info.reason.as_str(), "JobHeldUser" | "JobHeldAdmin") {
                        p.reason = Str::b("None");
                        p.detail = None;
                    }
                }
                // A task record out of the core waits for the throttle, or for what the
                // lines below show (a hold, a dependency, a begin time).
                None if rec.is_array_meta() || !self.in_core(rec.id) && super::arrays::may_start(rec, now) => {
                    p.reason = Str::b("JobArrayTaskLimit")
                }
                None => {}
            }
        }
        let unevaluated = if rec.state == JobState::Pending { self.reason_until_cycle.get(&rec.id) } else { None };
        if let Some(r) = unevaluated {
            // Submitted, released or updated since the last cycle (`reason_until_cycle`).
            p.reason = Str::b(r);
            p.detail = None;
        }
        if rec.state == JobState::Pending && unevaluated.is_none() && p.reason == "None" && want.has(F::Reason) {
            // Not evaluated by a cycle yet: the reasons known without one (a hold is below).
            if rec.spec.dependency_pending {
                p.reason = Str::b("Dependency");
            } else if rec.spec.begin_time.is_some_and(|b| b as i64 > now) {
                p.reason = Str::b("BeginTime");
            } else if let Some(r) = Reason::of_partition(self.sched.cluster().partitions[rec.spec.partition.0 as usize].state) {
                // Slurm sets it at submission (`PartitionDown` at once, goldens-extra 1031).
                p.reason = Str::b(r.as_str());
            }
        }
        if matches!(rec.state, JobState::Pending | JobState::Running) {
            // A hold shows at once, as in Slurm, not after the next scheduling cycle; a
            // running job held shows it while it runs (`_update_job` sets `state_reason`).
            match rec.spec.held {
                Some(HoldKind::User) => p.reason = Str::b("JobHeldUser"),
                Some(HoldKind::Admin) => p.reason = Str::b("JobHeldAdmin"),
                None => {}
            }
        }
        if let Some(r) = &rec.reason {
            p.reason = Str::b(r);
        }
        p
    }

    /// Makes Slurm's backfill plan of the pending records again if a cycle ran since it was
    /// last made: the records whose jobs the core expects to start (it holds a reservation
    /// for them), in Slurm's queue order (priority, then submit time and id), each planned
    /// once, a job array's pending record once per task as Slurm's backfill plans it (up to
    /// `bf_max_job_array_resv` and its pending task count while fewer tasks than its
    /// `ArrayTaskThrottle` run: `_attempt_backfill`'s `next_task`), at the last cycle's time,
    /// until `bf_max_job_test` jobs were tested (a record after them shows the core's own
    /// expected start, as one the plan finds no start for).
    /// The core's own reservations still decide what starts when; this is what queries show
    /// as the records' expected start and `SchedNodeList` (`Scheduler::backfill_plan`).
    pub(super) fn refresh_start_plan(&mut self) {
        if self.start_plan_cycle == Some(self.stats.cycles) {
            return;
        }
        self.start_plan_cycle = Some(self.stats.cycles);
        self.start_plan.clear();
        let basic = self.sched.priority_name() == "priority/basic";
        // (queue order: priority, submit time, record; the core's job), one per record.
        let mut queued: Vec<(std::cmp::Reverse<u64>, u64, u64, JobId)> = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for (core, info, prio) in self.sched.pending_states() {
            if info.expected_start.is_none() {
                continue;
            }
            let Some(id) = super::prov_decode(core.0).map(|(aid, _)| aid).or_else(|| self.job_of_core(core.0)) else { continue };
            let Some(rec) = self.jobs.get(&id) else { continue };
            if !seen.insert(id) {
                continue;
            }
            // Slurm's queue order (`sort_job_queue2`): priority (the record's number under
            // priority/basic, as squeue shows it), then submit time and id.
            let prio = if basic { u64::from(rec.priority) } else { prio };
            queued.push((std::cmp::Reverse(prio), rec.submit_time.max(0) as u64, id, core));
        }
        if queued.is_empty() {
            return;
        }
        queued.sort_unstable();
        // One pass over the jobs for every array's throttle, only when an array is planned.
        let throttled = if queued.iter().any(|q| self.jobs[&q.2].is_array_meta()) { self.throttled_arrays() } else { Default::default() };
        let mut units = Vec::new();
        let mut recs = Vec::new();
        for (_, _, id, core) in queued {
            let rec = &self.jobs[&id];
            let times = if rec.is_array_meta() {
                if throttled.contains(&id) {
                    1
                } else {
                    (rec.array_pending.len() as u32).clamp(1, flotilla_core::sched::BF_MAX_JOB_ARRAY_RESV)
                }
            } else {
                1
            };
            units.push((core, times));
            recs.push(id);
        }
        let plan = self.sched.backfill_plan(&units, self.last_cycle_at.max(0) as u64, self.opts.bf_max_job_test);
        for (id, p) in recs.into_iter().zip(plan) {
            if let Some(p) = p {
                self.start_plan.insert(id, p);
            }
        }
    }

    /// A job as queries show it at `now`, borrowing from its record and the scheduler:
    /// `squeue` over 10,000 jobs encodes views without cloning a string of theirs. Only the
    /// fields in `want` are filled (the others default): the rest of the record is not even
    /// read, and a record is a kilobyte of memory that is rarely in cache.
    pub(super) fn job_view<'a>(&'a self, rec: &'a JobRecord, want: FieldSet, now: i64) -> JobView<'a> {
        let mut v = JobView::default();
        self.fill_view(&mut v, rec, want, now, &mut ViewCtx::one(&self.sched));
        v
    }

    /// [`Controller::job_view`] into `v`, which the caller keeps for every job of an answer:
    /// only the fields in `want` are written, so a view that only ever receives those keeps
    /// the others default (a view is a kilobyte; building, moving and dropping one per job
    /// was a visible part of `squeue` over 150,000 jobs). `ctx` is the answer's.
    pub(super) fn fill_view<'a>(&'a self, v: &mut JobView<'a>, rec: &'a JobRecord, want: FieldSet, now: i64, ctx: &mut ViewCtx<'a>) {
        use flotilla_proto::JobField as F;
        // `v.field = value` for each field in `want`; the others are not touched.
        macro_rules! set {
            ($($field:ident: $f:ident = $e:expr;)*) => {
                $(if want.has(F::$f) {
                    v.$field = $e;
                })*
            };
        }
        let PendingShown {
            reason,
            detail,
            expected,
            sched_nodes,
            priority,
        } = self.pending_shown(rec, want, now, ctx);
        // Under priority/basic (Slurm's default) every job shows its number, running and held
        // ones too; other policies show what the last cycle ranked.
        let priority = if ctx.basic_priority {
            if rec.priority == crate::job::PRIO_UNSET { 0 } else { u64::from(rec.priority) }
        } else {
            priority
        };
        // A pending job shows when it is expected to start; without an estimate, its begin
        // time (`--begin`, a requeue's hold-off), as Slurm sets `start_time` to it. Either
        // way the end shown is that start plus the time limit. A job that ended without
        // starting (cancelled while pending, past its deadline) started when it ended, as
        // Slurm sets `start_time` then (`job_mgr.c` `_job_signal`, `deadline_ok`).
        let shown_start = rec.start_time.or(expected).or_else(|| match rec.state {
            JobState::Pending => rec.spec.begin_time.map(|b| b as i64),
            s if s.is_finished() => rec.end_time,
            _ => None,
        });
        if want.has(F::NumCpus) {
            v.num_cpus = if rec.allocs.is_empty() {
                rec.requested_cpus()
            } else {
                rec.allocs.iter().map(|a| (a.part.cpu_milli / 1000) as u32).sum()
            };
        }
        set! {
            job_id: JobId = rec.id;
            array_job_id: ArrayJobId = rec.array_job_id;
            array_task_id: ArrayTaskId = if rec.is_array_meta() { None } else { rec.array_task_id };
            array_task_str: ArrayTaskStr = rec.array_task_str().map(Str::from);
            name: Name = Str::b(&rec.name);
            user: User = Str::b(&rec.user);
            uid: Uid = rec.uid;
            gid: Gid = rec.gid;
            account: Account = Str::b(&rec.account);
            partition: Partition = Str::b(&rec.partition);
            qos: Qos = Str::b(&rec.qos);
            state: State = Some(rec.shown_wire_state());
            reason: Reason = reason;
            reason_detail: ReasonDetail = detail;
            priority: Priority = priority;
            nice: Nice = rec.spec.nice;
            submit_time: SubmitTime = rec.submit_time;
            eligible_time: EligibleTime = rec.spec.begin_time.map(|b| b as i64);
            start_time: StartTime = shown_start;
            end_time: EndTime = rec.end_time.or_else(|| shown_start.zip(rec.time_limit_min).map(|(s, l)| s + i64::from(l) * 60));
            time_limit: TimeLimit = Some(rec.time_limit_min.map_or(TimeLimitWire::Unlimited, TimeLimitWire::Minutes));
            nodes: Nodes = if rec.nodes.is_empty() { Str::default() } else { Str::from(compress_sorted(&rec.nodes)) };
            sched_nodes: SchedNodes = sched_nodes;
            num_nodes: NumNodes = if rec.nodes.is_empty() { rec.num_nodes } else { rec.nodes.len() as u32 };
            // Slurm's `num_tasks` of a job that ended without starting and was not given one
            // is `NO_VAL` (`_pack_default_job_details`), `NumTasks=N/A`: sent as 0.
            num_tasks: NumTasks = if !rec.ntasks_given && rec.state.is_finished() && rec.start_time.is_none() && rec.restarts == 0 { 0 } else { rec.ntasks };
            cpus_per_task: CpusPerTask = rec.cpus_per_task;
            mem_per_node_mib: MemPerNodeMib = rec.mem_per_node_mib;
            gpus: Gpus = rec.gpus;
            gres: Gres = rec
                .gres
                .iter()
                .map(|(n, t, c)| flotilla_proto::GresView {
                    name: Str::b(n),
                    gpu_type: t.as_deref().map(Str::b),
                    count: *c,
                })
                .collect();
            gpu_alloc: GpuAlloc = rec.allocs.iter().zip(&rec.nodes).map(|(a, n)| (Str::b(n), a.part.gpus.0)).collect();
            work_dir: WorkDir = Str::b(&rec.work_dir);
            stdout: Stdout = rec.stdout.as_deref().map(Str::b);
            stderr: Stderr = rec.stderr.as_deref().map(Str::b);
            dependency: Dependency = rec.dependency.as_deref().map(Str::b);
            exit_code: ExitCode = rec.exit_code;
            exit_signal: ExitSignal = rec.exit_signal;
            restarts: Restarts = rec.restarts;
            requeue: Requeue = rec.requeue;
            batch_host: BatchHost = rec.nodes.first().map_or_else(Str::default, |n| Str::b(n));
            topology: Topology = Str::b(&rec.topology);
            preemptible: Preemptible = rec.spec.preemptible;
            held: Held = rec.spec.held.is_some();
            exclusive: Exclusive = rec.exclusive;
            required_nodes: RequiredNodes = rec.required_nodes.iter().map(|s| Str::b(s)).collect();
            excluded_nodes: ExcludedNodes = rec.excluded_nodes.iter().map(|s| Str::b(s)).collect();
            comment: Comment = rec.comment.as_deref().map(Str::b);
            preempt_count: PreemptCount = rec.spec.preempt_count;
            last_checkpoint_ack: LastCheckpointAck = rec.last_checkpoint_ack;
            borrowed: Borrowed = self
                .sched
                .running()
                .get(&rec.spec.id)
                .is_some_and(|r| r.allocs.iter().any(|a| a.borrowed));
            service_id: ServiceId = rec.service;
            command: Command = rec.command.as_deref().map(Str::b);
            tres_per_job: TresPerJob = rec.tres_per_job.as_deref().map(Str::b);
            tres_per_task: TresPerTask = rec.tres_per_task.as_deref().map(Str::b);
            mem_per_cpu_mib: MemPerCpuMib = rec.mem_per_cpu_mib;
            tres_per_node: TresPerNode = rec.tres_per_node.as_deref().map(Str::b);
            tres_per_socket: TresPerSocket = rec.tres_per_socket.as_deref().map(Str::b);
            max_nodes: MaxNodes = rec.max_nodes;
            cpu_ids: CpuIds = rec
                .allocs
                .iter()
                .zip(&rec.nodes)
                .map(|(a, n)| match rec.cores.get(n) {
                    Some(c) => Str::from(flotilla_core::cores::ranges(&self.core_layout(n, a.part.node).cpu_ids(c))),
                    None => Str::default(),
                })
                .collect();
            sockets_per_node: SocketsPerNode = rec.sockets_per_node;
            mem_whole_node: MemWholeNode = rec.mem_whole_node;
            node_shape: NodeShape = rec.node_shape;
            mail_type: MailType = rec.mail_type;
            mail_user: MailUser = rec.mail_user.as_deref().map(Str::b);
            job_flags: JobFlags = rec.job_flags;
            time_min: TimeMin = rec.time_min;
            deadline: Deadline = rec.deadline;
            features: Features = rec.features.as_deref().map(Str::b);
            // The array's first record keeps the throttle (a record of its own id).
            array_throttle: ArrayThrottle = rec
                .array_job_id
                .and_then(|a| if a == rec.id { rec.array_max_running } else { self.jobs.get(&a).and_then(|h| h.array_max_running) })
                .unwrap_or(0);
            admin_comment: AdminComment = rec.admin_comment.as_deref().map(Str::b);
            delay_boot_s: DelayBoot = rec.delay_boot_s.unwrap_or(0);
            derived_exit: DerivedExit = crate::acct::exit_pair(rec.acct.derived_ec);
        }
    }

    /// The records a job query selects, in job-id order.
    /// Jobs of other users are left out under `PrivateData=jobs` unless `ident` is an admin.
    fn query_matches<'a>(&'a self, ident: Ident, q: &'a JobQuery) -> impl Iterator<Item = &'a JobRecord> + 'a {
        self.jobs
            .values()
            .filter(move |r| self.opts.access.sees_jobs_of(ident, r.uid))
            .filter(|r| q.include_finished || !r.state.is_finished())
            .filter(|r| q.jobs.is_empty() || q.jobs.iter().any(|j| ref_matches(j, r)))
            .filter(|r| matches_filter(r, &q.filter, &self.sched))
    }

    /// `squeue`'s query: the fields asked for of each job `q.query` selects, encoded from
    /// views of the records.
    pub(super) fn query_queue(&self, ident: Ident, q: &flotilla_proto::QueueQuery, now: i64) -> Response {
        match self.encode_queue(ident, q, now, usize::MAX, &mut |_| true) {
            Some(rows) => Response::Queue(rows),
            None => Response::Error(SlurmError::new(ESLURM_INTERNAL)),
        }
    }

    /// [`Controller::query_queue`] in parts ([`flotilla_proto::Request::QueryQueueParts`]):
    /// every [`QUEUE_PART_BYTES`] of rows go to `tx` as a `QueuePart` as soon as they are
    /// encoded, the rest as the last `Queue` (or an `Error`). Stops early when the connection
    /// is gone (`tx` closed).
    pub(super) fn query_queue_parts(&self, ident: Ident, q: &flotilla_proto::QueueQuery, now: i64, tx: &tokio::sync::mpsc::UnboundedSender<Response>) {
        let last = match self.encode_queue(ident, q, now, QUEUE_PART_BYTES, &mut |rows| tx.send(Response::QueuePart(rows)).is_ok()) {
            Some(rows) => Response::Queue(rows),
            None => Response::Error(SlurmError::new(ESLURM_INTERNAL)),
        };
        let _ = tx.send(last);
    }

    /// The rows of `squeue`'s query `q`: each time they reach `part_bytes`, they go to `part`
    /// (which says whether to go on), and the rows after the last part are returned; `None`
    /// when a job does not encode (logged).
    fn encode_queue(
        &self,
        ident: Ident,
        q: &flotilla_proto::QueueQuery,
        now: i64,
        part_bytes: usize,
        part: &mut dyn FnMut(flotilla_proto::QueueRows) -> bool,
    ) -> Option<flotilla_proto::QueueRows> {
        let want = FieldSet::of(&q.fields);
        // One view receives every job's fields in turn; the pending jobs' states are walked
        // beside the records (both in job-id order) instead of looked up one by one, unless
        // the query names its jobs (`squeue -j`: a few lookups).
        let mut ctx = if q.query.jobs.is_empty() { ViewCtx::walk(&self.sched) } else { ViewCtx::one(&self.sched) };
        let mut v = JobView::default();
        let mut rows = flotilla_proto::QueueRows::default();
        for r in self.query_matches(ident, &q.query) {
            self.fill_view(&mut v, r, want, now, &mut ctx);
            if let Err(e) = rows.push(&q.fields, &v) {
                error!("cannot encode a queue query's answer: {e}");
                return None;
            }
            if rows.bytes.len() >= part_bytes {
                let next = flotilla_proto::QueueRows { count: 0, bytes: Vec::with_capacity(part_bytes + part_bytes / 8) };
                if !part(std::mem::replace(&mut rows, next)) {
                    break;
                }
            }
        }
        Some(rows)
    }

    /// `Response::Jobs` for `q`, encoded straight from views of the records.
    pub(super) fn query_jobs_encoded(&self, ident: Ident, q: &JobQuery, now: i64) -> Reply {
        let recs: Vec<&JobRecord> = self.query_matches(ident, q).collect();
        // A walk over the pending jobs pays off over many views, not for `scontrol show job 5`.
        let mut ctx = if recs.len() > WALK_FROM { ViewCtx::walk(&self.sched) } else { ViewCtx::one(&self.sched) };
        let views = recs.iter().map(|r| {
            let mut v = JobView::default();
            self.fill_view(&mut v, r, FieldSet::ALL, now, &mut ctx);
            v
        });
        match flotilla_proto::jobview::encode_jobs_response(views) {
            Ok(bytes) => Reply::Encoded(bytes),
            Err(e) => {
                error!("cannot encode a job query's answer: {e}");
                Reply::Msg(Response::Error(SlurmError::new(ESLURM_INTERNAL)))
            }
        }
    }

    pub(super) fn query_nodes(&self, q: &NodeQuery) -> Vec<NodeInfo> {
        let c = self.sched.cluster();
        c.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| q.names.is_empty() || q.names.contains(&n.name))
            .map(|(i, n)| {
                let used_gpus = GpuMask::all(n.gpus).minus(n.free_gpus);
                let busy = n.free_cpu_milli < n.cpu_milli || !used_gpus.is_empty();
                // Slurm (cons_tres): ALLOCATED when every CPU is allocated, MIXED when some are
                // or any GPU is (goldens 0200-0204: all 8 GPUs and 2 of 64 CPUs in use: mixed).
                let full = n.free_cpu_milli == 0;
                let (state, reason) = match &n.avail {
                    NodeAvail::Down { reason } => ("DOWN".to_string(), Some(reason.clone())),
                    NodeAvail::Drain { reason } | NodeAvail::Quarantined { reason } => {
                        (if busy { "DRAINING" } else { "DRAINED" }.to_string(), Some(reason.clone()))
                    }
                    // Slurm 22.05 `node_state_string`: a failed node is FAILING only while
                    // every CPU is allocated (base ALLOCATED; a MIXED one stays FAIL), and
                    // DRAIN, exclusive with FAIL in `update_node`, is checked first.
                    NodeAvail::Fail { reason } => (if full { "FAILING" } else { "FAIL" }.to_string(), Some(reason.clone())),
                    NodeAvail::Unknown => ("UNKNOWN".to_string(), None),
                    NodeAvail::Up => ((if full {
                        "ALLOCATED"
                    } else if busy {
                        "MIXED"
                    } else {
                        "IDLE"
                    })
                    .to_string(), None),
                };
                let set = self.nodes[i].reason_set.filter(|_| reason.is_some());
                NodeInfo {
                    name: n.name.clone(),
                    state,
                    not_responding: self.nodes[i].sess.is_none(),
                    reason,
                    cpus: (n.cpu_milli / 1000) as u32,
                    cpus_alloc: ((n.cpu_milli - n.free_cpu_milli) / 1000) as u32,
                    mem_mib: n.mem_mib,
                    mem_alloc_mib: n.mem_mib - n.free_mem_mib,
                    gpus: n.gpus,
                    gpu_type: n.gpu_type.clone(),
                    gpu_alloc_mask: used_gpus.0,
                    partitions: n.partitions.iter().map(|p| c.partitions[p.0 as usize].name.clone()).collect(),
                    pod: c.pods[n.pod.0 as usize].name.clone(),
                    boot_epoch: n.boot_epoch,
                    reason_time: set.map(|s| s.0),
                    reason_uid: set.map(|s| s.1),
                    features: self.nodes[i].shown_features.as_ref().map_or_else(|| joined(&n.features), |s| s.0.clone()),
                    features_act: self.nodes[i].shown_features.as_ref().map_or_else(|| joined(&n.features), |s| s.1.clone()),
                }
            })
            .collect()
    }

    /// The partitions `ident` may see, with their index, in slurm.conf order: under
    /// `PrivateData=partitions` a user sees only the partitions they may use.
    pub(super) fn visible_partitions(&self, ident: Ident) -> impl Iterator<Item = (usize, &flotilla_core::cluster::Partition)> {
        self.sched.cluster().partitions.iter().enumerate().filter(move |(_, p)| self.opts.access.sees_partition(ident, &p.name))
    }

    /// The partitions `ident` may see ([`Self::visible_partitions`]).
    pub(super) fn query_partitions(&self, ident: Ident) -> Vec<PartitionInfo> {
        let c = self.sched.cluster();
        self.visible_partitions(ident)
            .map(|(i, p)| {
                let names: Vec<String> = p.nodes.iter().map(|n| c.node(*n).name.clone()).collect();
                PartitionInfo {
                    name: p.name.clone(),
                    nodes: compress_sorted(&names),
                    default: p.default,
                    max_time_min: p.max_time_min,
                    default_time_min: p.default_time_min,
                    up: p.state == flotilla_core::cluster::PartitionState::Up,
                    total_nodes: p.nodes.len() as u32,
                    total_cpus: p.nodes.iter().map(|n| (c.node(*n).cpu_milli / 1000) as u32).sum(),
                    total_gpus: p.nodes.iter().map(|n| c.node(*n).gpus).sum(),
                    default_topology: p.default_topology.as_str().to_string(),
                    largest_placeable: Some(self.largest_placeable_of(i)),
                }
            })
            .collect()
    }

    /// `Request::QueryReclaimable`: per partition the caller may see (as
    /// [`Self::query_partitions`]), its elastic growth that may be taken back.
    pub(super) fn query_reclaimable(&self, ident: Ident) -> Vec<flotilla_proto::PartitionReclaim> {
        self.visible_partitions(ident)
            .map(|(i, p)| {
                let (grown_gpus, largest_if_reclaimed) = self.reclaimable_of(i);
                flotilla_proto::PartitionReclaim { name: p.name.clone(), grown_gpus, largest_if_reclaimed }
            })
            .collect()
    }

    pub(super) fn stats(&self, now: i64) -> Stats {
        let s = &self.stats;
        Stats {
            started_at: self.started_at,
            now,
            cycles: s.cycles,
            last_cycle_us: s.last_cycle_us,
            mean_cycle_us: s.cycle_us_total / s.cycles.max(1),
            max_cycle_us: s.max_cycle_us,
            jobs_submitted: s.submitted,
            jobs_started: s.started,
            jobs_completed: s.completed,
            jobs_failed: s.failed,
            jobs_cancelled: s.cancelled,
            jobs_requeued: s.requeued,
            jobs_pending: self.jobs.values().filter(|j| j.state == JobState::Pending).count() as u64,
            jobs_running: self.jobs.values().filter(|j| j.state == JobState::Running).count() as u64,
            db_commits: s.commits,
            mean_commit_us: s.commit_us_total / s.commits.max(1),
            mean_batch: s.batch_events_total / s.commits.max(1),
            rpc_counts: s.rpc.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            auth_failures: self.auth_failures.load(Ordering::Relaxed),
            nodes_connected: self.nodes.iter().filter(|n| n.sess.is_some()).count() as u32,
        }
    }

}

fn ref_matches(r: &JobRef, rec: &JobRecord) -> bool {
    if r.job_id != rec.id && rec.array_job_id != Some(r.job_id) {
        return false;
    }
    match &r.tasks {
        None => true,
        Some(ts) => {
            rec.array_task_id.is_some_and(|t| ts.contains(&t) && !rec.is_array_meta())
                || rec.array_pending.iter().any(|t| ts.contains(t))
        }
    }
}

pub(super) fn matches_filter(rec: &JobRecord, f: &JobFilter, _sched: &Scheduler) -> bool {
    (f.states.is_empty() || f.states.contains(&rec.shown_wire_state())) && matches_filter_but_state(rec, f)
}

/// [`matches_filter`] without its state filter (which `scancel` compares differently).
pub(super) fn matches_filter_but_state(rec: &JobRecord, f: &JobFilter) -> bool {
    (f.users.is_empty() || f.users.contains(&rec.user))
        && (f.names.is_empty() || f.names.contains(&rec.name))
        && (f.partitions.is_empty() || f.partitions.contains(&rec.partition))
        && (f.accounts.is_empty() || f.accounts.contains(&rec.account))
        && (f.nodes.is_empty() || rec.nodes.iter().any(|n| f.nodes.contains(n)))
}

/// Answers over more jobs than this walk the pending jobs' states ([`ViewCtx::walk`]).
const WALK_FROM: usize = 64;

/// The rows' bytes of one part of `squeue`'s answer ([`Controller::query_queue_parts`]):
/// about 2,500 jobs of the default format, a millisecond or two of encoding, so that squeue
/// starts on the first jobs at once and the frames stay small beside the whole answer.
const QUEUE_PART_BYTES: usize = 128 << 10;

/// What the views of one answer share, worked out once: whether priority/basic shows every
/// job's number, and the pending jobs' states. An answer over many jobs walks those states
/// in job-id order beside the job table ([`ViewCtx::walk`]; a lookup per job was a visible
/// part of `squeue` over 100,000 pending jobs); a view of one job looks its state up.
pub(super) struct ViewCtx<'a> {
    sched: &'a Scheduler,
    basic_priority: bool,
    /// The pending states not passed yet, and the last id asked for (`None`: look up).
    walk: Option<(std::iter::Peekable<PendingStates<'a>>, Option<JobId>)>,
}

/// [`Scheduler::pending_states`], boxed to be kept in a [`ViewCtx`].
type PendingStates<'a> = Box<dyn Iterator<Item = (JobId, &'a PendingInfo, u64)> + 'a>;

impl<'a> ViewCtx<'a> {
    /// For the view of one job (looks its pending state up).
    pub(super) fn one(sched: &'a Scheduler) -> ViewCtx<'a> {
        ViewCtx { sched, basic_priority: sched.priority_name() == "priority/basic", walk: None }
    }

    /// For views of jobs asked for mostly in ascending id order (an id lower than the last
    /// one asked for is looked up: the answer is the same in any order).
    pub(super) fn walk(sched: &'a Scheduler) -> ViewCtx<'a> {
        let states: PendingStates<'a> = Box::new(sched.pending_states());
        ViewCtx { walk: Some((states.peekable(), None)), ..ViewCtx::one(sched) }
    }

    /// [`Scheduler::pending_state`] of `id`.
    fn pending_state(&mut self, id: JobId) -> Option<(&'a PendingInfo, u64)> {
        let Some((states, last)) = self.walk.as_mut().filter(|(_, last)| last.is_none_or(|l| l <= id)) else {
            return self.sched.pending_state(id);
        };
        *last = Some(id);
        while let Some(&(at, info, prio)) = states.peek() {
            if at >= id {
                return (at == id).then_some((info, prio));
            }
            states.next();
        }
        None
    }
}

/// The pending-only fields of a job's view ([`Controller::pending_shown`]).
struct PendingShown<'a> {
    /// `REASON`: what the job waits for, `None` when not pending.
    reason: Str<'a>,
    /// The core's longer explanation of the reason, if any.
    detail: Option<Str<'a>>,
    /// When the core expects the job to start (s since the epoch).
    expected: Option<i64>,
    /// The nodes the core plans to start it on, as a hostlist (`SCHEDNODES`).
    sched_nodes: Str<'a>,
    /// The job's priority as the last cycle ranked it.
    priority: u64,
}

/// Features as slurm.conf gives them: comma-joined, `None` for none.
pub(super) fn joined(f: &[String]) -> Option<String> {
    (!f.is_empty()).then(|| f.join(","))
}
