//! `scontrol`: Slurm's administrative tool (see [`flotilla_commands::scontrol`]). As Slurm
//! 22.05's does, it reads the configuration first and stops on a file that does not read
//! ([`flotilla_commands::common::conf_fatal`]).

fn main() {
    flotilla_commands::common::main_with(|args, io| {
        let prog = args.first().and_then(|a| a.rsplit('/').next()).unwrap_or("scontrol");
        match flotilla_commands::common::conf_fatal(prog, io) {
            Some(code) => code,
            None => flotilla_commands::scontrol::run(args, io),
        }
    })
}
