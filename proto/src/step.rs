//! Job steps (`srun`, `salloc`): the messages that create a step, launch its tasks on the node
//! daemons, stream the tasks' I/O and exit statuses back to `srun`, and record the step's end.
//!
//! Shape (Slurm's): `srun` asks the controller to create a step ([`StepRequest`], answered with
//! a [`StepLayout`]: step id, nodes, task ids per node); the controller, the single writer,
//! records the step and sends each node daemon a [`LaunchStep`] on its node session; each node
//! daemon starts its tasks and connects back to `srun`'s I/O port, presents the step's I/O key
//! ([`StepIo::Hello`]) and streams [`StepIo`] frames (output, exits); `srun` sends [`SrunIo`]
//! frames (signals, standard input) the other way; at the end `srun` reports the step's
//! status ([`StepComplete`]).
//!
//! Every struct here is wire: new fields only at the end, enums append-only (postcard).
//! [`write_msg`]/[`read_msg`] frame the step I/O connection: a `u32` big-endian length and the
//! postcard body, bounded by [`MAX_IO_FRAME`].

use crate::msg::JobStateWire;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};

/// Largest step I/O frame (bytes of postcard body): 1 MiB.
pub const MAX_IO_FRAME: usize = 1 << 20;

/// `srun` asks for a step of a running job (`REQUEST_JOB_STEP_CREATE`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StepRequest {
    /// The job (allocation).
    pub job_id: u64,
    /// `-n`; `None`: the job's `--ntasks`, else `--ntasks-per-node` × nodes, else one per node.
    pub ntasks: Option<u32>,
    /// `-N`; `None`: as many nodes as the tasks need (all of `-w`, or all the job's nodes).
    pub nodes: Option<u32>,
    /// `--ntasks-per-node`.
    pub ntasks_per_node: Option<u32>,
    /// `-c` (CPUs per task; `None` = the job's).
    pub cpus_per_task: Option<u32>,
    /// `-w`, expanded node names (each must be a node of the job).
    pub nodelist: Vec<String>,
    /// `--gpus-per-task`: each task gets this many of its node's GPUs of the job, its own.
    pub gpus_per_task: Option<u32>,
    /// `--exclusive`: the step's CPUs (and GPUs) are its own (Slurm 22.05's default); implies
    /// [`StepRequest::exact`].
    pub exclusive: bool,
    /// `--overlap`: the step shares CPUs and GPUs with the other steps.
    pub overlap: bool,
    /// Step name (`-J`, else the program's base name).
    pub name: String,
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Environment of the tasks (srun's own, `--export=ALL`).
    pub environment: Vec<(String, String)>,
    /// Working directory (absolute).
    pub work_dir: String,
    /// `-o` pattern (`None`: output goes back to srun).
    pub stdout: Option<String>,
    /// `-e` pattern (`None`: as stdout).
    pub stderr: Option<String>,
    /// Address node daemons connect back to (`host:port`), for I/O and exits.
    pub srun_addr: String,
    /// Secret the node daemons present on that connection (16 random bytes).
    pub io_key: Vec<u8>,
    /// Uid of `srun` (must be the job's user unless admin).
    pub uid: u32,
    /// Gid of `srun`.
    pub gid: u32,
    /// The host `srun` runs on (its node name; appended): `scontrol show step`'s
    /// `SrunHost:Pid=`.
    #[serde(default)]
    pub srun_host: String,
    /// `srun`'s process id (appended; 0: not given).
    #[serde(default)]
    pub srun_pid: u32,
    /// `--exact` (appended; `-c` and `--exclusive` imply it): the step holds only its tasks'
    /// CPUs on each node. Without it (Slurm 22.05's `--whole` default, `SSF_WHOLE`) the step
    /// holds all of the job's CPUs on each of its nodes and takes no node where another step
    /// holds CPUs.
    #[serde(default)]
    pub exact: bool,
}

/// The controller's answer to [`StepRequest`] (`RESPONSE_JOB_STEP_CREATE`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StepLayout {
    /// Job.
    pub job_id: u64,
    /// Step id (`0`, `1`, ... per job).
    pub step_id: u32,
    /// Nodes of the step, in order (node index = `SLURM_NODEID`).
    pub nodes: Vec<String>,
    /// Global task ids on each node (block distribution: consecutive ids per node).
    pub tasks: Vec<Vec<u32>>,
    /// CPUs per task.
    pub cpus_per_task: u32,
}

impl StepLayout {
    /// Total tasks.
    pub fn ntasks(&self) -> u32 {
        self.tasks.iter().map(|t| t.len() as u32).sum()
    }
}

/// Controller → node daemon: start this node's tasks of a step.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LaunchStep {
    /// The step's layout (all nodes).
    pub layout: StepLayout,
    /// This node's index in `layout.nodes` (`SLURM_NODEID`).
    pub node_index: u32,
    /// GPUs of each of this node's tasks (bit `i` = GPU `i`); the job's GPUs on the node when
    /// `--gpus-per-task` was not given.
    pub task_gpus: Vec<u64>,
    /// Job name.
    pub job_name: String,
    /// The job's nodes (hostlist).
    pub job_nodes: String,
    /// CPUs of the job on each of its nodes, in its allocation order.
    pub job_cpus_per_node: Vec<u32>,
    /// Partition.
    pub partition: String,
    /// Array job id and task index when the job is an array task (`%A`, `%a`).
    pub array: Option<(u64, u32)>,
    /// User.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// User name.
    pub user: String,
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Environment (srun's).
    pub environment: Vec<(String, String)>,
    /// Working directory.
    pub work_dir: String,
    /// `-o` pattern.
    pub stdout: Option<String>,
    /// `-e` pattern.
    pub stderr: Option<String>,
    /// Where to connect for I/O.
    pub srun_addr: String,
    /// Key to present there.
    pub io_key: Vec<u8>,
}

/// The worst of a step's task ends `(exit code, signal)`, each ranked as a shell's status: its
/// exit code, or 128 + the signal that ended it. `srun` ranks every task of its step
/// so, each node daemon its own tasks ([`crate::StepUsage::exit`]) and the controller the
/// nodes' reports: the highest over the nodes is the highest over the tasks. `None` without
/// any.
pub fn worst_end(ends: impl IntoIterator<Item = (i32, i32)>) -> Option<(i32, i32)> {
    ends.into_iter().max_by_key(|&(c, s)| if s != 0 { 128 + s } else { c })
}

/// `srun` reports a step's end (`REQUEST_STEP_COMPLETE`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepComplete {
    /// Job.
    pub job_id: u64,
    /// Step.
    pub step_id: u32,
    /// Worst exit code of the tasks (0-255).
    pub exit_code: i32,
    /// Signal that ended the worst task (0: none).
    pub signal: i32,
}

/// A step as `squeue -s` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StepInfo {
    /// Job.
    pub job_id: u64,
    /// Step id.
    pub step_id: u32,
    /// Array job id and task, for array tasks (`squeue` prints `A_i.s`).
    pub array: Option<(u64, u32)>,
    /// Step name.
    pub name: String,
    /// State.
    pub state: Option<JobStateWire>,
    /// Partition.
    pub partition: String,
    /// User name.
    pub user: String,
    /// Start (s since epoch).
    pub start_time: i64,
    /// Nodes (hostlist).
    pub nodes: String,
    /// Tasks.
    pub ntasks: u32,
    /// The job's uid (appended).
    #[serde(default)]
    pub uid: u32,
    /// CPUs the step holds over its nodes (0 for an `--overlap` step; appended).
    #[serde(default)]
    pub cpus: u32,
    /// Memory the step counts (MiB; appended): its CPUs times the job's memory per CPU, or
    /// the job's memory per node times its nodes; 0 for an `--overlap` step.
    #[serde(default)]
    pub mem_mib: u64,
    /// Whole GPUs the step holds over its nodes (appended).
    #[serde(default)]
    pub gpus: u32,
    /// `srun`'s host and process id ([`StepRequest::srun_host`]; appended).
    #[serde(default)]
    pub srun_host: String,
    /// `srun`'s process id (appended).
    #[serde(default)]
    pub srun_pid: u32,
}

/// `salloc` (or `srun` outside an allocation) gives its allocation back
/// (`REQUEST_COMPLETE_JOB_ALLOCATION`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseAllocation {
    /// Job.
    pub job_id: u64,
    /// Exit code of the command `salloc` ran (0-255).
    pub exit_code: i32,
    /// Signal that ended it (0: none).
    pub signal: i32,
}

/// Node daemon → `srun` on a step I/O connection. Append-only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StepIo {
    /// First frame: which step and node, and the step's I/O key.
    Hello {
        /// Job.
        job_id: u64,
        /// Step.
        step_id: u32,
        /// Node index in the layout.
        node_index: u32,
        /// The key `srun` gave the controller.
        io_key: Vec<u8>,
    },
    /// Bytes a task wrote to its standard output.
    Stdout {
        /// Global task id.
        task: u32,
        /// Bytes.
        data: Vec<u8>,
    },
    /// Bytes a task wrote to its standard error.
    Stderr {
        /// Global task id.
        task: u32,
        /// Bytes.
        data: Vec<u8>,
    },
    /// A task ended.
    TaskExit {
        /// Global task id.
        task: u32,
        /// Exit code (0-255).
        exit_code: i32,
        /// Signal that ended it (0: none).
        signal: i32,
    },
    /// A task could not be started (the message is printed by srun as
    /// `srun: error: <node>: task <t>: <message>`).
    LaunchFailed {
        /// Global task id.
        task: u32,
        /// Why.
        message: String,
    },
    /// The step was cancelled (`scancel JOB.STEP`), before its tasks are killed: `srun`
    /// writes `notice` (the node's `*** STEP ... CANCELLED AT ... ***` line) to its standard
    /// error, and once for the step `srun: Job step aborted: Waiting up to WAIT_S seconds for
    /// job step to finish.`
    Cancelled {
        /// The node's notice line, with its newline.
        notice: Vec<u8>,
        /// Seconds.
        wait_s: u32,
    },
}

/// `srun` → node daemon on a step I/O connection. Append-only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SrunIo {
    /// Deliver this signal to every task of the step on the node.
    Signal(i32),
    /// Bytes for the tasks' standard input.
    Stdin(Vec<u8>),
    /// `srun`'s standard input ended: close the tasks' standard input.
    StdinEof,
}

/// Writes one step I/O frame: `u32` big-endian length, postcard body.
///
/// Errors: encoding failure or a body over [`MAX_IO_FRAME`] (`InvalidInput`), or the write's.
pub fn write_msg<W: Write, T: Serialize>(w: &mut W, msg: &T) -> std::io::Result<()> {
    let body = postcard::to_allocvec(msg).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
    if body.len() > MAX_IO_FRAME {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "step i/o frame too large"));
    }
    let mut buf = Vec::with_capacity(body.len() + 4);
    buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
    buf.extend_from_slice(&body);
    w.write_all(&buf)?;
    w.flush()
}

/// Reads one step I/O frame.
///
/// Errors: `UnexpectedEof` when the peer closed, `InvalidData` for a length over
/// [`MAX_IO_FRAME`] or an undecodable body, or the read's.
pub fn read_msg<R: Read, T: DeserializeOwned>(r: &mut R) -> std::io::Result<T> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_IO_FRAME {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "step i/o frame too large"));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    postcard::from_bytes(&body).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_end_ranks_as_a_shell_status() {
        assert_eq!(worst_end([]), None);
        assert_eq!(worst_end([(0, 0), (3, 0), (1, 0)]), Some((3, 0)));
        assert_eq!(worst_end([(127, 0), (0, 15), (0, 9), (2, 0)]), Some((0, 15)));
        assert_eq!(worst_end([(255, 0), (0, 15)]), Some((255, 0)));
        assert_eq!(worst_end([(0, 0)]), Some((0, 0)));
    }

    #[test]
    fn io_frames_round_trip_and_bound() {
        let mut buf = Vec::new();
        write_msg(&mut buf, &StepIo::Stdout { task: 3, data: b"hi\n".to_vec() }).unwrap();
        write_msg(&mut buf, &SrunIo::Signal(10)).unwrap();
        let mut r = &buf[..];
        assert_eq!(read_msg::<_, StepIo>(&mut r).unwrap(), StepIo::Stdout { task: 3, data: b"hi\n".to_vec() });
        assert_eq!(read_msg::<_, SrunIo>(&mut r).unwrap(), SrunIo::Signal(10));
        assert_eq!(read_msg::<_, SrunIo>(&mut r).unwrap_err().kind(), std::io::ErrorKind::UnexpectedEof);
        let huge = ((MAX_IO_FRAME + 1) as u32).to_be_bytes();
        let mut r = &huge[..];
        assert_eq!(read_msg::<_, SrunIo>(&mut r).unwrap_err().kind(), std::io::ErrorKind::InvalidData);
        let garbage = [0, 0, 0, 1, 0xff];
        assert_eq!(read_msg::<_, SrunIo>(&mut &garbage[..]).unwrap_err().kind(), std::io::ErrorKind::InvalidData);
    }

    #[test]
    fn layout_counts_tasks() {
        let l = StepLayout { tasks: vec![vec![0, 1], vec![2]], ..StepLayout::default() };
        assert_eq!(l.ntasks(), 3);
    }
}
