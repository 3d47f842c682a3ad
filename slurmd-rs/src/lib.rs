//! Flotilla's node daemon: it binds, it does not decide.
