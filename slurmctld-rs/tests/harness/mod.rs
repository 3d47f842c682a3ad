//! An in-process controller: the real [`Controller`] driven turn by turn with a fake clock,
//! fake node sessions and a store in a temp dir; no sockets, no processes, no sleeps.
//!
//! The controller is assembled as the daemon assembles it ([`daemon::controller`]) from a
//! slurm.conf text parsed by the core's parser. Each [`Harness::turn`] hands the queued
//! events (requests from commands, node messages) to [`Controller::turn`] at the fake `now`
//! with the timer work of [`Due::ALL`] by default, then reads the replies, lets each fake node
//! react to what the controller sent it (as `slurmd` would: a launch runs, SIGTERM ends the
//! job unless it ignores it or acknowledges a checkpoint, SIGKILL ends it), and queries the
//! job table as `squeue` would. What the node answers arrives at the controller in the next
//! turn, as it would over a socket.
//!
//! Everything is written to a transcript (turn, time, requests and replies, every message to
//! a node, the jobs whose state changed) that a scenario compares with its golden file in
//! `tests/goldens/` ([`check_golden`]; `UPDATE_GOLDENS=1` re-records it: review the diff).
//!
//! The store is SQLite in a temp dir, or with `FLOTILLA_TEST_STORE=postgres` a throw-away
//! PostgreSQL server of the harness's own ([`backends::TestPg`]): the same scenarios, the same
//! goldens, on the other backend (CI runs the harness's tests both ways).
#![allow(dead_code)]

#[path = "../backends/mod.rs"]
pub mod backends;

use flotilla_core::config::{no_includes, parse_cluster};
use flotilla_proto::{
    decode_frame, encode_response_frame, CtlToNode, Frame, JobExit, JobInfo, JobQuery, JobRef, NodeJob, NodeToCtl,
    Register, Request, Response, StopCause, SubmitJob,
};
use flotilla_slurmctld::ctld::{Controller, CtlOptions, Due, Event, Ident, Inbox, Reply};
use flotilla_slurmctld::daemon;
use flotilla_slurmctld::store::{Store, SyncMode};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// The fake clock's origin (s since the epoch): transcripts show times relative to it.
pub const T0: i64 = 1_700_000_000;

/// Two nodes `gpu01`, `gpu02` of 64 CPUs, 512000 MiB and 8 h100 GPUs; partition `batch`
/// (default, 1 h default time, 2 days max). Preemption is allowed at once
/// (`PreemptExemptTime=0`), as in the services end-to-end test.
pub const TWO_NODES: &str = "\
ClusterName=harness
SlurmctldHost=localhost
GresTypes=gpu
PreemptExemptTime=0
NodeName=gpu[01-02] Sockets=2 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=512000 Gres=gpu:h100:8 State=UNKNOWN
PartitionName=batch Nodes=gpu[01-02] Default=YES DefaultTime=01:00:00 MaxTime=2-00:00:00 State=UP
";

/// Who sends a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum User {
    /// uid 2001.
    Alice,
    /// uid 2002.
    Bob,
    /// uid 0, an admin.
    Root,
}

impl User {
    pub fn ident(self) -> Ident {
        match self {
            User::Alice => Ident { uid: 2001, gid: 2001, admin: false },
            User::Bob => Ident { uid: 2002, gid: 2002, admin: false },
            User::Root => Ident { uid: 0, gid: 0, admin: true },
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            User::Alice => "alice",
            User::Bob => "bob",
            User::Root => "root",
        }
    }
}

/// What a fake job does when it gets SIGTERM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnTerm {
    /// Ends at once (signal 15), as a script without a trap.
    Die,
    /// Keeps running (a trap that does nothing); only SIGKILL ends it.
    Ignore,
    /// Saves a checkpoint and acknowledges it (`$FLOTILLA_CHECKPOINT_ACK`), then waits for
    /// SIGKILL, as the training job of the services end-to-end test.
    AckCheckpoint,
}

/// A batch submission by `who` whose fake script runs `runtime_s` seconds of fake time
/// (`None`: until signalled) and exits `exit`; the fake node reads both from the script.
pub fn job(who: User, runtime_s: Option<i64>, exit: i32) -> SubmitJob {
    let id = who.ident();
    let mut script = String::from("#!/bin/sh\n");
    if let Some(r) = runtime_s {
        writeln!(script, "#FAKE_RUNTIME_S={r}").unwrap();
    }
    writeln!(script, "#FAKE_EXIT={exit}\ntrue").unwrap();
    SubmitJob {
        name: Some("wrap".into()),
        script,
        work_dir: "/tmp".into(),
        uid: id.uid,
        gid: id.gid,
        user: who.name().into(),
        ..SubmitJob::default()
    }
}

/// Marks a submission's fake script to react to SIGTERM as `on_term`.
pub fn on_term(mut j: SubmitJob, on_term: OnTerm) -> SubmitJob {
    let tag = match on_term {
        OnTerm::Die => return j,
        OnTerm::Ignore => "ignore",
        OnTerm::AckCheckpoint => "ack",
    };
    j.script.push_str(&format!("#FAKE_ON_TERM={tag}\n"));
    j
}

fn tag(script: &str, key: &str) -> Option<String> {
    script.lines().find_map(|l| l.strip_prefix(key)).map(|v| v.trim().to_string())
}

/// One job as the fake node runs it.
#[derive(Debug)]
struct NodeRun {
    run: u32,
    gpu_mask: u64,
    batch_host: bool,
    ends_at: Option<i64>,
    exit: i32,
    on_term: OnTerm,
}

/// A fake node daemon: its session channel, boot epoch, running jobs and the exits the
/// controller has not acknowledged yet.
#[derive(Debug)]
struct FakeNode {
    conn: u64,
    rx: Option<mpsc::UnboundedReceiver<CtlToNode>>,
    boot_epoch: u64,
    running: BTreeMap<u64, NodeRun>,
    unacked: Vec<JobExit>,
}

/// A request waiting for its reply.
struct Pending {
    who: String,
    rx: oneshot::Receiver<Reply>,
}

/// The in-process controller and its fake world.
pub struct Harness {
    name: String,
    ctl: Option<Controller>,
    cluster: flotilla_core::config::ClusterConfig,
    opts: CtlOptions,
    dir: tempfile::TempDir,
    /// The state directory, when not `dir` (a small file system in the full-disk tests).
    state: Option<std::path::PathBuf>,
    /// Requests may stay unanswered after a turn (their replies held while commits fail);
    /// otherwise a missing reply fails the test.
    pub replies_may_wait: bool,
    now: i64,
    turn_no: u64,
    next_conn: u64,
    nodes: BTreeMap<String, FakeNode>,
    events: Vec<Event>,
    /// Replies of the last turn, in the order the requests were queued.
    replies: Vec<Response>,
    pending: Vec<Pending>,
    /// Messages to nodes in the last turn: (node, message).
    pub sent: Vec<(String, CtlToNode)>,
    jobs: BTreeMap<u64, JobInfo>,
    shown: BTreeMap<u64, String>,
    /// Inputs queued for the next turn, written under its header.
    inbox: String,
    log: String,
    /// The PostgreSQL server of the store (`FLOTILLA_TEST_STORE=postgres`).
    pg: Option<backends::TestPg>,
}

/// Whether the harness's store is PostgreSQL (`FLOTILLA_TEST_STORE=postgres`).
pub fn on_postgres() -> bool {
    std::env::var("FLOTILLA_TEST_STORE").is_ok_and(|v| v == "postgres")
}

impl Harness {
    /// A controller over `conf` (slurm.conf text) with `opts`, at `T0`, its nodes not yet
    /// registered. The scenario `name` names the golden file.
    pub fn new(name: &str, conf: &str, opts: CtlOptions) -> Harness {
        Harness::new_in(name, conf, opts, None)
    }

    /// [`Harness::new`] with the store in `state` (`None`: a temp dir of its own). A test that
    /// names its state directory is about SQLite's file there: its store is SQLite even with
    /// `FLOTILLA_TEST_STORE=postgres`.
    pub fn new_in(name: &str, conf: &str, opts: CtlOptions, state: Option<std::path::PathBuf>) -> Harness {
        let cluster = parse_cluster(("slurm.conf", conf), None, None, &mut no_includes).expect("slurm.conf parses");
        let dir = tempfile::tempdir().unwrap();
        let mut h = Harness {
            name: name.to_string(),
            ctl: None,
            nodes: cluster
                .nodes
                .iter()
                .map(|n| {
                    (
                        n.name.clone(),
                        FakeNode { conn: 0, rx: None, boot_epoch: 1, running: BTreeMap::new(), unacked: Vec::new() },
                    )
                })
                .collect(),
            cluster,
            opts,
            dir,
            state,
            replies_may_wait: false,
            now: T0,
            turn_no: 0,
            next_conn: 1,
            events: Vec::new(),
            replies: Vec::new(),
            pending: Vec::new(),
            sent: Vec::new(),
            jobs: BTreeMap::new(),
            shown: BTreeMap::new(),
            inbox: String::new(),
            log: String::new(),
            pg: None,
        };
        if on_postgres() && h.state.is_none() {
            h.pg = Some(backends::TestPg::start(name).expect("FLOTILLA_TEST_STORE=postgres needs PostgreSQL installed"));
        }
        h.start();
        h
    }

    /// A harness over [`TWO_NODES`] with the default options, both nodes registered.
    pub fn two_nodes(name: &str) -> Harness {
        let mut h = Harness::new(name, TWO_NODES, CtlOptions::default());
        h.register("gpu01");
        h.register("gpu02");
        h.turn();
        h
    }

    fn start(&mut self) {
        let store = match &self.pg {
            Some(pg) => pg.store(),
            None => Store::open(self.state_dir(), SyncMode::Normal).unwrap(),
        };
        let ctl = daemon::controller(&self.cluster, store, self.opts.clone(), Arc::new(AtomicU64::new(0)), self.now)
            .expect("controller starts");
        self.ctl = Some(ctl);
    }

    /// The controller restarts from its store (the fake nodes keep running; their sessions
    /// are gone until they register again).
    pub fn restart(&mut self) {
        self.note("controller restarts from its store");
        self.ctl = None;
        for n in self.nodes.values_mut() {
            n.rx = None;
        }
        self.start();
    }

    /// The controller restarts from its store under another slurm.conf (`conf`); fake nodes
    /// the new one no longer names are dropped.
    pub fn restart_with(&mut self, conf: &str) {
        self.cluster = parse_cluster(("slurm.conf", conf), None, None, &mut no_includes).expect("slurm.conf parses");
        let names: Vec<String> = self.cluster.nodes.iter().map(|n| n.name.clone()).collect();
        self.nodes.retain(|n, _| names.contains(n));
        self.restart();
    }

    /// The controller's state directory (its SQLite database).
    pub fn state_dir(&self) -> &std::path::Path {
        self.state.as_deref().unwrap_or(self.dir.path())
    }

    pub fn ctl(&self) -> &Controller {
        self.ctl.as_ref().expect("running")
    }

    /// The controller, for what a test sets on it directly (the accounting model).
    pub fn ctl_mut(&mut self) -> &mut Controller {
        self.ctl.as_mut().expect("running")
    }

    /// Seconds since `T0`.
    pub fn at(&self) -> i64 {
        self.now - T0
    }

    /// Moves the fake clock `secs` on.
    pub fn advance(&mut self, secs: i64) {
        self.now += secs;
    }

    /// A comment in the transcript.
    pub fn note(&mut self, text: &str) {
        writeln!(self.inbox, "# {text}").unwrap();
    }

    /// Queues a request of `who` for the next turn.
    pub fn rpc(&mut self, who: User, req: Request) {
        writeln!(self.inbox, "  > {}: {}", who.name(), describe_request(&req)).unwrap();
        let (tx, rx) = oneshot::channel();
        self.events.push(Event::Rpc { ident: who.ident(), req, reply: tx });
        self.pending.push(Pending { who: who.name().to_string(), rx });
    }

    /// `rpc` then a turn; the reply.
    pub fn call(&mut self, who: User, req: Request) -> Response {
        self.rpc(who, req);
        self.turn();
        self.replies.pop().expect("a reply")
    }

    /// Submits `j` as its user in a turn of its own; the new job's id.
    pub fn submit(&mut self, j: SubmitJob) -> u64 {
        let who = match j.uid {
            0 => User::Root,
            2002 => User::Bob,
            _ => User::Alice,
        };
        match self.call(who, Request::SubmitJob(Box::new(j))) {
            Response::Submitted(s) => s.job_id,
            other => panic!("submission refused: {other:?}"),
        }
    }

    /// The node daemon `node` connects and registers with what it runs and the exits not yet
    /// acknowledged (queued for the next turn).
    pub fn register(&mut self, node: &str) {
        let conn = self.next_conn;
        self.next_conn += 1;
        let (tx, rx) = mpsc::unbounded_channel();
        let n = self.nodes.get_mut(node).expect("configured node");
        n.conn = conn;
        n.rx = Some(rx);
        let reg = Register {
            node: node.to_string(),
            boot_epoch: n.boot_epoch,
            gpus: 8,
            cpus: 64,
            mem_mib: 512_000,
            running: running_of(n),
            finished: n.unacked.clone(),
        };
        writeln!(
            self.inbox,
            "  > {node}: register boot_epoch={} running={:?} finished={:?}",
            reg.boot_epoch,
            reg.running.iter().map(|r| (r.job_id, r.run)).collect::<Vec<_>>(),
            reg.finished.iter().map(|e| e.job_id).collect::<Vec<_>>()
        )
        .unwrap();
        let (rtx, rrx) = oneshot::channel();
        self.events.push(Event::NodeRegister { conn, reg, tx, reply: rtx });
        self.pending.push(Pending { who: node.to_string(), rx: rrx });
    }

    /// The node reboots: its session ends, everything it ran is gone (no exits are reported),
    /// and it comes back with the next boot epoch (register it again to reconnect).
    pub fn reboot(&mut self, node: &str) {
        let n = self.nodes.get_mut(node).expect("configured node");
        writeln!(self.inbox, "  > {node}: session ends (reboot: boot_epoch {} -> {})", n.boot_epoch, n.boot_epoch + 1).unwrap();
        n.boot_epoch += 1;
        n.running.clear();
        n.unacked.clear();
        n.rx = None;
        self.events.push(Event::NodeGone { conn: n.conn, node: node.to_string() });
    }

    /// The node sends a heartbeat (its boot epoch, running jobs and unacknowledged exits).
    pub fn heartbeat(&mut self, node: &str) {
        let n = &self.nodes[node];
        let msg = NodeToCtl::Heartbeat { boot_epoch: n.boot_epoch, running: running_of(n), finished: n.unacked.clone() };
        self.node_says(node, msg);
    }

    /// The job `job` on `node` ends with `exit` (its script returned) — reported next turn.
    pub fn exits(&mut self, node: &str, job: u64, exit: i32) {
        let n = self.nodes.get_mut(node).expect("configured node");
        let r = n.running.remove(&job).expect("the node runs the job");
        assert!(r.batch_host, "only the batch host reports an exit");
        let e = JobExit { job_id: job, run: r.run, exit_code: exit, signal: 0, oom: false, end_time: self.now };
        n.unacked.push(e.clone());
        self.node_says(node, NodeToCtl::JobExited(e));
    }

    /// The node's health policy reports `verdict` with `reason` (reported next turn).
    pub fn health(&mut self, node: &str, verdict: flotilla_proto::HealthLevel, reason: &str) {
        self.node_says(node, NodeToCtl::Health { verdict, reason: reason.to_string(), events: Vec::new() });
    }

    fn node_says(&mut self, node: &str, msg: NodeToCtl) {
        writeln!(self.inbox, "  > {node}: {}", describe_node_msg(&msg, T0)).unwrap();
        let conn = self.nodes[node].conn;
        self.events.push(Event::NodeMsg { conn, node: node.to_string(), msg });
    }

    /// One turn with everything due (timer work and a scheduling cycle).
    pub fn turn(&mut self) -> bool {
        self.turn_with(Due::ALL)
    }

    /// One turn with the timer work `due`: jobs whose fake runtime is over end first (their
    /// exits are this turn's node messages), then the controller's turn, then the replies, the
    /// nodes' reactions and the changed jobs are written down.
    pub fn turn_with(&mut self, due: Due) -> bool {
        self.turn_inner(due, None)
    }

    /// One turn with everything due while `arriving` (requests in this order) come in, as
    /// [`Controller::run`] sees them ([`Controller::turn_answering`] over an [`Inbox`]). The
    /// reply each got during the turn (`None`: held for the next turn, where it is handled
    /// first, before the requests queued with [`Harness::rpc`], and its reply is among that
    /// turn's [`Harness::replies`], first).
    pub fn turn_with_arrivals(&mut self, arriving: Vec<(User, Request)>) -> Vec<Option<Response>> {
        let (tx, mut rx) = mpsc::channel(arriving.len().max(1));
        let mut waiting = Vec::new();
        for (who, req) in arriving {
            writeln!(self.inbox, "  > {} (during the turn): {}", who.name(), describe_request(&req)).unwrap();
            let (otx, orx) = oneshot::channel();
            tx.try_send(Event::Rpc { ident: who.ident(), req, reply: otx }).expect("room for every arrival");
            waiting.push(Pending { who: who.name().to_string(), rx: orx });
        }
        let mut held = Vec::new();
        self.turn_inner(Due::ALL, Some(&mut Inbox { rx: &mut rx, held: &mut held }));
        assert!(rx.try_recv().is_err(), "every arrival taken during the turn");
        let mut answered = Vec::new();
        let mut still = Vec::new();
        for mut p in waiting {
            match p.rx.try_recv() {
                Ok(r) => {
                    let r = decode_reply(r);
                    writeln!(self.log, "  < {} (during the turn): {}", p.who, describe_response(&r)).unwrap();
                    answered.push(Some(r));
                }
                Err(oneshot::error::TryRecvError::Empty) => {
                    answered.push(None);
                    still.push(p);
                }
                Err(e) => panic!("arrival dropped: {e}"),
            }
        }
        assert_eq!(held.len(), still.len(), "each unanswered arrival held");
        held.append(&mut self.events);
        self.events = held;
        still.append(&mut self.pending);
        self.pending = still;
        answered
    }

    fn turn_inner(&mut self, due: Due, inbox: Option<&mut Inbox<'_>>) -> bool {
        self.end_finished_runs();
        self.turn_no += 1;
        let events = std::mem::take(&mut self.events);
        let turns = self.ctl().turns();
        let now = self.now;
        let ctl = self.ctl.as_mut().expect("running");
        let cycled = match inbox {
            Some(inbox) => ctl.turn_answering(events, inbox, now, due),
            None => ctl.turn(events, now, due),
        };
        assert_eq!(self.ctl().turns(), turns + 1, "one turn counted");
        let mut what = Vec::new();
        if due.tick {
            what.push("tick");
        }
        if cycled {
            what.push("cycle");
        }
        let header = format!("turn {} t={} [{}]\n", self.turn_no, self.at(), what.join(" "));
        self.log.push_str(&header);
        let inbox = std::mem::take(&mut self.inbox);
        self.log.push_str(&inbox);
        self.collect_replies();
        self.collect_sent();
        self.snapshot();
        cycled
    }

    fn end_finished_runs(&mut self) {
        let now = self.now;
        let mut ended = Vec::new();
        for (name, n) in &self.nodes {
            for (id, r) in &n.running {
                if r.batch_host && r.ends_at.is_some_and(|e| e <= now) {
                    ended.push((name.clone(), *id, r.exit));
                }
            }
        }
        for (node, id, exit) in ended {
            if self.nodes[&node].rx.is_some() {
                self.exits(&node, id, exit);
            }
        }
    }

    fn collect_replies(&mut self) {
        self.replies.clear();
        for p in std::mem::take(&mut self.pending) {
            let mut rx = p.rx;
            let r = match rx.try_recv() {
                Ok(r) => decode_reply(r),
                Err(oneshot::error::TryRecvError::Empty) if self.replies_may_wait => {
                    writeln!(self.log, "  < {}: (reply held)", p.who).unwrap();
                    self.pending.push(Pending { who: p.who, rx });
                    continue;
                }
                Err(e) => panic!("no reply after the turn: {e}"),
            };
            writeln!(self.log, "  < {}: {}", p.who, describe_response(&r)).unwrap();
            self.replies.push(r);
        }
    }

    fn collect_sent(&mut self) {
        self.sent.clear();
        let names: Vec<String> = self.nodes.keys().cloned().collect();
        for name in names {
            let mut got = Vec::new();
            if let Some(rx) = self.nodes.get_mut(&name).and_then(|n| n.rx.as_mut()) {
                while let Ok(m) = rx.try_recv() {
                    got.push(m);
                }
            }
            for m in got {
                writeln!(self.log, "  ctl -> {name}: {}", describe_ctl_msg(&m, T0)).unwrap();
                self.react(&name, &m);
                self.sent.push((name.clone(), m));
            }
        }
    }

    /// What the node does with a message, as `slurmd` would.
    fn react(&mut self, node: &str, m: &CtlToNode) {
        let now = self.now;
        match m {
            CtlToNode::Launch { bind, .. } | CtlToNode::Bind(bind) => {
                let n = self.nodes.get_mut(node).unwrap();
                if n.running.get(&bind.job_id).is_some_and(|r| r.run == bind.run) {
                    return; // a bind sent again: already running
                }
                for (other, r) in &n.running {
                    assert_eq!(r.gpu_mask & bind.gpu_mask, 0, "{node}: job {} bound to GPUs of job {other}", bind.job_id);
                }
                let on_term = match tag(&bind.script, "#FAKE_ON_TERM=").as_deref() {
                    Some("ignore") => OnTerm::Ignore,
                    Some("ack") => OnTerm::AckCheckpoint,
                    _ => OnTerm::Die,
                };
                n.running.insert(
                    bind.job_id,
                    NodeRun {
                        run: bind.run,
                        gpu_mask: bind.gpu_mask,
                        batch_host: bind.batch_host,
                        ends_at: tag(&bind.script, "#FAKE_RUNTIME_S=").and_then(|v| v.parse::<i64>().ok()).map(|s| now + s),
                        exit: tag(&bind.script, "#FAKE_EXIT=").and_then(|v| v.parse().ok()).unwrap_or(0),
                        on_term,
                    },
                );
            }
            CtlToNode::Signal { job_id, signal, .. } => {
                let n = self.nodes.get_mut(node).unwrap();
                let Some(r) = n.running.get(job_id) else { return };
                let run = r.run;
                match (*signal, r.on_term) {
                    (15, OnTerm::Die) | (9, _) => self.killed(node, *job_id, *signal),
                    (15, OnTerm::AckCheckpoint) => {
                        self.node_says(node, NodeToCtl::CheckpointAck { job_id: *job_id, run, at: now });
                    }
                    _ => {}
                }
            }
            CtlToNode::Kill { job_id } => self.killed(node, *job_id, 9),
            CtlToNode::AckExits { job_ids } => {
                self.nodes.get_mut(node).unwrap().unacked.retain(|e| !job_ids.contains(&e.job_id));
            }
            CtlToNode::StopNotice { .. }
            | CtlToNode::SignalSteps { .. }
            | CtlToNode::SignalStep { .. }
            | CtlToNode::LaunchStep(_)
            | CtlToNode::Membership { .. }
            | CtlToNode::Keepalive => {}
        }
    }

    /// The job's processes on `node` end by `signal`; the batch host reports the exit (it
    /// reaches the controller in the next turn).
    fn killed(&mut self, node: &str, job: u64, signal: i32) {
        let now = self.now;
        let n = self.nodes.get_mut(node).unwrap();
        let Some(r) = n.running.remove(&job) else { return };
        if !r.batch_host {
            return;
        }
        let e = JobExit { job_id: job, run: r.run, exit_code: 0, signal, oom: false, end_time: now };
        n.unacked.push(e.clone());
        self.node_says(node, NodeToCtl::JobExited(e));
    }

    /// The owner task's reply to `req` from `who` as it is made (a message, an encoded one,
    /// or the parts of one), in a turn without timer work or cycle.
    pub fn raw_reply(&mut self, who: User, req: Request) -> Reply {
        let (tx, mut rx) = oneshot::channel();
        let now = self.now;
        let ctl = self.ctl.as_mut().expect("running");
        ctl.turn(vec![Event::Rpc { ident: who.ident(), req, reply: tx }], now, Due::NONE);
        rx.try_recv().expect("answered in the turn")
    }

    /// Queries every job (as `squeue -t all` would) in a turn without timer work, and writes
    /// the jobs whose line changed.
    fn snapshot(&mut self) {
        let (tx, mut rx) = oneshot::channel();
        let q = Request::QueryJobs(JobQuery { include_finished: true, ..JobQuery::default() });
        let now = self.now;
        let ctl = self.ctl.as_mut().expect("running");
        ctl.turn(vec![Event::Rpc { ident: User::Root.ident(), req: q, reply: tx }], now, Due::NONE);
        let Response::Jobs(jobs) = decode_reply(rx.try_recv().expect("query answered")) else { panic!("job query failed") };
        self.jobs = jobs.into_iter().map(|j| (j.job_id, j)).collect();
        let lines: BTreeMap<u64, String> = self.jobs.values().map(|j| (j.job_id, describe_job(j, T0))).collect();
        for (id, line) in &lines {
            if self.shown.get(id) != Some(line) {
                writeln!(self.log, "  job {line}").unwrap();
            }
        }
        for id in self.shown.keys() {
            if !lines.contains_key(id) {
                writeln!(self.log, "  job {id}: gone (MinJobAge)").unwrap();
            }
        }
        self.shown = lines;
    }

    /// A job as the last turn's query showed it.
    pub fn job(&self, id: u64) -> &JobInfo {
        self.jobs.get(&id).unwrap_or_else(|| panic!("job {id} not in the table: {:?}", self.jobs.keys()))
    }

    /// Every job the last query showed.
    pub fn jobs(&self) -> impl Iterator<Item = &JobInfo> {
        self.jobs.values()
    }

    /// The replies of the last turn, in the order the requests were queued.
    pub fn replies(&self) -> &[Response] {
        &self.replies
    }

    /// Turns until `f` holds, at most `max`, moving the clock `step` seconds before each.
    /// Fails the test when `f` never holds.
    pub fn turn_until(&mut self, max: u32, step: i64, mut f: impl FnMut(&Harness) -> bool) {
        for _ in 0..max {
            if f(self) {
                return;
            }
            self.advance(step);
            self.turn();
        }
        assert!(f(self), "{}: condition not reached in {max} turns\n{}", self.name, self.log);
    }

    /// The jobs the fake node runs: (job, run).
    pub fn runs_on(&self, node: &str) -> Vec<(u64, u32)> {
        self.nodes[node].running.iter().map(|(id, r)| (*id, r.run)).collect()
    }

    /// Compares the transcript with `tests/goldens/<name>.txt`.
    pub fn check(&self) {
        check_golden(&self.name, &self.log);
    }
}

fn running_of(n: &FakeNode) -> Vec<NodeJob> {
    n.running.iter().map(|(id, r)| NodeJob { job_id: *id, run: r.run, gpu_mask: r.gpu_mask }).collect()
}

fn decode_reply(r: Reply) -> Response {
    match r {
        Reply::Msg(m) => m,
        // An answer in parts (made whole by the time the turn that handled it ended): the
        // rows of every part, in order, as one `Queue`; an error ends it.
        Reply::Parts(mut parts) => {
            let mut all = flotilla_proto::QueueRows::default();
            while let Ok(r) = parts.try_recv() {
                match r {
                    Response::QueuePart(rows) | Response::Queue(rows) => {
                        all.count += rows.count;
                        all.bytes.extend_from_slice(&rows.bytes);
                    }
                    other => return other,
                }
            }
            Response::Queue(all)
        }
        Reply::Encoded(body) => {
            let frame = encode_response_frame(0, &body).expect("frames");
            match decode_frame(&frame) {
                Ok(Some((Frame::Response { body, .. }, _))) => body,
                other => panic!("undecodable reply: {other:?}"),
            }
        }
    }
}

/// GPU indices of a mask: `0-3,6`.
fn gpus(mask: u64) -> String {
    let idx: Vec<u32> = (0..64).filter(|i| mask & (1 << i) != 0).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && idx[j + 1] == idx[j] + 1 {
            j += 1;
        }
        out.push(if j > i { format!("{}-{}", idx[i], idx[j]) } else { idx[i].to_string() });
        i = j + 1;
    }
    if out.is_empty() {
        "none".into()
    } else {
        out.join(",")
    }
}

fn signame(s: i32) -> String {
    match s {
        9 => "SIGKILL".into(),
        10 => "SIGUSR1".into(),
        12 => "SIGUSR2".into(),
        15 => "SIGTERM".into(),
        s => format!("signal {s}"),
    }
}

fn refs(r: &[JobRef]) -> String {
    r.iter()
        .map(|j| match &j.tasks {
            None => j.job_id.to_string(),
            Some(t) => format!("{}_{:?}", j.job_id, t),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A request as the command line that sends it.
pub fn describe_request(r: &Request) -> String {
    match r {
        Request::SubmitJob(s) => {
            let mut out = String::from("sbatch");
            if let Some(n) = &s.name {
                write!(out, " -J {n}").unwrap();
            }
            for g in &s.gres {
                write!(out, " --gres={}:{}", g.name, g.count).unwrap();
            }
            if let Some(g) = &s.gpus_per_node {
                write!(out, " --gpus-per-node={}", g.count).unwrap();
            }
            if let Some(n) = s.nodes_min {
                write!(out, " -N {n}").unwrap();
            }
            if let Some(t) = &s.time_limit {
                write!(out, " -t {t:?}").unwrap();
            }
            if let Some(a) = &s.array {
                let r: Vec<String> = a.ranges.iter().map(|r| format!("{}-{}", r.start, r.end)).collect();
                write!(out, " --array={}{}", r.join(","), a.max_running.map_or(String::new(), |m| format!("%{m}"))).unwrap();
            }
            if let Some(d) = &s.dependency {
                write!(out, " --dependency={d}").unwrap();
            }
            if s.hold {
                out.push_str(" --hold");
            }
            if s.requeue == Some(false) {
                out.push_str(" --no-requeue");
            }
            if s.preemptible {
                out.push_str(" --preemptible");
            }
            if let Some(b) = s.checkpoint_bytes {
                write!(out, " --checkpoint-bytes={b}").unwrap();
            }
            if s.test_only {
                out.push_str(" --test-only");
            }
            if let Some(p) = &s.partition {
                write!(out, " -p {p}").unwrap();
            }
            let runtime = tag(&s.script, "#FAKE_RUNTIME_S=").map_or("until signalled".into(), |r| format!("{r} s"));
            let exit = tag(&s.script, "#FAKE_EXIT=").unwrap_or_else(|| "0".into());
            let term = tag(&s.script, "#FAKE_ON_TERM=").map_or(String::new(), |t| format!(", SIGTERM: {t}"));
            write!(out, "  (script runs {runtime}, exits {exit}{term})").unwrap();
            out
        }
        Request::CancelJob(c) => match c.signal {
            Some(s) => format!("scancel --signal={} {}", signame(s), refs(&c.jobs)),
            None => format!("scancel {}", refs(&c.jobs)),
        },
        Request::HoldRelease(h) => format!("scontrol {:?} {}", h.op, refs(&h.jobs)).to_lowercase(),
        Request::Requeue(r) => format!("scontrol {} {}", if r.hold { "requeuehold" } else { "requeue" }, refs(&r.jobs)),
        Request::UpdateJob(u) => format!("scontrol update job {} {:?}", refs(std::slice::from_ref(&u.job)), u.changes),
        Request::ServiceCreate(c) => format!(
            "sdeploy create {} gpus/replica={} replicas={} (min {} max {}) priority={}",
            c.name, c.gpus_per_replica, c.desired_replicas, c.min_replicas, c.max_replicas, c.priority
        ),
        Request::ServiceScale { id, replicas } => format!("sdeploy scale {id} --replicas={replicas}"),
        Request::SubmitElastic(s) => {
            let e = &s.elastic;
            let mut out = describe_request(&Request::SubmitJob(Box::new(s.job.clone())));
            let range = match (e.gpus_max, s.job.nodes_min, s.job.nodes_max) {
                (Some(max), _, _) => format!(" --gpus={}-{max}", s.job.gpus.as_ref().map_or(0, |g| g.count)),
                (None, Some(a), Some(b)) => format!(" -N {a}-{b}"),
                _ => String::new(),
            };
            out = out.replacen("sbatch", &format!("sbatch --elastic{range}"), 1);
            if let Some(k) = e.step {
                write!(out, " --elastic-step={k}").unwrap();
            }
            if let Some(sig) = e.signal {
                write!(out, " --elastic-signal={}", signame(sig)).unwrap();
            }
            out
        }
        other => format!("{other:?}"),
    }
}

/// A reply, briefly.
pub fn describe_response(r: &Response) -> String {
    match r {
        Response::Submitted(s) => format!("Submitted batch job {}", s.job_id),
        Response::TestOnly(t) => {
            format!("test-only: job {} would start at t={} on {} ({} CPUs)", t.job_id, t.start_time - T0, t.nodes, t.cpus)
        }
        Response::JobResults(rs) => {
            let errs: Vec<String> = rs
                .iter()
                .filter_map(|r| r.error.as_ref().map(|e| format!("{}: error {} ({})", refs(std::slice::from_ref(&r.job)), e.code, e.text)))
                .collect();
            if errs.is_empty() {
                "ok".into()
            } else {
                errs.join("; ")
            }
        }
        Response::Error(e) => format!("error {} ({})", e.code, e.text),
        Response::Registered => "registered".into(),
        Response::ServiceCreated { id } => format!("service {id} created"),
        Response::Jobs(j) => format!("{} jobs", j.len()),
        Response::Queue(_) => "queue rows".into(),
        other => format!("{other:?}"),
    }
}

/// A node message, briefly; times relative to `t0`.
pub fn describe_node_msg(m: &NodeToCtl, t0: i64) -> String {
    match m {
        NodeToCtl::JobExited(e) => format!("job {} run {} exited: code {} signal {}", e.job_id, e.run, e.exit_code, e.signal),
        NodeToCtl::Heartbeat { boot_epoch, running, finished } => format!(
            "heartbeat boot_epoch={boot_epoch} running={:?} finished={:?}",
            running.iter().map(|r| (r.job_id, r.run)).collect::<Vec<_>>(),
            finished.iter().map(|e| e.job_id).collect::<Vec<_>>()
        ),
        NodeToCtl::CheckpointAck { job_id, run, at } => format!("checkpoint acknowledged: job {job_id} run {run} at t={}", at - t0),
        NodeToCtl::Health { verdict, reason, .. } => format!("health {verdict:?}: {reason}"),
        NodeToCtl::StepUsage(u) => format!(
            "usage of {}.{} on {}: cpu {} us, rss {} B{}",
            u.job_id,
            u.step,
            u.node,
            u.usage.total_usec,
            u.usage.max_rss,
            if u.done { " (end)" } else { "" }
        ),
    }
}

/// A controller-to-node message, briefly; times relative to `t0`.
pub fn describe_ctl_msg(m: &CtlToNode, t0: i64) -> String {
    match m {
        CtlToNode::Launch { bind, .. } | CtlToNode::Bind(bind) => format!(
            "launch job {} run {}{} gpus={} cpus={} mem={}MiB nodes={}{}",
            bind.job_id,
            bind.run,
            bind.array.map_or(String::new(), |(a, t)| format!(" ({a}_{t})")),
            gpus(bind.gpu_mask),
            bind.cpus,
            bind.mem_mib,
            bind.nodes,
            if bind.batch_host { " batch-host" } else { "" }
        ),
        CtlToNode::Signal { job_id, signal, batch_only } => {
            format!("signal job {job_id} {}{}", signame(*signal), if *batch_only { " (batch step)" } else { "" })
        }
        CtlToNode::SignalSteps { job_id, signal } => format!("signal steps of job {job_id} {}", signame(*signal)),
        CtlToNode::SignalStep { job_id, step_id, signal, .. } => format!("signal step {job_id}.{step_id} {}", signame(*signal)),
        CtlToNode::Membership { job_id, nodes } => format!("members of job {job_id}: {nodes}"),
        CtlToNode::Keepalive => "keepalive".into(),
        CtlToNode::Kill { job_id } => format!("kill job {job_id} (SIGKILL)"),
        CtlToNode::AckExits { job_ids } => format!("exits acknowledged {job_ids:?}"),
        CtlToNode::StopNotice { job_id, at, cause } => format!(
            "stop notice job {job_id} at t={}: {}",
            at - t0,
            match cause {
                StopCause::Cancelled => "cancelled",
                StopCause::TimeLimit => "time limit",
                StopCause::Preempted => "preempted",
                StopCause::Requeued => "requeued",
            }
        ),
        CtlToNode::LaunchStep(s) => format!("launch step {:?}", s),
    }
}

/// A job's line: `3 (1_2) RUNNING nodes=gpu01`, times relative to `t0`.
pub fn describe_job(j: &JobInfo, t0: i64) -> String {
    let mut out = j.job_id.to_string();
    match (j.array_job_id, j.array_task_id, &j.array_task_str) {
        (Some(a), Some(t), _) => write!(out, " ({a}_{t})").unwrap(),
        (Some(a), None, Some(s)) => write!(out, " ({a}_[{s}])").unwrap(),
        _ => {}
    }
    let state = j.state.map_or("?", |s| s.as_str());
    write!(out, ": {state}").unwrap();
    if j.reason != "None" {
        write!(out, " reason={}", j.reason).unwrap();
    }
    if !j.nodes.is_empty() {
        write!(out, " nodes={}", j.nodes).unwrap();
    }
    match state {
        "PENDING" => {
            if let Some(e) = j.eligible_time.filter(|&e| e > j.submit_time) {
                write!(out, " eligible=t={}", e - t0).unwrap();
            }
            if j.held {
                out.push_str(" held");
            }
        }
        "RUNNING" | "COMPLETING" => {
            if let Some(s) = j.start_time {
                write!(out, " start=t={}", s - t0).unwrap();
            }
        }
        _ => write!(out, " exit={}:{}", j.exit_code, j.exit_signal).unwrap(),
    }
    if j.restarts > 0 {
        write!(out, " restarts={}", j.restarts).unwrap();
    }
    if j.preempt_count > 0 {
        write!(out, " preempted={}", j.preempt_count).unwrap();
    }
    if let Some(a) = j.last_checkpoint_ack {
        write!(out, " checkpoint=t={}", a - t0).unwrap();
    }
    out
}

/// Compares `actual` with the golden file `tests/goldens/<name>.txt` of this crate; with
/// `UPDATE_GOLDENS=1` re-records it instead (review the diff).
pub fn check_golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/goldens").join(format!("{name}.txt"));
    if std::env::var("UPDATE_GOLDENS").as_deref() == Ok("1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("missing golden {} ({e}); record it with UPDATE_GOLDENS=1", path.display()));
    if expected != actual {
        panic!(
            "golden {} differs (re-record with UPDATE_GOLDENS=1 and review the diff)\n--- expected\n{expected}\n--- actual\n{actual}",
            path.display()
        );
    }
}
