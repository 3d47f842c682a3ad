//! `sackd`: vouches for local users (Slurm 23.11's sackd). Listens on a Unix socket, reads the
//! peer's uid/gid from the kernel (`SO_PEERCRED`) and returns a credential signed with the
//! cluster key, which a command then presents to the controller over TCP. Nothing else.
//!
//! Flags: `--socket PATH` (default `/run/slurm/sackd.sock`), `--key FILE` (default
//! `/etc/slurm/slurm.key`).

use anyhow::{bail, Context};
use flotilla_proto::{ClusterKey, Verifier};
use flotilla_slurmctld::server::{self, Shared};
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut socket = PathBuf::from("/run/slurm/sackd.sock");
    let mut key = PathBuf::from("/etc/slurm/slurm.key");
    while let Some(a) = args.next() {
        match a.as_str() {
            "--socket" => socket = args.next().context("--socket needs a value")?.into(),
            "--key" => key = args.next().context("--key needs a value")?.into(),
            "-D" => {}
            other => bail!("unrecognized option '{other}'"),
        }
    }
    // Colour only on a terminal: a log file (systemd, `2>>file`) gets plain text.
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())).init();
    let key = ClusterKey::load(&key).with_context(|| format!("cluster key {}", key.display()))?;
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async move {
        // Only local peers, identified by the kernel: per-uid caps, the hello's deadline and
        // small frames (sackd reads nothing larger than a request for a credential).
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let shared = Arc::new(Shared::new(
            None,
            Verifier::new(key, flotilla_proto::auth::DEFAULT_TTL_S, started),
            0,
            host,
            Arc::new(AtomicU64::new(0)),
            server::Limits::default(),
            flotilla_proto::frame::PREAUTH_MAX_FRAME,
        ));
        let listener = server::bind_unix(&socket).with_context(|| format!("binding {}", socket.display()))?;
        tracing::info!(socket = %socket.display(), "sackd listening");
        let (_tx, rx) = tokio::sync::watch::channel(false);
        let serve = server::serve_unix(listener, shared, rx);
        tokio::select! {
            _ = serve => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        Ok(())
    })
}
