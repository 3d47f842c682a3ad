//! The `JOB_GRES=` block of `scontrol show job -d` for a running job (Slurm 22.05
//! `scontrol/info_job.c`, goldens `0106`–`0151`):
//!
//! ```text
//!    JOB_GRES=gpu:h100:16
//!      Nodes=gpu[01-02] CPU_IDs=0 Mem=1024 GRES=gpu:h100:8(IDX:0-7)
//! ```
//!
//! One `JOB_GRES` line with the job's GPUs in total, typed with the nodes' GPU model when they
//! have one; then one `Nodes=` line per run of consecutive nodes with the same CPU ids,
//! memory and GPUs (`GRES=gpu:h100:8(IDX:0-7)`), their names compressed as a hostlist. A job
//! without GPUs shows `JOB_GRES=(null)` and an empty `GRES=`.
//!
//! `CPU_IDs` are the CPU ids the controller picked for the job on the node as Slurm's
//! select/cons_tres does (`flotilla_core::cores`: 0121's `-n 4 --gpus-per-task=1` is
//! `0-1,32-33` on 2 x 32 cores); for a run the controller did not pick them (recovered from
//! an older one), the node's first `n` ids.

use crate::common::{gpu_name, ranges};

/// What one node of the allocation holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeGres {
    /// Node name.
    pub node: String,
    /// CPUs allocated on the node.
    pub cpus: u32,
    /// `CPU_IDs=` as the controller picked them (`0-1,32-33`), if it did.
    pub cpu_ids: Option<String>,
    /// Memory allocated on the node (MiB).
    pub mem_mib: u64,
    /// GPUs allocated (mask over the node's GPU indices).
    pub gpu_mask: u64,
    /// The node's GPU model (`h100`), if configured.
    pub gpu_type: Option<String>,
}

/// The lines (without the final newline) for the allocation `nodes`, in allocation order.
pub fn lines(nodes: &[NodeGres]) -> Vec<String> {
    let total: u32 = nodes.iter().map(|n| n.gpu_mask.count_ones()).sum();
    let ty = nodes.iter().find_map(|n| n.gpu_type.as_deref());
    let mut out = vec![if total == 0 {
        "   JOB_GRES=(null)".to_string()
    } else {
        format!("   JOB_GRES={}", gpu_name(ty, total))
    }];
    let detail = |n: &NodeGres| -> String {
        let first: Vec<u32> = (0..n.cpus.max(1)).collect();
        let cpus = n.cpu_ids.clone().unwrap_or_else(|| ranges(&first));
        let idx: Vec<u32> = (0..64).filter(|i| n.gpu_mask & (1u64 << i) != 0).collect();
        let gres = if idx.is_empty() {
            String::new()
        } else {
            format!("{}(IDX:{})", gpu_name(n.gpu_type.as_deref(), idx.len() as u32), ranges(&idx))
        };
        format!("CPU_IDs={cpus} Mem={} GRES={gres}", n.mem_mib)
    };
    let mut i = 0;
    while i < nodes.len() {
        let d = detail(&nodes[i]);
        let mut k = i;
        while k + 1 < nodes.len() && detail(&nodes[k + 1]) == d {
            k += 1;
        }
        let names: Vec<&str> = nodes[i..=k].iter().map(|n| n.node.as_str()).collect();
        out.push(format!("     Nodes={} {d}", flotilla_core::hostlist::compress(&names)));
        i = k + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(node: &str, cpus: u32, mem: u64, mask: u64) -> NodeGres {
        NodeGres {
            node: node.into(),
            cpus,
            cpu_ids: None,
            mem_mib: mem,
            gpu_mask: mask,
            gpu_type: Some("h100".into()),
        }
    }

    #[test]
    fn the_goldens() {
        // 0118 -N 2 --gres=gpu:8: one line for both nodes.
        assert_eq!(
            lines(&[n("gpu01", 1, 1024, 0xff), n("gpu02", 1, 1024, 0xff)]),
            ["   JOB_GRES=gpu:h100:16", "     Nodes=gpu[01-02] CPU_IDs=0 Mem=1024 GRES=gpu:h100:8(IDX:0-7)"]
        );
        // 0124 --gpus=12: 8 + 4, two lines.
        assert_eq!(
            lines(&[n("gpu01", 1, 1024, 0xff), n("gpu02", 1, 1024, 0xf)]),
            [
                "   JOB_GRES=gpu:h100:12",
                "     Nodes=gpu01 CPU_IDs=0 Mem=1024 GRES=gpu:h100:8(IDX:0-7)",
                "     Nodes=gpu02 CPU_IDs=0 Mem=1024 GRES=gpu:h100:4(IDX:0-3)"
            ]
        );
        // 0127 --mem=4G -c 2: no GPUs.
        assert_eq!(
            lines(&[n("gpu01", 2, 4096, 0)]),
            ["   JOB_GRES=(null)", "     Nodes=gpu01 CPU_IDs=0-1 Mem=4096 GRES="]
        );
        // Untyped nodes.
        let mut u = n("a1", 1, 10, 0b101);
        u.gpu_type = None;
        assert_eq!(lines(&[u]), ["   JOB_GRES=gpu:2", "     Nodes=a1 CPU_IDs=0 Mem=10 GRES=gpu:2(IDX:0,2)"]);
        assert_eq!(crate::common::ranges(&[0, 5, 7, 8, 9]), "0,5,7-9");
        // 0121 -n 4 --gpus-per-task=1: the CPU ids the controller picked.
        let mut p = n("gpu01", 4, 4096, 0xf);
        p.cpu_ids = Some("0-1,32-33".into());
        assert_eq!(lines(&[p])[1], "     Nodes=gpu01 CPU_IDs=0-1,32-33 Mem=4096 GRES=gpu:h100:4(IDX:0-3)");
    }
}
