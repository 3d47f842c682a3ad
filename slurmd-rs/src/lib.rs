//! Flotilla's node daemon: it binds, it does not decide. It registers with its boot epoch,
//! launches batch scripts as their users inside a cgroup that confines them to their
//! allocation's GPUs and memory, signals them (SIGTERM → deadline → SIGKILL of the whole
//! tree), reports exits, and watches the GPUs.
//!
//! - [`confine`]: confinement of a job to its GPUs and memory: cgroup v1 and v2 (BPF device
//!   filter), a fake, and detection of what the host offers. Root tests:
//!   `FLOTILLA_TEST_ROOT=1`.
//! - [`health`]: GPU inventory and health events: NVML (loaded at run time) and a fake. GPU
//!   tests: `FLOTILLA_TEST_GPU=1`.

pub mod confine;
pub mod health;
