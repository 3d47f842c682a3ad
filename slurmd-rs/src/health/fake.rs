//! A fake [`HealthSource`] driven by tests: they set the inventory and queue events; each
//! poll returns (and removes) what was queued.

use super::{GpuInfo, HealthEvent, HealthSource};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Debug, Default)]
struct State {
    inventory: Vec<GpuInfo>,
    queued: VecDeque<Vec<HealthEvent>>,
    polls: Vec<u32>,
}

/// A fake health source; clones share their state, so a test keeps a handle to drive the one
/// it gave the daemon.
#[derive(Debug, Clone, Default)]
pub struct FakeHealth {
    state: Arc<Mutex<State>>,
}

impl FakeHealth {
    /// A fake node with `gpus` GPUs named like H100s (`GPU-fake-<index>` UUIDs, 80 GiB each).
    pub fn with_gpus(gpus: u32) -> FakeHealth {
        let fake = FakeHealth::default();
        fake.set_inventory(
            (0..gpus)
                .map(|index| GpuInfo {
                    index,
                    name: "NVIDIA H100 80GB HBM3".into(),
                    uuid: format!("GPU-fake-{index}"),
                    memory_mib: 81_559,
                })
                .collect(),
        );
        fake
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("fake health lock")
    }

    /// Replaces the inventory.
    pub fn set_inventory(&self, gpus: Vec<GpuInfo>) {
        self.state().inventory = gpus;
    }

    /// Queues events for one poll (each call is the result of one later poll).
    pub fn push_poll(&self, events: Vec<HealthEvent>) {
        self.state().queued.push_back(events);
    }

    /// Queues one event for the next poll that has not been queued yet.
    pub fn push(&self, event: HealthEvent) {
        self.push_poll(vec![event]);
    }

    /// The `timeout_ms` of every poll so far.
    pub fn polls(&self) -> Vec<u32> {
        self.state().polls.clone()
    }
}

impl HealthSource for FakeHealth {
    fn kind(&self) -> &'static str {
        "fake"
    }

    fn inventory(&mut self) -> Vec<GpuInfo> {
        self.state().inventory.clone()
    }

    fn poll(&mut self, timeout_ms: u32) -> Vec<HealthEvent> {
        let mut state = self.state();
        state.polls.push(timeout_ms);
        state.queued.pop_front().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queued_events_come_out_one_poll_at_a_time() {
        let driver = FakeHealth::with_gpus(2);
        let mut source: Box<dyn HealthSource> = Box::new(driver.clone());
        assert_eq!(source.kind(), "fake");
        assert_eq!(source.inventory().len(), 2);
        assert_eq!(source.inventory()[1].uuid, "GPU-fake-1");
        driver.push(HealthEvent::Xid { gpu: 1, xid: 79 });
        driver.push_poll(vec![
            HealthEvent::Temperature {
                gpu: 0,
                celsius: 50,
            },
            HealthEvent::Temperature {
                gpu: 1,
                celsius: 51,
            },
        ]);
        assert_eq!(source.poll(10), vec![HealthEvent::Xid { gpu: 1, xid: 79 }]);
        assert_eq!(source.poll(20).len(), 2);
        assert!(source.poll(30).is_empty());
        assert_eq!(driver.polls(), vec![10, 20, 30]);
    }
}
