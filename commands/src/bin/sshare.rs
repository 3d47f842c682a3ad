//! `sshare` (see [`flotilla_commands::sshare`]).

fn main() {
    flotilla_commands::common::main_with(flotilla_commands::sshare::run)
}
