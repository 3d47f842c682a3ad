//! `slurmrestd`: Slurm's REST API (v0.0.38 as 22.05 serves it, and v0.0.41–v0.0.44) and the
//! fleet's own, over HTTP/1.1 on TCP and Unix sockets.
//!
//! Stateless: every answer comes from the controller over `proto` ([`ctl::CtlClient`]), so
//! several slurmrestd may run behind one load balancer. Who asks is the controller's
//! decision too: a JWT is forwarded for the controller to verify; `rest_auth/local` proxies
//! only for slurmrestd's own uid ([`auth`]). The JSON itself is `flotilla-rest`'s.

pub mod api;
pub mod app;
pub mod auth;
pub mod ctl;
pub mod reply;
pub mod server;
