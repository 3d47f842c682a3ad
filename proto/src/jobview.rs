//! [`JobView`]: a job as [`JobInfo`] carries it, with borrowed strings.
//!
//! It is encoded byte for byte as [`JobInfo`] is (postcard writes struct fields in order and
//! strings as length and bytes, whoever owns them), so it is not a new message: the controller
//! encodes the answer to a job query ([`encode_jobs_response`]) from views borrowing its job
//! records, without building a `JobInfo` (cloning a dozen strings) per job.
//!
//! `squeue` goes further ([`QueueQuery`], [`QueueRows`]): it names the [`JobField`]s its
//! format, filters and sort read, the controller encodes only those, and the command decodes
//! each job into a view borrowing the answer's bytes. On a 10,000-job queue, decoding 55 fields
//! per job and allocating each string were most of `squeue`'s time (issue #6: `squeue` at
//! least 5x Slurm's).
//!
//! The two structs must stay field for field alike; `tests::view_and_info_encode_alike`
//! fails when one changes without the other, `tests::fields_cover_the_view_in_order` when
//! [`JobField`] misses one.

use crate::msg::{GresSpec, JobInfo, JobStateWire, NodeShape, Response, TimeLimitWire};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;
use std::fmt;
use std::ops::Deref;

/// A string that borrows when it can: from a job record when the controller encodes, from the
/// frame when a command decodes (postcard's `&str`), owned when computed (a hostlist, a reason).
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Str<'a>(pub Cow<'a, str>);

impl<'a> Str<'a> {
    /// Borrows `s`.
    pub fn b(s: &'a str) -> Str<'a> {
        Str(Cow::Borrowed(s))
    }
    /// The string, as a `&str`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
    /// An owned `String` (no copy when already owned).
    pub fn into_string(self) -> String {
        self.0.into_owned()
    }
}

impl Deref for Str<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Str<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Str<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<String> for Str<'_> {
    fn from(s: String) -> Self {
        Str(Cow::Owned(s))
    }
}

impl<'a> From<&'a str> for Str<'a> {
    fn from(s: &'a str) -> Self {
        Str(Cow::Borrowed(s))
    }
}

impl PartialEq<str> for Str<'_> {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for Str<'_> {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl Serialize for Str<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

fn own(s: Option<Str<'_>>) -> Option<String> {
    s.map(Str::into_string)
}

fn view(s: &Option<String>) -> Option<Str<'_>> {
    s.as_deref().map(Str::b)
}

/// [`GresSpec`] with borrowed strings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct GresView<'a> {
    /// GRES name (`gpu`).
    pub name: Str<'a>,
    /// Type (`h100`), if given.
    pub gpu_type: Option<Str<'a>>,
    /// Count per node.
    pub count: u64,
}

/// [`JobInfo`] with borrowed strings; the fields, their order and their meaning are
/// `JobInfo`'s (see there).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
#[allow(missing_docs)]
pub struct JobView<'a> {
    pub job_id: u64,
    pub array_job_id: Option<u64>,
    pub array_task_id: Option<u32>,
    pub array_task_str: Option<Str<'a>>,
    pub name: Str<'a>,
    pub user: Str<'a>,
    pub uid: u32,
    pub gid: u32,
    pub account: Str<'a>,
    pub partition: Str<'a>,
    pub qos: Str<'a>,
    pub state: Option<JobStateWire>,
    pub reason: Str<'a>,
    pub reason_detail: Option<Str<'a>>,
    pub priority: u64,
    pub nice: i32,
    pub submit_time: i64,
    pub eligible_time: Option<i64>,
    pub start_time: Option<i64>,
    pub end_time: Option<i64>,
    pub time_limit: Option<TimeLimitWire>,
    pub nodes: Str<'a>,
    pub sched_nodes: Str<'a>,
    pub num_nodes: u32,
    pub num_cpus: u32,
    pub num_tasks: u32,
    pub cpus_per_task: u32,
    pub mem_per_node_mib: u64,
    pub gpus: u32,
    pub gres: Vec<GresView<'a>>,
    pub gpu_alloc: Vec<(Str<'a>, u64)>,
    pub work_dir: Str<'a>,
    pub stdout: Option<Str<'a>>,
    pub stderr: Option<Str<'a>>,
    pub dependency: Option<Str<'a>>,
    pub exit_code: i32,
    pub exit_signal: i32,
    pub restarts: u32,
    pub requeue: bool,
    pub batch_host: Str<'a>,
    pub topology: Str<'a>,
    pub preemptible: bool,
    pub held: bool,
    pub exclusive: bool,
    pub required_nodes: Vec<Str<'a>>,
    pub excluded_nodes: Vec<Str<'a>>,
    pub comment: Option<Str<'a>>,
    pub preempt_count: u32,
    pub last_checkpoint_ack: Option<i64>,
    pub borrowed: bool,
    pub service_id: Option<u32>,
    pub command: Option<Str<'a>>,
    pub tres_per_job: Option<Str<'a>>,
    pub tres_per_task: Option<Str<'a>>,
    pub mem_per_cpu_mib: Option<u64>,
    pub tres_per_node: Option<Str<'a>>,
    pub tres_per_socket: Option<Str<'a>>,
    pub max_nodes: u32,
    pub cpu_ids: Vec<Str<'a>>,
    pub sockets_per_node: u32,
    pub mem_whole_node: bool,
    pub node_shape: NodeShape,
    pub mail_type: u16,
    pub mail_user: Option<Str<'a>>,
    pub job_flags: u16,
    pub time_min: Option<u32>,
    pub deadline: Option<i64>,
    pub features: Option<Str<'a>>,
    pub array_throttle: u32,
    pub admin_comment: Option<Str<'a>>,
    pub delay_boot_s: u32,
    pub derived_exit: (i32, i32),
}

impl<'a> JobView<'a> {
    /// The owned [`JobInfo`] (strings already owned are moved, borrowed ones copied).
    pub fn into_owned(self) -> JobInfo {
        JobInfo {
            job_id: self.job_id,
            array_job_id: self.array_job_id,
            array_task_id: self.array_task_id,
            array_task_str: own(self.array_task_str),
            name: self.name.into_string(),
            user: self.user.into_string(),
            uid: self.uid,
            gid: self.gid,
            account: self.account.into_string(),
            partition: self.partition.into_string(),
            qos: self.qos.into_string(),
            state: self.state,
            reason: self.reason.into_string(),
            reason_detail: own(self.reason_detail),
            priority: self.priority,
            nice: self.nice,
            submit_time: self.submit_time,
            eligible_time: self.eligible_time,
            start_time: self.start_time,
            end_time: self.end_time,
            time_limit: self.time_limit,
            nodes: self.nodes.into_string(),
            sched_nodes: self.sched_nodes.into_string(),
            num_nodes: self.num_nodes,
            num_cpus: self.num_cpus,
            num_tasks: self.num_tasks,
            cpus_per_task: self.cpus_per_task,
            mem_per_node_mib: self.mem_per_node_mib,
            gpus: self.gpus,
            gres: self
                .gres
                .into_iter()
                .map(|g| GresSpec { name: g.name.into_string(), gpu_type: own(g.gpu_type), count: g.count })
                .collect(),
            gpu_alloc: self.gpu_alloc.into_iter().map(|(n, m)| (n.into_string(), m)).collect(),
            work_dir: self.work_dir.into_string(),
            stdout: own(self.stdout),
            stderr: own(self.stderr),
            dependency: own(self.dependency),
            exit_code: self.exit_code,
            exit_signal: self.exit_signal,
            restarts: self.restarts,
            requeue: self.requeue,
            batch_host: self.batch_host.into_string(),
            topology: self.topology.into_string(),
            preemptible: self.preemptible,
            held: self.held,
            exclusive: self.exclusive,
            required_nodes: self.required_nodes.into_iter().map(Str::into_string).collect(),
            excluded_nodes: self.excluded_nodes.into_iter().map(Str::into_string).collect(),
            comment: own(self.comment),
            preempt_count: self.preempt_count,
            last_checkpoint_ack: self.last_checkpoint_ack,
            borrowed: self.borrowed,
            service_id: self.service_id,
            command: own(self.command),
            tres_per_job: own(self.tres_per_job),
            tres_per_task: own(self.tres_per_task),
            mem_per_cpu_mib: self.mem_per_cpu_mib,
            tres_per_node: own(self.tres_per_node),
            tres_per_socket: own(self.tres_per_socket),
            max_nodes: self.max_nodes,
            cpu_ids: self.cpu_ids.into_iter().map(Str::into_string).collect(),
            sockets_per_node: self.sockets_per_node,
            mem_whole_node: self.mem_whole_node,
            node_shape: self.node_shape,
            mail_type: self.mail_type,
            mail_user: own(self.mail_user),
            job_flags: self.job_flags,
            time_min: self.time_min,
            deadline: self.deadline,
            features: own(self.features),
            array_throttle: self.array_throttle,
            admin_comment: own(self.admin_comment),
            delay_boot_s: self.delay_boot_s,
            derived_exit: self.derived_exit,
        }
    }
}

impl<'a> From<&'a JobInfo> for JobView<'a> {
    fn from(j: &'a JobInfo) -> JobView<'a> {
        JobView {
            job_id: j.job_id,
            array_job_id: j.array_job_id,
            array_task_id: j.array_task_id,
            array_task_str: view(&j.array_task_str),
            name: Str::b(&j.name),
            user: Str::b(&j.user),
            uid: j.uid,
            gid: j.gid,
            account: Str::b(&j.account),
            partition: Str::b(&j.partition),
            qos: Str::b(&j.qos),
            state: j.state,
            reason: Str::b(&j.reason),
            reason_detail: view(&j.reason_detail),
            priority: j.priority,
            nice: j.nice,
            submit_time: j.submit_time,
            eligible_time: j.eligible_time,
            start_time: j.start_time,
            end_time: j.end_time,
            time_limit: j.time_limit,
            nodes: Str::b(&j.nodes),
            sched_nodes: Str::b(&j.sched_nodes),
            num_nodes: j.num_nodes,
            num_cpus: j.num_cpus,
            num_tasks: j.num_tasks,
            cpus_per_task: j.cpus_per_task,
            mem_per_node_mib: j.mem_per_node_mib,
            gpus: j.gpus,
            gres: j
                .gres
                .iter()
                .map(|g| GresView { name: Str::b(&g.name), gpu_type: view(&g.gpu_type), count: g.count })
                .collect(),
            gpu_alloc: j.gpu_alloc.iter().map(|(n, m)| (Str::b(n), *m)).collect(),
            work_dir: Str::b(&j.work_dir),
            stdout: view(&j.stdout),
            stderr: view(&j.stderr),
            dependency: view(&j.dependency),
            exit_code: j.exit_code,
            exit_signal: j.exit_signal,
            restarts: j.restarts,
            requeue: j.requeue,
            batch_host: Str::b(&j.batch_host),
            topology: Str::b(&j.topology),
            preemptible: j.preemptible,
            held: j.held,
            exclusive: j.exclusive,
            required_nodes: j.required_nodes.iter().map(|s| Str::b(s)).collect(),
            excluded_nodes: j.excluded_nodes.iter().map(|s| Str::b(s)).collect(),
            comment: view(&j.comment),
            preempt_count: j.preempt_count,
            last_checkpoint_ack: j.last_checkpoint_ack,
            borrowed: j.borrowed,
            service_id: j.service_id,
            command: view(&j.command),
            tres_per_job: view(&j.tres_per_job),
            tres_per_task: view(&j.tres_per_task),
            mem_per_cpu_mib: j.mem_per_cpu_mib,
            tres_per_node: view(&j.tres_per_node),
            tres_per_socket: view(&j.tres_per_socket),
            max_nodes: j.max_nodes,
            cpu_ids: j.cpu_ids.iter().map(|s| Str::b(s)).collect(),
            sockets_per_node: j.sockets_per_node,
            mem_whole_node: j.mem_whole_node,
            node_shape: j.node_shape,
            mail_type: j.mail_type,
            mail_user: view(&j.mail_user),
            job_flags: j.job_flags,
            time_min: j.time_min,
            deadline: j.deadline,
            features: view(&j.features),
            array_throttle: j.array_throttle,
            admin_comment: view(&j.admin_comment),
            delay_boot_s: j.delay_boot_s,
            derived_exit: j.derived_exit,
        }
    }
}

/// The postcard encoding of `Response::Jobs(jobs)`, written from views: the bytes
/// `postcard::to_allocvec(&Response::Jobs(owned jobs))` gives, without the owned jobs.
///
/// Errors: postcard's (none for these types in practice).
pub fn encode_jobs_response<'a, I>(jobs: I) -> Result<Vec<u8>, postcard::Error>
where
    I: ExactSizeIterator<Item = JobView<'a>>,
{
    // `Response::Jobs(vec![])` is the variant's index and a zero length: keep the index.
    let mut out = postcard::to_allocvec(&Response::Jobs(Vec::new()))?;
    out.pop();
    out = postcard::to_extend(&(jobs.len() as u64), out)?;
    out.reserve(jobs.len() * 160);
    for j in jobs {
        out = postcard::to_extend(&j, out)?;
    }
    Ok(out)
}

/// Reads the jobs of a [`QueueRows`] one after the other into a view of the caller's.
#[derive(Debug)]
pub struct QueueReader<'a> {
    fields: &'a [JobField],
    rest: &'a [u8],
    left: u64,
    failed: bool,
}

impl<'a> QueueReader<'a> {
    /// Decodes the next job's fields into `j` (its other fields are left as they are: a view
    /// that only ever receives these fields keeps them default). `None` after the last job;
    /// an error (then `None`) when the bytes are malformed, cut, or longer than the count.
    pub fn next_into(&mut self, j: &mut JobView<'a>) -> Option<Result<(), postcard::Error>> {
        if self.failed {
            return None;
        }
        if self.left == 0 {
            if self.rest.is_empty() {
                return None;
            }
            self.failed = true;
            return Some(Err(postcard::Error::DeserializeBadEncoding));
        }
        self.left -= 1;
        // One deserializer for the job's fields (not one per field).
        let mut de = postcard::Deserializer::from_bytes(self.rest);
        let read = || -> Result<&'a [u8], postcard::Error> {
            for f in self.fields {
                f.decode_from(j, &mut de)?;
            }
            de.finalize()
        };
        match read() {
            Ok(rest) => {
                self.rest = rest;
                Some(Ok(()))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }

    /// Jobs not read yet.
    pub fn remaining(&self) -> u64 {
        self.left
    }
}

/// Declares [`JobField`] (one variant per [`JobView`] field, in the struct's order) and the
/// per-field encoding and decoding a [`QueueQuery`] answer is made of.
macro_rules! job_fields {
    ($($variant:ident => $field:ident),* $(,)?) => {
        /// One field of a job ([`JobInfo`]/[`JobView`]), for queries that ask for some fields
        /// only (`squeue` asks for those its format, filters and sort keys read). Append-only
        /// on the wire, like every enum of the protocol.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[allow(missing_docs)]
        pub enum JobField {
            $($variant),*
        }

        impl JobField {
            /// Every field, in [`JobView`]'s order.
            pub const ALL: &'static [JobField] = &[$(JobField::$variant),*];

            /// Appends the postcard encoding of this field of `j` to `out`.
            ///
            /// Errors: postcard's.
            pub fn encode(self, j: &JobView<'_>, out: Vec<u8>) -> Result<Vec<u8>, postcard::Error> {
                postcard::to_extend(&Selected(j, &[self]), out)
            }

            /// Serializes this field of `j` as the next element of `t`.
            fn serialize_element<T: serde::ser::SerializeTuple>(self, j: &JobView<'_>, t: &mut T) -> Result<(), T::Error> {
                match self {
                    $(JobField::$variant => t.serialize_element(&j.$field)),*
                }
            }

            /// Decodes this field from the start of `bytes` into `j`; the bytes after it.
            ///
            /// Errors: postcard's, for a malformed or cut value.
            pub fn decode<'a>(self, j: &mut JobView<'a>, bytes: &'a [u8]) -> Result<&'a [u8], postcard::Error> {
                let mut de = postcard::Deserializer::from_bytes(bytes);
                self.decode_from(j, &mut de)?;
                de.finalize()
            }

            /// Decodes this field from `de` into `j` (a job's fields, one deserializer).
            fn decode_from<'a>(self, j: &mut JobView<'a>, de: &mut postcard::Deserializer<'a, postcard::de_flavors::Slice<'a>>) -> Result<(), postcard::Error> {
                match self {
                    $(JobField::$variant => j.$field = Deserialize::deserialize(&mut *de)?),*
                }
                Ok(())
            }
        }
    };
}

job_fields! {
    JobId => job_id, ArrayJobId => array_job_id, ArrayTaskId => array_task_id,
    ArrayTaskStr => array_task_str, Name => name, User => user, Uid => uid, Gid => gid,
    Account => account, Partition => partition, Qos => qos, State => state, Reason => reason,
    ReasonDetail => reason_detail, Priority => priority, Nice => nice, SubmitTime => submit_time,
    EligibleTime => eligible_time, StartTime => start_time, EndTime => end_time,
    TimeLimit => time_limit, Nodes => nodes, SchedNodes => sched_nodes, NumNodes => num_nodes,
    NumCpus => num_cpus, NumTasks => num_tasks, CpusPerTask => cpus_per_task,
    MemPerNodeMib => mem_per_node_mib, Gpus => gpus, Gres => gres, GpuAlloc => gpu_alloc,
    WorkDir => work_dir, Stdout => stdout, Stderr => stderr, Dependency => dependency,
    ExitCode => exit_code, ExitSignal => exit_signal, Restarts => restarts, Requeue => requeue,
    BatchHost => batch_host, Topology => topology, Preemptible => preemptible, Held => held,
    Exclusive => exclusive, RequiredNodes => required_nodes, ExcludedNodes => excluded_nodes,
    Comment => comment, PreemptCount => preempt_count, LastCheckpointAck => last_checkpoint_ack,
    Borrowed => borrowed, ServiceId => service_id, Command => command,
    TresPerJob => tres_per_job, TresPerTask => tres_per_task, MemPerCpuMib => mem_per_cpu_mib,
    TresPerNode => tres_per_node, TresPerSocket => tres_per_socket, MaxNodes => max_nodes,
    CpuIds => cpu_ids, SocketsPerNode => sockets_per_node, MemWholeNode => mem_whole_node,
    NodeShape => node_shape, MailType => mail_type, MailUser => mail_user, JobFlags => job_flags,
    TimeMin => time_min, Deadline => deadline, Features => features,
    ArrayThrottle => array_throttle, AdminComment => admin_comment,
    DelayBoot => delay_boot_s, DerivedExit => derived_exit,
}

/// A set of [`JobField`]s (a bit per field; 128 bits, as there are more than 64 fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FieldSet(u128);

// A field past the set's width would panic (shift overflow) at the first query.
const _: () = assert!(JobField::ALL.len() <= 128);

impl FieldSet {
    /// Every field.
    pub const ALL: FieldSet = FieldSet(u128::MAX);

    /// The set of `fields`.
    pub fn of(fields: &[JobField]) -> FieldSet {
        FieldSet(fields.iter().fold(0, |m, f| m | 1 << (*f as u32)))
    }

    /// Whether `f` is in the set.
    pub fn has(self, f: JobField) -> bool {
        self.0 & 1 << (f as u32) != 0
    }

    /// Whether any of `fs` is in the set.
    pub fn any(self, fs: &[JobField]) -> bool {
        fs.iter().any(|f| self.has(*f))
    }
}

/// Some fields of a job, serialized one after the other (postcard writes a tuple's elements
/// without a length), so that a job's fields take one serializer.
struct Selected<'j, 'a>(&'j JobView<'a>, &'j [JobField]);

impl Serialize for Selected<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeTuple;
        let mut t = s.serialize_tuple(self.1.len())?;
        for f in self.1 {
            f.serialize_element(self.0, &mut t)?;
        }
        t.end()
    }
}

/// A job query that names the fields it needs (`squeue`): the answer carries only those.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct QueueQuery {
    /// Which jobs.
    pub query: crate::msg::JobQuery,
    /// Which fields, in the order each job's are encoded.
    pub fields: Vec<JobField>,
}

/// The answer to a [`QueueQuery`]: `count` jobs, each the query's fields one after the
/// other in postcard's encoding ([`JobField::encode`]); read them with [`QueueRows::iter`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct QueueRows {
    /// Jobs.
    pub count: u64,
    /// Their fields.
    #[serde(with = "byte_blob")]
    pub bytes: Vec<u8>,
}

/// A `Vec<u8>` as one byte string (serde's default writes and reads it one `u8` at a time;
/// postcard encodes both the same: a length, then the bytes).
mod byte_blob {
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
                Ok(v.to_vec())
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
                Ok(v)
            }
        }
        d.deserialize_byte_buf(V)
    }
}

impl QueueRows {
    /// Encodes `jobs`' `fields`.
    ///
    /// Errors: postcard's.
    pub fn encode<'a>(fields: &[JobField], jobs: impl Iterator<Item = JobView<'a>>) -> Result<QueueRows, postcard::Error> {
        let (mut count, mut bytes) = (0u64, Vec::new());
        for j in jobs {
            bytes = postcard::to_extend(&Selected(&j, fields), bytes)?;
            count += 1;
        }
        Ok(QueueRows { count, bytes })
    }

    /// Appends `j`'s `fields` as one more job: [`QueueRows::encode`] one job at a time, for a
    /// caller that fills one view in place for every job (a view is a kilobyte: building and
    /// moving one per job was a visible part of `squeue` over 150,000 jobs).
    ///
    /// Errors: postcard's (none for these types in practice); the rows are then emptied.
    pub fn push(&mut self, fields: &[JobField], j: &JobView<'_>) -> Result<(), postcard::Error> {
        match postcard::to_extend(&Selected(j, fields), std::mem::take(&mut self.bytes)) {
            Ok(b) => {
                self.bytes = b;
                self.count += 1;
                Ok(())
            }
            Err(e) => {
                self.count = 0;
                Err(e)
            }
        }
    }

    /// The jobs, each as a view with `fields` set (the rest default), borrowing from `self`;
    /// the last item is an error when the bytes are malformed, cut, or longer than `count`
    /// jobs.
    pub fn iter<'a>(&'a self, fields: &'a [JobField]) -> impl Iterator<Item = Result<JobView<'a>, postcard::Error>> + 'a {
        let mut reader = self.reader(fields);
        std::iter::from_fn(move || {
            let mut j = JobView::default();
            reader.next_into(&mut j).map(|r| r.map(|()| j))
        })
    }

    /// A reader that decodes each job into the same view ([`QueueReader::next_into`]): no view
    /// is built, moved or dropped per job.
    pub fn reader<'a>(&'a self, fields: &'a [JobField]) -> QueueReader<'a> {
        QueueReader { fields, rest: &self.bytes, left: self.count, failed: false }
    }

    /// Decodes one job's `fields` from the start of `bytes`; the job and the bytes after it.
    ///
    /// Errors: postcard's.
    pub fn decode_one<'a>(fields: &[JobField], bytes: &'a [u8]) -> Result<(JobView<'a>, &'a [u8]), postcard::Error> {
        let mut j = JobView::default();
        let mut de = postcard::Deserializer::from_bytes(bytes);
        for f in fields {
            f.decode_from(&mut j, &mut de)?;
        }
        Ok((j, de.finalize()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn s() -> impl Strategy<Value = String> {
        "[a-z0-9_,\\[\\]-]{0,12}"
    }
    fn os() -> impl Strategy<Value = Option<String>> {
        proptest::option::of(s())
    }

    prop_compose! {
        fn job_info()(
            ids in (any::<u64>(), proptest::option::of(any::<u64>()), proptest::option::of(any::<u32>())),
            strs in proptest::collection::vec(s(), 11),
            opts in proptest::collection::vec(os(), 12),
            nums in proptest::collection::vec(any::<u32>(), 12),
            times in (any::<i64>(), proptest::option::of(any::<i64>()), proptest::option::of(any::<i64>()), proptest::option::of(any::<i64>())),
            flags in proptest::collection::vec(any::<bool>(), 6),
            gres in proptest::collection::vec((s(), os(), any::<u64>()), 0..3),
            alloc in proptest::collection::vec((s(), any::<u64>()), 0..3),
            req in proptest::collection::vec(s(), 0..3),
            exc in proptest::collection::vec(s(), 0..3),
            big in (any::<u64>(), any::<u64>(), proptest::option::of(any::<u64>()), proptest::option::of(any::<i64>())),
            limit in proptest::option::of(prop_oneof![Just(TimeLimitWire::Unlimited), any::<u32>().prop_map(TimeLimitWire::Minutes)]),
            state in proptest::option::of(prop_oneof![Just(JobStateWire::Pending), Just(JobStateWire::Running), Just(JobStateWire::Completed)]),
        ) -> JobInfo {
            JobInfo {
                job_id: ids.0, array_job_id: ids.1, array_task_id: ids.2,
                array_task_str: opts[0].clone(),
                name: strs[0].clone(), user: strs[1].clone(), uid: nums[0], gid: nums[1],
                account: strs[2].clone(), partition: strs[3].clone(), qos: strs[4].clone(),
                state, reason: strs[5].clone(), reason_detail: opts[1].clone(),
                priority: big.0, nice: nums[2] as i32, submit_time: times.0, eligible_time: times.1,
                start_time: times.2, end_time: times.3, time_limit: limit,
                nodes: strs[6].clone(), sched_nodes: strs[7].clone(),
                num_nodes: nums[3], num_cpus: nums[4], num_tasks: nums[5], cpus_per_task: nums[6],
                mem_per_node_mib: big.1, gpus: nums[7],
                gres: gres.into_iter().map(|(name, gpu_type, count)| GresSpec { name, gpu_type, count }).collect(),
                gpu_alloc: alloc, work_dir: strs[8].clone(), stdout: opts[2].clone(), stderr: opts[3].clone(),
                dependency: opts[4].clone(), exit_code: nums[8] as i32, exit_signal: nums[9] as i32,
                restarts: nums[10], requeue: flags[0], batch_host: strs[9].clone(), topology: strs[10].clone(),
                preemptible: flags[1], held: flags[2], exclusive: flags[3],
                required_nodes: req.clone(), excluded_nodes: exc, comment: opts[5].clone(),
                preempt_count: nums[11], last_checkpoint_ack: big.3, borrowed: flags[4],
                service_id: opts[6].as_ref().map(|s| s.len() as u32),
                command: opts[7].clone(), tres_per_job: opts[8].clone(), tres_per_task: opts[9].clone(),
                mem_per_cpu_mib: big.2.filter(|_| flags[5]),
                tres_per_node: opts[10].clone(), tres_per_socket: opts[11].clone(), max_nodes: nums[0] ^ nums[1],
                cpu_ids: req.iter().rev().cloned().collect(), sockets_per_node: nums[2] ^ nums[3],
                mem_whole_node: flags[0] ^ flags[5],
                node_shape: NodeShape {
                    ntasks_per_node: nums[4] ^ nums[5], ntasks_per_core: nums[6] ^ nums[7],
                    cores_per_socket: nums[8] ^ nums[9], threads_per_core: nums[10] ^ nums[11],
                    min_cpus: nums[0] ^ nums[2], tmp_disk_mib: big.0 ^ big.1,
                    oversubscribe: {
                        use crate::msg::Oversubscribe as O;
                        [O::Unset, O::No, O::Yes, O::User, O::Mcs][nums[3] as usize % 5]
                    },
                },
                mail_type: nums[1] as u16, mail_user: opts[3].clone(), job_flags: nums[2] as u16,
                time_min: big.2.map(|b| b as u32), deadline: big.3, features: opts[4].clone(),
                array_throttle: nums[5] ^ nums[6], admin_comment: opts[6].clone(),
                delay_boot_s: nums[7] ^ nums[8],
                derived_exit: (nums[9] as i32, nums[10] as i32),
            }
        }
    }

    proptest! {
        /// A view encodes exactly as the JobInfo it borrows, decodes borrowing, and gives the
        /// same JobInfo back: the two structs have the same fields in the same order.
        #[test]
        fn view_and_info_encode_alike(jobs in proptest::collection::vec(job_info(), 0..4)) {
            for j in &jobs {
                let a = postcard::to_allocvec(j).unwrap();
                let b = postcard::to_allocvec(&JobView::from(j)).unwrap();
                prop_assert_eq!(&a, &b);
                let v: JobView<'_> = postcard::from_bytes(&a).unwrap();
                prop_assert_eq!(&v.clone().into_owned(), j);
                prop_assert!(matches!(v.name.0, Cow::Borrowed(_)), "decoding borrows");
            }
            let whole = postcard::to_allocvec(&Response::Jobs(jobs.clone())).unwrap();
            let ours = encode_jobs_response(jobs.iter().map(JobView::from)).unwrap();
            prop_assert_eq!(&whole, &ours);
            let back = postcard::from_bytes::<Response>(&ours).unwrap();
            prop_assert_eq!(back, Response::Jobs(jobs));
        }
    }

    proptest! {
        /// Every field, in order, encodes a job exactly as the whole struct does: the field
        /// list is complete and in the struct's order. A subset decodes into a view with those
        /// fields set and the others default.
        #[test]
        fn fields_cover_the_view_in_order(j in job_info(), pick in proptest::collection::vec(any::<bool>(), JobField::ALL.len())) {
            let v = JobView::from(&j);
            let rows = QueueRows::encode(JobField::ALL, [v.clone()].into_iter()).unwrap();
            prop_assert_eq!(&rows.bytes, &postcard::to_allocvec(&v).unwrap());
            prop_assert_eq!(&QueueRows::decode_one(JobField::ALL, &rows.bytes).unwrap().0, &v);
            let some: Vec<JobField> = JobField::ALL.iter().zip(&pick).filter(|(_, p)| **p).map(|(f, _)| *f).collect();
            let set = FieldSet::of(&some);
            for f in JobField::ALL {
                prop_assert_eq!(set.has(*f), some.contains(f));
                prop_assert!(FieldSet::ALL.has(*f));
            }
            prop_assert!(JobField::ALL.len() <= 128, "a FieldSet holds 128 fields");
            let rows = QueueRows::encode(&some, [v.clone(), v.clone()].into_iter()).unwrap();
            // One job at a time into the same rows gives the same answer.
            let mut pushed = QueueRows::default();
            pushed.push(&some, &v).unwrap();
            pushed.push(&some, &v).unwrap();
            prop_assert_eq!(&pushed, &rows);
            let got: Vec<_> = rows.iter(&some).collect::<Result<Vec<_>, _>>().unwrap();
            prop_assert_eq!(got.len(), 2);
            let ones: Vec<Vec<u8>> = some.iter().map(|f| f.encode(&v, Vec::new()).unwrap()).collect();
            let mut want = JobView::default();
            for (f, one) in some.iter().zip(&ones) {
                prop_assert!(f.decode(&mut want, one).unwrap().is_empty());
            }
            for g in &got {
                prop_assert_eq!(g, &want);
            }
        }
    }

    /// The blob is encoded as serde's `Vec<u8>` is (so the wire format did not change when it
    /// became one byte string), and decodes back.
    #[test]
    fn queue_rows_bytes_are_one_blob() {
        #[derive(Serialize)]
        struct Plain {
            count: u64,
            bytes: Vec<u8>,
        }
        let rows = QueueRows { count: 2, bytes: (0..=255).collect() };
        let enc = postcard::to_allocvec(&rows).unwrap();
        assert_eq!(enc, postcard::to_allocvec(&Plain { count: 2, bytes: rows.bytes.clone() }).unwrap());
        assert_eq!(postcard::from_bytes::<QueueRows>(&enc).unwrap(), rows);
    }

    #[test]
    fn queue_rows_refuse_bad_bytes() {
        let v = JobView { job_id: 7, name: Str::b("x"), ..JobView::default() };
        let fields = [JobField::JobId, JobField::Name];
        let mut rows = QueueRows::encode(&fields, [v.clone()].into_iter()).unwrap();
        assert_eq!(rows.iter(&fields).count(), 1);
        rows.count = 2;
        assert!(rows.iter(&fields).last().unwrap().is_err(), "fewer jobs than counted");
        rows.count = 1;
        rows.bytes.push(1);
        assert!(rows.iter(&fields).last().unwrap().is_err(), "bytes left over");
        assert_eq!(rows.iter(&fields).count(), 2);
    }
}
