//! Test helpers shared by the confinement tests (v1, v2, the job cgroups).

use super::bpf::{DeviceFilterAttach, Insn};
use super::{ConfineError, GpuDevice};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// `n` NVIDIA GPU device files (`/dev/nvidia<i>`, major 195, minor `i`).
pub(crate) fn gpus(n: u32) -> Vec<GpuDevice> {
    (0..n)
        .map(|i| GpuDevice {
            index: i,
            major: 195,
            minor: i,
            path: format!("/dev/nvidia{i}"),
        })
        .collect()
}

/// A device-filter attacher that records the programs it is asked to attach.
#[derive(Debug, Default)]
pub(crate) struct Recorded(pub(crate) Mutex<Vec<(PathBuf, Vec<Insn>)>>);

impl DeviceFilterAttach for Recorded {
    fn attach(&self, cgroup_dir: &Path, prog: &[Insn]) -> Result<(), ConfineError> {
        self.0.lock().unwrap().push((cgroup_dir.to_path_buf(), prog.to_vec()));
        Ok(())
    }
}
