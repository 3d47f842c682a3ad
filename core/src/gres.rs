//! How a job's GPU options fit together, as Slurm 22.05 checks them (`src/common/gres.c`,
//! `_test_gres_cnt`, called by `gres_job_state_validate` in `sbatch` before it sends a job
//! and again in `slurmctld`): `--gpus` (per job), `--gres=gpu:N`/`--gpus-per-node` (per
//! node), `--gpus-per-socket` and `--gpus-per-task` must agree with each other and with the
//! job's node, task and socket counts, and fill in the counts they imply:
//!
//! - per job over per node gives the node count (`--gpus=4 --gres=gpu:2`: exactly 2 nodes);
//! - per node over per socket gives the sockets per node;
//! - per job over per task gives the task count, and tasks times per task the per-job count;
//! - per node over per task gives the tasks per node;
//! - a per-job count caps the node count (one GPU per node at least).
//!
//! Pure: the caller says what was asked and gets the shape back, or Slurm's message.

use std::fmt;

/// The GPU counts a job asks for (`None`: not asked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GresCounts {
    /// `--gpus` (`gres_per_job`).
    pub per_job: Option<u64>,
    /// `--gres=gpu:N` or `--gpus-per-node` (`gres_per_node`).
    pub per_node: Option<u64>,
    /// `--gpus-per-socket` (`gres_per_socket`).
    pub per_socket: Option<u64>,
    /// `--gpus-per-task` (`gres_per_task`).
    pub per_task: Option<u64>,
}

/// The job's shape as far as GPUs constrain it (`None`: not given); updated in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Shape {
    /// `-n`.
    pub num_tasks: Option<u32>,
    /// `-N`'s minimum.
    pub min_nodes: Option<u32>,
    /// `-N`'s maximum.
    pub max_nodes: Option<u32>,
    /// `--ntasks-per-node`.
    pub ntasks_per_node: Option<u32>,
    /// `--sockets-per-node`.
    pub sockets_per_node: Option<u32>,
}

/// Why Slurm refuses a combination: each is one of `_test_gres_cnt`'s messages (for GPUs),
/// which `sbatch` prints before "Invalid generic resource (gres) specification".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GresError {
    /// A per-node, per-task or per-socket count above the per-job count.
    JobBelowOthers,
    /// A per-task or per-socket count above the per-node count.
    NodeBelowTask,
    /// `--gpus-per-socket` without `--sockets-per-node`.
    SocketNeedsSockets,
    /// `--gpus` not a multiple of the per-node count.
    JobNotMultipleOfNode,
    /// The node count `--gpus` over the per-node count gives is outside `-N`.
    NodesOutOfRange {
        /// The node count implied.
        req: u32,
        /// `-N`'s minimum (Slurm's `NO_VAL`, 4294967294, when not given).
        min: u32,
        /// `-N`'s maximum (Slurm's `NO_VAL` when not given).
        max: u32,
    },
    /// The per-node count not a multiple of `--gpus-per-socket`.
    NodeNotMultipleOfSocket,
    /// `--sockets-per-node` differs from the per-node over per-socket count.
    SocketsDiffer,
    /// `--gpus` not a multiple of `--gpus-per-task`.
    JobNotMultipleOfTask,
    /// `-n` differs from `--gpus` over `--gpus-per-task`.
    TasksDiffer,
    /// `--gpus-per-task` without `--gpus` or `-n` (or a fixed `-N`).
    TaskNeedsTasks,
    /// The per-node count not a multiple of `--gpus-per-task`.
    NodeNotMultipleOfTask,
    /// `--ntasks-per-node` differs from the per-node over per-task count.
    TasksPerNodeDiffer,
    /// `--gpus` below `-N`.
    JobBelowNodes,
}

/// Slurm's `NO_VAL`, as its messages print an unset count.
const NO_VAL: u32 = 0xffff_fffe;

impl fmt::Display for GresError {
    /// The message as Slurm 22.05 logs it for GRES `gpu`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GresError::JobBelowOthers => f.write_str("Failed to ensure --gpus >= --gres=gpu/--gpus-per-node >= --gpus-per-socket"),
            GresError::NodeBelowTask => f.write_str("Failed to ensure --gpus >= --gpus-per-task"),
            GresError::SocketNeedsSockets => f.write_str("--gpus-per-socket option requires --sockets-per-node specification"),
            GresError::JobNotMultipleOfNode => {
                f.write_str("Failed to validate job spec, --gpus is not multiple of --gres=gpu/--gpus-per-node")
            }
            GresError::NodesOutOfRange { req, min, max } => write!(
                f,
                "Failed to validate job spec. Based on --gpu and --gres=gpu/--gpus-per-node required nodes ({req}) doesn't fall between min_nodes ({min}) and max_nodes ({max}) boundaries."
            ),
            GresError::NodeNotMultipleOfSocket => {
                f.write_str("Failed to validate job spec, --gres=gpu/--gpus-per-node not multiple of --gpus-per-socket.")
            }
            GresError::SocketsDiffer => f.write_str(
                "Failed to validate job spec. Based on --gres=gpu/--gpus-per-node and --gpus-per-socket required number of sockets differ from --sockets-per-node.",
            ),
            GresError::JobNotMultipleOfTask => f.write_str("Failed to validate job spec, --gpus not multiple of --gpus-per-task"),
            GresError::TasksDiffer => f.write_str(
                "Failed to validate job spec. Based on --gpus and --gpus-per-task number of requested tasks differ from -n/--ntasks.",
            ),
            GresError::TaskNeedsTasks => f.write_str(
                "Failed to validate job spec. --gpus-per-task used without either --gpus or -n/--ntasks is not allowed.",
            ),
            GresError::NodeNotMultipleOfTask => {
                f.write_str("Failed to validate job spec, --gres=gpu/--gpus-per-node not multiple of --gpus-per-task.")
            }
            GresError::TasksPerNodeDiffer => f.write_str(
                "Failed to validate job spec. Based on --gres=gpu/--gpus-per-node and --gpus-per-task requested number of tasks per node differ from --ntasks-per-node.",
            ),
            GresError::JobBelowNodes => f.write_str("Failed to validate job spec, --gpus < -N"),
        }
    }
}

/// Checks `g` against `shape` and fills in what the counts imply, in Slurm's order
/// (`gres.c` `_test_gres_cnt`, with `gres_job_state_validate`'s first step: a per-task count
/// with no `-n` on a fixed node count gives one task per node, or `--ntasks-per-node` each).
/// Returns the per-job count the per-task count implies when no `--gpus` was given (Slurm
/// stores it as the job's `gres_per_job`), else `g.per_job`.
pub fn test_gres_cnt(g: &GresCounts, shape: &mut Shape) -> Result<Option<u64>, GresError> {
    let mut per_job = g.per_job.filter(|&n| n > 0);
    let per_node = g.per_node.filter(|&n| n > 0);
    let per_socket = g.per_socket.filter(|&n| n > 0);
    let per_task = g.per_task.filter(|&n| n > 0);
    if per_task.is_some() && shape.num_tasks.is_none() {
        if let Some(n) = shape.min_nodes.filter(|&n| Some(n) == shape.max_nodes) {
            shape.num_tasks = Some(n.saturating_mul(shape.ntasks_per_node.unwrap_or(1)));
        }
    }
    let above = |a: Option<u64>, b: Option<u64>| matches!((a, b), (Some(a), Some(b)) if a > b);
    if per_job.is_some() && (above(per_node, per_job) || above(per_task, per_job) || above(per_socket, per_job)) {
        return Err(GresError::JobBelowOthers);
    }
    if per_node.is_some() && (above(per_task, per_node) || above(per_socket, per_node)) {
        return Err(GresError::NodeBelowTask);
    }
    if per_socket.is_some() && shape.sockets_per_node.is_none() {
        return Err(GresError::SocketNeedsSockets);
    }
    if let (Some(j), Some(n)) = (per_job, per_node) {
        if j % n != 0 {
            return Err(GresError::JobNotMultipleOfNode);
        }
        let req = u32::try_from(j / n).unwrap_or(u32::MAX);
        if shape.min_nodes.is_some_and(|m| req < m) || shape.max_nodes.is_some_and(|m| req > m) {
            return Err(GresError::NodesOutOfRange {
                req,
                min: shape.min_nodes.unwrap_or(NO_VAL),
                max: shape.max_nodes.unwrap_or(NO_VAL),
            });
        }
        shape.min_nodes = Some(req);
        shape.max_nodes = Some(req);
    }
    if let (Some(n), Some(s)) = (per_node, per_socket) {
        if n % s != 0 {
            return Err(GresError::NodeNotMultipleOfSocket);
        }
        let req = u32::try_from(n / s).unwrap_or(u32::MAX);
        match shape.sockets_per_node {
            None => shape.sockets_per_node = Some(req),
            Some(have) if have != req => return Err(GresError::SocketsDiffer),
            Some(_) => {}
        }
    }
    if let Some(t) = per_task {
        match per_job {
            Some(j) => {
                if j % t != 0 {
                    return Err(GresError::JobNotMultipleOfTask);
                }
                let req = u32::try_from(j / t).unwrap_or(u32::MAX);
                match shape.num_tasks {
                    None => shape.num_tasks = Some(req),
                    Some(have) if have != req => return Err(GresError::TasksDiffer),
                    Some(_) => {}
                }
            }
            None => match shape.num_tasks {
                Some(n) => per_job = Some(u64::from(n) * t),
                None => return Err(GresError::TaskNeedsTasks),
            },
        }
    }
    if let (Some(n), Some(t)) = (per_node, per_task) {
        if n % t != 0 {
            return Err(GresError::NodeNotMultipleOfTask);
        }
        let req = u32::try_from(n / t).unwrap_or(u32::MAX);
        match shape.ntasks_per_node {
            None | Some(0) => shape.ntasks_per_node = Some(req),
            Some(have) if have != req => return Err(GresError::TasksPerNodeDiffer),
            Some(_) => {}
        }
    }
    if let Some(j) = per_job {
        if shape.min_nodes.is_some_and(|m| j < u64::from(m)) {
            return Err(GresError::JobBelowNodes);
        }
        if let Some(m) = shape.max_nodes {
            if j < u64::from(m) {
                shape.max_nodes = Some(j as u32);
            }
        }
    }
    Ok(per_job)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run(g: GresCounts, mut s: Shape) -> Result<(Option<u64>, Shape), GresError> {
        test_gres_cnt(&g, &mut s).map(|j| (j, s))
    }

    #[test]
    fn per_job_over_per_node_fixes_the_node_count() {
        // goldens-extra 0407: --gpus=2 --gres=gpu:1 is exactly two nodes.
        let g = GresCounts { per_job: Some(2), per_node: Some(1), ..GresCounts::default() };
        let (_, s) = run(g, Shape::default()).unwrap();
        assert_eq!((s.min_nodes, s.max_nodes), (Some(2), Some(2)));
        let g = GresCounts { per_job: Some(3), per_node: Some(2), ..GresCounts::default() };
        assert_eq!(run(g, Shape::default()), Err(GresError::JobNotMultipleOfNode));
        let g = GresCounts { per_job: Some(4), per_node: Some(1), ..GresCounts::default() };
        let e = run(g, Shape { min_nodes: Some(2), max_nodes: Some(2), ..Shape::default() }).unwrap_err();
        assert_eq!(e, GresError::NodesOutOfRange { req: 4, min: 2, max: 2 });
        assert!(e.to_string().contains("required nodes (4) doesn't fall between min_nodes (2) and max_nodes (2)"));
        let g = GresCounts { per_job: Some(1), per_node: Some(2), ..GresCounts::default() };
        assert_eq!(run(g, Shape::default()), Err(GresError::JobBelowOthers));
    }

    #[test]
    fn per_task_needs_tasks_and_gives_the_per_job_count() {
        // goldens-extra 0406: -n 3 --gpus-per-task=1 is 3 GPUs.
        let g = GresCounts { per_task: Some(1), ..GresCounts::default() };
        assert_eq!(run(g, Shape { num_tasks: Some(3), ..Shape::default() }).unwrap().0, Some(3));
        assert_eq!(run(g, Shape::default()), Err(GresError::TaskNeedsTasks));
        // -N 2 (fixed) gives one task per node.
        let (j, s) = run(g, Shape { min_nodes: Some(2), max_nodes: Some(2), ..Shape::default() }).unwrap();
        assert_eq!((j, s.num_tasks), (Some(2), Some(2)));
        // --gpus=4 --gpus-per-task=2: two tasks; with -n 3 they differ.
        let g = GresCounts { per_job: Some(4), per_task: Some(2), ..GresCounts::default() };
        assert_eq!(run(g, Shape::default()).unwrap().1.num_tasks, Some(2));
        assert_eq!(run(g, Shape { num_tasks: Some(3), ..Shape::default() }), Err(GresError::TasksDiffer));
        // Per node over per task gives the tasks per node.
        let g = GresCounts { per_node: Some(4), per_task: Some(2), ..GresCounts::default() };
        let s = run(g, Shape { num_tasks: Some(4), ..Shape::default() }).unwrap().1;
        assert_eq!(s.ntasks_per_node, Some(2));
    }

    #[test]
    fn per_socket_needs_sockets() {
        // goldens-extra 0409: --gpus-per-socket=1 --sockets-per-node=2.
        let g = GresCounts { per_socket: Some(1), ..GresCounts::default() };
        assert!(run(g, Shape { sockets_per_node: Some(2), ..Shape::default() }).is_ok());
        assert_eq!(run(g, Shape::default()), Err(GresError::SocketNeedsSockets));
        let g = GresCounts { per_node: Some(4), per_socket: Some(2), ..GresCounts::default() };
        assert_eq!(run(g, Shape { sockets_per_node: Some(3), ..Shape::default() }), Err(GresError::SocketsDiffer));
        assert_eq!(run(g, Shape { sockets_per_node: Some(2), ..Shape::default() }).unwrap().1.sockets_per_node, Some(2));
    }

    proptest! {
        /// Whatever is accepted is consistent: per job = nodes × per node, per job = tasks ×
        /// per task, and the per-job count never below the node count.
        #[test]
        fn accepted_shapes_are_consistent(
            j in proptest::option::of(1u64..64), n in proptest::option::of(1u64..16), t in proptest::option::of(1u64..8),
            tasks in proptest::option::of(1u32..32), nodes in proptest::option::of(1u32..8),
        ) {
            let g = GresCounts { per_job: j, per_node: n, per_task: t, per_socket: None };
            let s = Shape { num_tasks: tasks, min_nodes: nodes, max_nodes: nodes, ..Shape::default() };
            if let Ok((pj, s)) = run(g, s) {
                if let (Some(j), Some(n)) = (j, n) {
                    prop_assert_eq!(s.min_nodes.map(u64::from), Some(j / n));
                    prop_assert_eq!(j % n, 0);
                }
                if let (Some(pj), Some(t)) = (pj, t) {
                    prop_assert_eq!(Some(pj), s.num_tasks.map(|k| u64::from(k) * t));
                }
                if let (Some(pj), Some(m)) = (pj, s.min_nodes) {
                    prop_assert!(pj >= u64::from(m));
                }
            }
        }
    }
}
