//! Flotilla's controller daemon: the single writer of the allocation table, driving `core`.
