//! `salloc`: obtains an allocation and runs a command in it (see [`flotilla_commands::salloc`]).

fn main() {
    flotilla_commands::common::main_with(flotilla_commands::salloc::run)
}
