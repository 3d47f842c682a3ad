//! Fake [`HealthSource`]s driven by tests: [`FakeHealth`] (in-process: set the inventory and
//! queue events; each poll returns, and removes, what was queued) and [`FileHealth`] (across
//! processes: JSON lines appended to a file, for `slurmd --health fake:PATH`).

use super::{GpuInfo, HealthEvent, HealthSource};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

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

/// A health source fed through a file, for end-to-end tests of the daemon
/// (`slurmd --health fake:PATH`): a test appends [`HealthEvent`]s to `PATH` as JSON lines
/// (`{"Xid":{"gpu":3,"xid":79}}`); each poll returns the complete lines appended since the
/// previous one (a line without its newline yet waits for the next poll). A missing file is
/// no events; a line that is not an event is logged and skipped. Polls wait at most
/// `timeout_ms` (sleeping when nothing is new), like NVML's event wait.
#[derive(Debug)]
pub struct FileHealth {
    path: PathBuf,
    offset: u64,
    gpus: u32,
}

impl FileHealth {
    /// Reads `path` from its start; the inventory is `gpus` fake H100s.
    pub fn new(path: impl Into<PathBuf>, gpus: u32) -> FileHealth {
        FileHealth {
            path: path.into(),
            offset: 0,
            gpus,
        }
    }

    fn read_new(&mut self) -> Vec<HealthEvent> {
        let Ok(mut file) = File::open(&self.path) else {
            return Vec::new();
        };
        let mut buf = Vec::new();
        if file.seek(SeekFrom::Start(self.offset)).is_err() || file.read_to_end(&mut buf).is_err() {
            return Vec::new();
        }
        let Some(end) = buf.iter().rposition(|&b| b == b'\n') else {
            return Vec::new();
        };
        self.offset += end as u64 + 1;
        let mut events = Vec::new();
        for line in String::from_utf8_lossy(&buf[..end]).lines() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            match serde_json::from_str::<HealthEvent>(line) {
                Ok(event) => events.push(event),
                Err(e) => tracing::warn!("GPU health: {}: skipping {line:?}: {e}", self.path.display()),
            }
        }
        events
    }
}

impl HealthSource for FileHealth {
    fn kind(&self) -> &'static str {
        "fake"
    }

    fn inventory(&mut self) -> Vec<GpuInfo> {
        FakeHealth::with_gpus(self.gpus).inventory()
    }

    fn poll(&mut self, timeout_ms: u32) -> Vec<HealthEvent> {
        let events = self.read_new();
        if events.is_empty() && timeout_ms > 0 {
            std::thread::sleep(Duration::from_millis(u64::from(timeout_ms)));
            return self.read_new();
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_source_returns_complete_appended_lines() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("health.jsonl");
        let mut source = FileHealth::new(&path, 4);
        assert_eq!(source.kind(), "fake");
        assert_eq!(source.inventory().len(), 4);
        assert!(source.poll(0).is_empty(), "no file yet");
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&path).unwrap();
        writeln!(f, "{}", serde_json::to_string(&HealthEvent::Xid { gpu: 3, xid: 79 }).unwrap()).unwrap();
        writeln!(f, "not an event").unwrap();
        write!(f, "{{\"Temperature\":{{\"gpu\":1,").unwrap();
        f.flush().unwrap();
        assert_eq!(source.poll(0), vec![HealthEvent::Xid { gpu: 3, xid: 79 }]);
        assert!(source.poll(0).is_empty(), "a partial line waits");
        writeln!(f, "\"celsius\":90}}}}").unwrap();
        f.flush().unwrap();
        assert_eq!(source.poll(1), vec![HealthEvent::Temperature { gpu: 1, celsius: 90 }]);
        assert!(source.poll(1).is_empty());
    }

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
