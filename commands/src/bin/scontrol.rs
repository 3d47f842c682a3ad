//! `scontrol`: Slurm's administrative tool (see [`flotilla_commands::scontrol`]).

use std::io::Write;

fn main() {
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut err = stderr.lock();
    let getenv = |k: &str| std::env::var_os(k).map(|v| v.to_string_lossy().into_owned());
    let code = flotilla_commands::scontrol::run(
        &args,
        &mut flotilla_commands::scontrol::Io {
            out: &mut out,
            err: &mut err,
            env: &getenv,
        },
    );
    let _ = out.flush();
    drop(out);
    std::process::exit(code);
}
