//! Carrying out the core's elastic decisions (`flotilla_core::sched`'s `elastic` module): the
//! job record, its allocations in the store, the node daemons and the job's notice follow
//! every membership change.
//!
//! - `Grow`: the new allocations join the record (after the ones it has, so the first node,
//!   the batch and rendezvous host, stays first), are stored, and each new node gets the job's
//!   `Launch` (not its batch host: no script runs there; the node confines the job's part and
//!   runs what the job starts there).
//! - `Shrink`: the leaving nodes' processes of the job get SIGTERM now; at the core's deadline
//!   they get SIGKILL, the nodes leave the record and the core hears `Shrunk`
//!   ([`Controller::tick_shrinks`], from the timer work). A node that still reports the job
//!   afterwards is killed by the reconciler (it runs a job the table does not place there).
//! - `MembersLost`: the nodes leave the record at once (and are sent `Kill`, in case they
//!   come back).
//!
//! Each change is appended to the record's resize history (`scontrol show job`'s
//! `ResizeHistory=`) and, with `--elastic-signal`, the signal goes to the job's steps on the
//! nodes that stay.

use super::{Controller, SIGTERM};
use crate::job::{JobState, Resize, ResizeChange};
use crate::store::AllocOp;
use flotilla_core::hostlist::compress_sorted;
use flotilla_core::job::JobId;
use flotilla_core::sched::{AllocId, Allocation, Event as CoreEvent, LossReason};
use flotilla_proto::CtlToNode;
use tracing::{info, warn};

impl Controller {
    /// `Decision::Grow` for core job `core`: the allocations join the job (module doc).
    pub(super) fn grow_job(&mut self, core: u64, allocs: Vec<Allocation>, now: i64) {
        let Some(id) = self.job_of_core(core) else {
            panic!("the core grew job {core}, which the controller does not know")
        };
        let names: Vec<String> = allocs
            .iter()
            .map(|a| self.sched.cluster().node(a.part.node).name.clone())
            .collect();
        for (a, n) in allocs.iter().zip(&names) {
            self.batch.allocs.push(AllocOp::Insert {
                job_id: id,
                node: n.clone(),
                alloc: a.clone(),
            });
            let i = a.part.node.0 as usize;
            self.nodes[i].jobs.insert(id);
            self.node_out.push((i, super::Outgoing::Bind(id)));
        }
        let rec = self.jobs.get_mut(&id).expect("job exists");
        let old_len = rec.nodes.len();
        rec.allocs.extend(allocs);
        rec.nodes.extend(names.iter().cloned());
        info!(job = id, joined = %compress_sorted(&names), nodes = rec.nodes.len(), "elastic job grew");
        self.membership_changed(id, ResizeChange::Grow, names, now);
        // After the binding (sent with the turn's node messages, before these).
        self.extend_steps(id, old_len);
    }

    /// `Decision::Shrink`: SIGTERM to the job's processes on the leaving nodes; SIGKILL and
    /// the release at `deadline` ([`Controller::tick_shrinks`]).
    pub(super) fn shrink_job(&mut self, core: u64, ids: &[AllocId], deadline: u64, now: i64) {
        let Some(id) = self.job_of_core(core) else {
            return;
        };
        let leaving = self.nodes_of(id, ids);
        info!(job = id, leaving = %compress_sorted(&leaving), deadline, "elastic job shrinking: SIGTERM, SIGKILL at the deadline");
        for n in &leaving {
            self.send(
                n,
                CtlToNode::Signal {
                    job_id: id,
                    signal: SIGTERM,
                    batch_only: false,
                },
            );
        }
        self.sync_grown(id, core);
        let _ = now;
    }

    /// `Decision::MembersLost`: the allocations are gone (a failed node, `scontrol update
    /// NumNodes=` on a rigid job).
    pub(super) fn members_lost(
        &mut self,
        core: u64,
        allocs: &[Allocation],
        reason: &LossReason,
        now: i64,
    ) {
        let Some(id) = self.job_of_core(core) else {
            return;
        };
        let ids: Vec<AllocId> = allocs.iter().map(|a| a.id).collect();
        let gone = self.nodes_of(id, &ids);
        warn!(job = id, lost = %compress_sorted(&gone), ?reason, "job lost nodes and runs on");
        self.leave(id, &ids);
        for n in &gone {
            self.send(n, CtlToNode::Kill { job_id: id });
        }
        if let Some(rec) = self.jobs.get_mut(&id) {
            // The request follows what the job holds (a rigid job shrunk by an operator).
            rec.spec.request = self
                .sched
                .running()
                .get(&JobId(core))
                .map_or(rec.spec.request.clone(), |r| r.spec.request.clone());
        }
        self.membership_changed(id, ResizeChange::Lost, gone, now);
    }

    /// Shrinks past their deadline: SIGKILL on the leaving nodes, which leave the job; the
    /// core hears `Shrunk`.
    pub(super) fn tick_shrinks(&mut self, now: i64) {
        // Per job, every part whose deadline passed: one membership change.
        let mut due: Vec<(u64, Vec<AllocId>)> = Vec::new();
        for (core, r) in self.sched.running() {
            let ids: Vec<AllocId> = r
                .grown
                .iter()
                .filter(|g| {
                    g.shrinking
                        .is_some_and(|d| now >= i64::try_from(d).unwrap_or(i64::MAX))
                })
                .flat_map(|g| g.allocs.iter().copied())
                .collect();
            if !ids.is_empty() {
                due.push((core.0, ids));
            }
        }
        for (core, ids) in due {
            let Some(id) = self.job_of_core(core) else {
                continue;
            };
            let gone = self.nodes_of(id, &ids);
            for n in &gone {
                self.send(n, CtlToNode::Kill { job_id: id });
            }
            self.leave(id, &ids);
            self.core_event(
                CoreEvent::Shrunk {
                    job: JobId(core),
                    allocs: ids,
                },
                now,
            );
            info!(job = id, left = %compress_sorted(&gone), "elastic job shrunk");
            self.membership_changed(id, ResizeChange::Shrink, gone, now);
        }
    }

    /// `scontrol show job`'s elastic lines: the range, grown nodes and resize history of the
    /// jobs in `ids` that are elastic or were resized, those the caller may see
    /// (`PrivateData=jobs`: its own, unless an admin).
    pub(super) fn query_elastic(
        &self,
        ident: super::Ident,
        ids: &[u64],
    ) -> Vec<flotilla_proto::ElasticInfo> {
        use flotilla_core::job::ElasticUnit;
        let mut out = Vec::new();
        for id in ids {
            let Some(rec) = self.jobs.get(id) else {
                continue;
            };
            if self.opts.access.private.jobs && !ident.admin && rec.uid != ident.uid {
                continue;
            }
            let e = rec.spec.elastic;
            if e.is_none() && rec.elastic.as_ref().is_none_or(|x| x.resizes.is_empty()) {
                continue;
            }
            let x = rec.elastic.clone().unwrap_or_default();
            let grown: Vec<AllocId> = x
                .grown
                .iter()
                .flat_map(|g| g.allocs.iter().copied())
                .collect();
            let mut grown_nodes = self.nodes_of(*id, &grown);
            grown_nodes.sort();
            out.push(flotilla_proto::ElasticInfo {
                job_id: *id,
                unit: match e.map(|e| e.unit) {
                    Some(ElasticUnit::Nodes) => "nodes".into(),
                    Some(ElasticUnit::Gpus) => "gpus".into(),
                    None => String::new(),
                },
                min: e.map_or(0, |e| e.min),
                max: e.map_or(0, |e| e.max),
                step: e.map_or(0, |e| e.step),
                signal: x.signal,
                grown_nodes: compress_sorted(&grown_nodes),
                resizes: x
                    .resizes
                    .iter()
                    .map(|r| {
                        let mut nodes = r.nodes.clone();
                        nodes.sort();
                        flotilla_proto::ResizeInfo {
                            time: r.time,
                            change: r.change.as_str().into(),
                            nodes: compress_sorted(&nodes),
                            num_nodes: r.num_nodes,
                        }
                    })
                    .collect(),
            });
        }
        out
    }

    /// The names of the nodes of `id`'s allocations `ids`.
    fn nodes_of(&self, id: u64, ids: &[AllocId]) -> Vec<String> {
        let Some(rec) = self.jobs.get(&id) else {
            return Vec::new();
        };
        rec.allocs
            .iter()
            .zip(&rec.nodes)
            .filter(|(a, _)| ids.contains(&a.id))
            .map(|(_, n)| n.clone())
            .collect()
    }

    /// Allocations `ids` leave job `id`'s record and the store; their nodes no longer run it.
    fn leave(&mut self, id: u64, ids: &[AllocId]) {
        let gone = self.nodes_of(id, ids);
        let Some(rec) = self.jobs.get_mut(&id) else {
            return;
        };
        let keep: Vec<bool> = rec.allocs.iter().map(|a| !ids.contains(&a.id)).collect();
        let mut k = keep.iter();
        rec.allocs.retain(|_| *k.next().expect("same length"));
        let mut k = keep.iter();
        rec.nodes.retain(|_| *k.next().expect("same length"));
        self.steps.nodes_left(id, &keep);
        for n in gone {
            self.batch.allocs.push(AllocOp::DeleteNode {
                job_id: id,
                node: n.clone(),
            });
            if let Some(nid) = self.sched.cluster().node_id(&n) {
                self.nodes[nid.0 as usize].jobs.remove(&id);
            }
        }
    }

    /// Copies the core's grown parts of the job into its record (restored at recovery).
    fn sync_grown(&mut self, id: u64, core: u64) {
        let grown = self
            .sched
            .running()
            .get(&JobId(core))
            .map(|r| r.grown.clone())
            .unwrap_or_default();
        if let Some(e) = self.jobs.get_mut(&id).and_then(|r| r.elastic.as_mut()) {
            e.grown = grown;
        }
        self.dirty(id);
    }

    /// After a change of `change` on `nodes`: the record's node count, resize history and
    /// grown parts, the accounting row; `--elastic-signal` to the steps on the nodes that stay.
    fn membership_changed(&mut self, id: u64, change: ResizeChange, nodes: Vec<String>, now: i64) {
        let core = self.jobs[&id].spec.id.0;
        self.sync_grown(id, core);
        let rec = self.jobs.get_mut(&id).expect("job exists");
        rec.num_nodes = rec.nodes.len() as u32;
        rec.gpus = rec.allocs.iter().map(|a| a.part.gpus.count()).sum();
        let num_nodes = rec.num_nodes;
        let signal = rec.elastic.as_ref().and_then(|e| e.signal);
        // The members that were there before the change (a joining node's processes start
        // after it).
        let stay: Vec<String> = rec
            .nodes
            .iter()
            .filter(|n| change != ResizeChange::Grow || !nodes.contains(n))
            .cloned()
            .collect();
        let running = rec.state == JobState::Running && rec.stopping.is_none();
        rec.elastic
            .get_or_insert_with(Default::default)
            .resizes
            .push(Resize {
                time: now,
                change,
                nodes,
                num_nodes,
            });
        // The batch host rewrites the membership file (elastic jobs only: a rigid job has
        // none).
        let members = rec.nodes.join(",");
        let batch_host = rec
            .nodes
            .first()
            .cloned()
            .filter(|_| running && rec.spec.elastic.is_some());
        self.batch.acct.insert(id);
        self.dirty(id);
        if let Some(h) = batch_host {
            self.send(
                &h,
                CtlToNode::Membership {
                    job_id: id,
                    nodes: members,
                },
            );
        }
        if let Some(signal) = signal.filter(|_| running) {
            for n in stay {
                self.send(&n, CtlToNode::SignalSteps { job_id: id, signal });
            }
        }
    }
}
