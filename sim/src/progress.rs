//! Progress reporting for long runs: the simulator counts units of work, the caller (the
//! `flotilla sim` command) draws them. Nothing here affects results.

/// Receives progress of a run. Implementations must be cheap: `advance` is called once per
/// simulated run (a seed of one policy on one list, or one load point).
pub trait Progress: Sync {
    /// Adds `n` units to the expected total.
    fn add_total(&self, n: u64);
    /// `n` units are done; `what` names the last one (for a message line).
    fn advance(&self, n: u64, what: &str);
}

/// Progress that goes nowhere (tests, library use).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn add_total(&self, _: u64) {}
    fn advance(&self, _: u64, _: &str) {}
}

/// Runs `work` over `items` on up to `jobs` threads, keeping the results in item order, so
/// the output never depends on `jobs` (each item must be independent and deterministic).
pub fn run_parallel<T: Sync, R: Send>(items: &[T], jobs: usize, work: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let jobs = jobs.max(1).min(items.len().max(1));
    if jobs == 1 {
        return items.iter().map(&work).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut out: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    let slots = std::sync::Mutex::new(&mut out);
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= items.len() {
                    break;
                }
                let r = work(&items[i]);
                slots.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
            });
        }
    });
    out.into_iter().map(|r| r.expect("every item ran")).collect()
}
