//! Flotilla's policies behind the core's extension points: placement scorers, queue order and
//! priority, preemption order, health policy, and the baselines we compare against.
//!
//! Pure like `core`: no clock, no I/O. Registered statically by name and chosen with
//! slurm.conf keys (`SelectType`, `PriorityType`, `PreemptType`, ...). No dlopen.
