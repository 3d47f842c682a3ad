//! Fair-share usage survives a controller restart: what a turn's batch carries is what the
//! next start loads (`sql/0008_usage.sql`), and the restored usage decays from its saved time.

use flotilla_core::assoc::AssocId;
use flotilla_core::fairshare::{Usage, UsageConfig};
mod backends;

use flotilla_slurmctld::store::{Store, WriteBatch};

#[test]
fn usage_round_trips_through_the_store_and_keeps_decaying() {
    backends::on_both("usage_round_trips_through_the_store_and_keeps_decaying", check);
}

fn check(open: &dyn Fn() -> Store) {
    let mut usage = Usage::default();
    usage.raw.insert(AssocId(1), 3600.0 * 8.0);
    usage.raw.insert(AssocId(3), 1234.5);
    usage.last_update = Some(1_800_000_000);
    usage.last_reset = Some(1_799_000_000);
    {
        let mut store = open();
        assert_eq!(store.load_usage().unwrap(), Usage::default(), "nothing saved yet");
        let batch = WriteBatch { fair_usage: Some(usage.clone()), ..WriteBatch::default() };
        assert!(!batch.is_empty());
        store.commit(&batch, &|_| None).unwrap();
        // A later save replaces the whole set.
        let mut fewer = usage.clone();
        fewer.raw.remove(&AssocId(3));
        store.commit(&WriteBatch { fair_usage: Some(fewer), ..WriteBatch::default() }, &|_| None).unwrap();
    }
    let store = open();
    let mut back = store.load_usage().unwrap();
    let mut want = usage.clone();
    want.raw.remove(&AssocId(3));
    assert_eq!(back, want);
    // One half-life after the save, the restored usage is half.
    let config = UsageConfig { half_life_s: 3600, ..UsageConfig::default() };
    assert_eq!(back.advance(&config, 1_800_003_600), 3600);
    assert_eq!(back.get(AssocId(1)), 3600.0 * 4.0);
}
