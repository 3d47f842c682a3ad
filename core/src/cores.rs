//! Which cores of a node a job gets, as Slurm 22.05's `select/cons_tres` picks them with
//! `SelectTypeParameters=CR_Core[_Memory]` and the default task distribution: what `scontrol
//! show job -d` prints as `CPU_IDs=`.
//!
//! The scheduling core counts CPUs per node; this module only chooses *which* cores a count
//! is, given the cores other jobs hold on the node. The rule is Slurm's
//! `_cyclic_sync_core_bitmap` (`plugins/select/cons_common/dist_tasks.c`), for a job that
//! does not take whole nodes:
//!
//! - with several CPUs per task, each socket in turn (socket 0 first) gives its lowest free
//!   cores while it has room for whole tasks (its free CPUs rounded down to a multiple of the
//!   CPUs per task), so that a task's CPUs stay on one socket (`-c 4`: `0-3`; `-n 2 -c 24` on
//!   2 × 32 cores: `0-23,32-55`);
//! - what is still missing is taken one core per socket per round, the lowest free core of
//!   each socket in socket order (`-n 4`: `0-1,32-33`; `-c 40`: no socket holds a whole task,
//!   so all of it round-robin, `0-19,32-51`).
//!
//! A core gives `ThreadsPerCore` CPUs, and its CPU ids are `core × threads + thread` (Slurm
//! `job_info.c`, the `-d` detail). An `--exclusive` job gets every core of its nodes
//! (`dist_tasks` with `whole_node`). Goldens: 0121 and goldens-extra 0413, 0425-0430.

use serde::{Deserialize, Serialize};

/// A node's processors as `slurm.conf` describes them (`Sockets=`, `CoresPerSocket=`,
/// `ThreadsPerCore=`); cores are numbered socket by socket (`socket × cores_per_socket +
/// core`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoreLayout {
    /// Sockets (at least 1).
    pub sockets: u32,
    /// Cores per socket (at least 1).
    pub cores_per_socket: u32,
    /// Hardware threads per core (at least 1).
    pub threads_per_core: u32,
}

impl CoreLayout {
    /// A layout with every count at least 1.
    pub fn new(sockets: u32, cores_per_socket: u32, threads_per_core: u32) -> CoreLayout {
        CoreLayout {
            sockets: sockets.max(1),
            cores_per_socket: cores_per_socket.max(1),
            threads_per_core: threads_per_core.max(1),
        }
    }

    /// A node known only by its CPU count: one socket of `cpus` single-thread cores.
    pub fn flat(cpus: u32) -> CoreLayout {
        CoreLayout::new(1, cpus, 1)
    }

    /// Cores on the node.
    pub fn cores(&self) -> u32 {
        self.sockets.saturating_mul(self.cores_per_socket)
    }

    /// The CPU ids of `cores` (each core's threads, `core × threads + thread`), increasing
    /// when `cores` is.
    pub fn cpu_ids(&self, cores: &[u32]) -> Vec<u32> {
        let t = self.threads_per_core;
        cores
            .iter()
            .flat_map(|&c| (0..t).map(move |k| c * t + k))
            .collect()
    }
}

/// The cores (increasing) a job gets on a node of `layout` where the cores in `used` are held
/// by other jobs: `cpus` CPUs for tasks of `cpus_per_task` CPUs each, or every free core when
/// `whole_node`. Fewer cores than asked when the node has not that many free (the caller's
/// count came from the scheduling core, which never over-commits a node; a fractional CPU
/// share may).
pub fn pick_cores(
    layout: CoreLayout,
    used: &[u32],
    cpus: u32,
    cpus_per_task: u32,
    whole_node: bool,
) -> Vec<u32> {
    let total = layout.cores() as usize;
    let mut free = vec![true; total];
    for &c in used {
        if let Some(f) = free.get_mut(c as usize) {
            *f = false;
        }
    }
    if whole_node {
        return (0..total as u32).filter(|&c| free[c as usize]).collect();
    }
    let vpus = layout.threads_per_core;
    let cps = layout.cores_per_socket as usize;
    let sockets = layout.sockets as usize;
    // Next core to look at in each socket; the cores taken are the free ones below it.
    let mut next: Vec<usize> = (0..sockets).map(|s| s * cps).collect();
    let end = |s: usize| (s + 1) * cps;
    let mut taken = vec![false; total];
    let mut left = cpus;
    let cpt = cpus_per_task.max(1);
    if cpt > 1 {
        // Whole tasks per socket first, socket by socket.
        for (s, at) in next.iter_mut().enumerate() {
            if left == 0 {
                break;
            }
            let free_cpus = (s * cps..end(s)).filter(|&c| free[c]).count() as u32 * vpus;
            let mut room = free_cpus - free_cpus % cpt;
            while *at < end(s) && room > 0 && left > 0 {
                if free[*at] {
                    taken[*at] = true;
                    room = room.saturating_sub(vpus);
                    left = left.saturating_sub(vpus);
                }
                *at += 1;
            }
        }
    }
    // The rest round-robin over the sockets, one core of each per round.
    while left > 0 {
        let before = left;
        for (s, at) in next.iter_mut().enumerate() {
            if left == 0 {
                break;
            }
            while *at < end(s) && !free[*at] {
                *at += 1;
            }
            if *at == end(s) {
                continue;
            }
            taken[*at] = true;
            left = left.saturating_sub(vpus);
            *at += 1;
        }
        if left == before {
            break;
        }
    }
    (0..total as u32).filter(|&c| taken[c as usize]).collect()
}

/// Sorted ids as Slurm's bitmap ranges (`bit_fmt`): `0-1,32-33`, `5`, empty for none.
pub fn ranges(ids: &[u32]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
            j += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        if i == j {
            out.push_str(&ids[i].to_string());
        } else {
            out.push_str(&format!("{}-{}", ids[i], ids[j]));
        }
        i = j + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The reference node: 2 sockets × 32 cores, one thread each.
    const REF: CoreLayout = CoreLayout {
        sockets: 2,
        cores_per_socket: 32,
        threads_per_core: 1,
    };

    fn pick(used: &[u32], cpus: u32, cpt: u32) -> String {
        ranges(&REF.cpu_ids(&pick_cores(REF, used, cpus, cpt, false)))
    }

    #[test]
    fn as_the_reference_picked_them() {
        // goldens 0109 / 0121, goldens-extra 0413, 0425-0428.
        assert_eq!(pick(&[], 1, 1), "0");
        assert_eq!(pick(&[], 4, 1), "0-1,32-33");
        assert_eq!(pick(&[], 3, 1), "0-1,32");
        assert_eq!(pick(&[], 4, 4), "0-3");
        assert_eq!(pick(&[], 48, 24), "0-23,32-55");
        assert_eq!(pick(&[], 40, 40), "0-19,32-51");
        // On a partly used node: 0412 (core 0 held), 0429 (0-1,32 held), 0430 (0-29 held).
        assert_eq!(pick(&[0], 1, 1), "1");
        assert_eq!(pick(&[0, 1, 32], 2, 1), "2,33");
        assert_eq!(pick(&(0..30).collect::<Vec<_>>(), 4, 1), "30-33");
    }

    #[test]
    fn whole_node_and_threads() {
        assert_eq!(pick_cores(REF, &[], 1, 1, true).len(), 64);
        // Two threads per core: a core gives two CPUs, ids core*2 and core*2+1.
        let ht = CoreLayout::new(2, 4, 2);
        assert_eq!(
            ht.cpu_ids(&pick_cores(ht, &[], 4, 1, false)),
            vec![0, 1, 8, 9]
        );
        assert_eq!(
            ht.cpu_ids(&pick_cores(ht, &[], 3, 1, false)),
            vec![0, 1, 8, 9]
        );
        // Too few free cores: what there is.
        assert_eq!(
            pick_cores(CoreLayout::flat(4), &[0, 1, 2], 2, 1, false),
            vec![3]
        );
    }

    proptest! {
        /// The cores picked are free, distinct, in range, and give the CPUs asked for when
        /// the node has that many free.
        #[test]
        fn picks_free_cores_enough(sockets in 1u32..4, cps in 1u32..12, tpc in 1u32..3,
                                   used_bits in any::<u64>(), cpus in 0u32..40, cpt in 1u32..6) {
            let l = CoreLayout::new(sockets, cps, tpc);
            let used: Vec<u32> = (0..l.cores()).filter(|&c| used_bits >> (c % 64) & 1 == 1).collect();
            let got = pick_cores(l, &used, cpus, cpt, false);
            prop_assert!(got.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(got.iter().all(|c| *c < l.cores() && !used.contains(c)));
            let free = l.cores() - used.len() as u32;
            let want = cpus.div_ceil(tpc);
            prop_assert_eq!(got.len() as u32, want.min(free));
        }
    }
}
