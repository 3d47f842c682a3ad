//! Flotilla's node daemon: it binds, it does not decide. It registers with its boot epoch,
//! launches batch scripts as their users inside a cgroup that confines them to their
//! allocation's GPUs and memory, signals them (SIGTERM → deadline → SIGKILL of the whole
//! tree), reports exits, and watches the GPUs.
//!
//! - [`confine`]: the confinement interface (cgroups v1/v2, fake).
//! - [`health`]: the GPU health interface (NVML, fake).

pub mod confine;
pub mod health;
