//! Flotilla's wire protocol: length-prefixed postcard frames with a version handshake.
//!
//! Wire types here are not `core`'s domain types; conversions are explicit so that a node
//! daemon one release behind keeps working. Message enums are append-only.
