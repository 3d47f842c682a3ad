//! Flotilla's discrete-event simulator: replays real GPU-cluster traces through the same
//! `core` as the controller, with a virtual clock.
