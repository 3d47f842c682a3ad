//! The cgroup v2 device filter: a `BPF_PROG_TYPE_CGROUP_DEVICE` program assembled here (no
//! compiler, no C, stable Rust) and attached to a job's cgroup with `bpf(2)`.
//!
//! The program allows every device except the GPU character devices outside the job's mask
//! (as Slurm's task/cgroup constrains only GRES devices). The kernel runs it on every
//! `open(2)`/`mknod(2)` of a device node with a `struct bpf_cgroup_dev_ctx`:
//!
//! ```text
//! u32 access_type   (access << 16) | type    type: 1 block, 2 char; access: 1 mknod, 2 read, 4 write
//! u32 major
//! u32 minor
//! ```
//!
//! and refuses the access with `EPERM` when it returns 0. Program, for denied devices
//! `(M1, m1) … (Mn, mn)`:
//!
//! ```text
//! 0: r2 = *(u32 *)(r1 + 0)      access_type
//! 1: r2 &= 0xffff               device type
//! 2: r3 = *(u32 *)(r1 + 4)      major
//! 3: r4 = *(u32 *)(r1 + 8)      minor
//! 4: if r2 != 2 goto allow      not a char device
//!    for each denied (M, m):
//!      if r3 != M goto +3
//!      if r4 != m goto +2
//!      r0 = 0
//!      exit                     denied GPU: EPERM
//! allow:
//!    r0 = 1
//!    exit
//! ```

use super::ConfineError;
use std::fmt;
use std::path::Path;

/// One eBPF instruction (`struct bpf_insn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    /// Opcode.
    pub code: u8,
    /// Destination register (4 bits).
    pub dst: u8,
    /// Source register (4 bits).
    pub src: u8,
    /// Signed offset (memory access or jump, in instructions after the next one).
    pub off: i16,
    /// Signed immediate.
    pub imm: i32,
}

/// Opcodes used by the device filter (linux/bpf_common.h, linux/bpf.h).
pub mod op {
    /// `BPF_LDX | BPF_MEM | BPF_W`: `dst = *(u32 *)(src + off)`.
    pub const LDX_W: u8 = 0x61; // 0x01 | 0x60 | 0x00
    /// `BPF_ALU64 | BPF_AND | BPF_K`: `dst &= imm`.
    pub const AND64_K: u8 = 0x57; // 0x07 | 0x50 | 0x00
    /// `BPF_ALU64 | BPF_MOV | BPF_K`: `dst = imm`.
    pub const MOV64_K: u8 = 0xb7; // 0x07 | 0xb0 | 0x00
    /// `BPF_JMP | BPF_JNE | BPF_K`: `if dst != imm goto pc + 1 + off`.
    pub const JNE_K: u8 = 0x55; // 0x05 | 0x50 | 0x00
    /// `BPF_JMP | BPF_EXIT`: return `r0`.
    pub const EXIT: u8 = 0x95; // 0x05 | 0x90
}

/// `BPF_DEVCG_DEV_CHAR`.
pub const DEV_CHAR: i32 = 2;

impl Insn {
    const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            dst,
            src,
            off,
            imm,
        }
    }

    /// The kernel's 8-byte encoding (little-endian hosts: `dst` in the low nibble).
    pub fn encode(&self) -> [u8; 8] {
        let off = self.off.to_le_bytes();
        let imm = self.imm.to_le_bytes();
        [
            self.code,
            (self.src << 4) | (self.dst & 0x0f),
            off[0],
            off[1],
            imm[0],
            imm[1],
            imm[2],
            imm[3],
        ]
    }
}

impl fmt::Display for Insn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (d, s, off, imm) = (self.dst, self.src, self.off, self.imm);
        match self.code {
            op::LDX_W => write!(f, "r{d} = *(u32 *)(r{s} + {off})"),
            op::AND64_K => write!(f, "r{d} &= {imm:#x}"),
            op::MOV64_K => write!(f, "r{d} = {imm}"),
            op::JNE_K => write!(f, "if r{d} != {imm} goto {off:+}"),
            op::EXIT => write!(f, "exit"),
            code => write!(f, "op {code:#04x} dst r{d} src r{s} off {off} imm {imm}"),
        }
    }
}

fn imm(value: u32) -> i32 {
    // Linux device numbers are 12-bit majors and 20-bit minors.
    i32::try_from(value).expect("device major/minor numbers fit in 20 bits")
}

/// The device filter denying the character devices `denied` (`(major, minor)` pairs) and
/// allowing everything else.
pub fn device_filter(denied: &[(u32, u32)]) -> Vec<Insn> {
    let per_device = 4;
    let to_allow = i16::try_from(per_device * denied.len()).expect("fewer than 8192 GPUs");
    let mut prog = vec![
        Insn::new(op::LDX_W, 2, 1, 0, 0),
        Insn::new(op::AND64_K, 2, 0, 0, 0xffff),
        Insn::new(op::LDX_W, 3, 1, 4, 0),
        Insn::new(op::LDX_W, 4, 1, 8, 0),
        Insn::new(op::JNE_K, 2, 0, to_allow, DEV_CHAR),
    ];
    for &(major, minor) in denied {
        prog.extend([
            Insn::new(op::JNE_K, 3, 0, 3, imm(major)),
            Insn::new(op::JNE_K, 4, 0, 2, imm(minor)),
            Insn::new(op::MOV64_K, 0, 0, 0, 0),
            Insn::new(op::EXIT, 0, 0, 0, 0),
        ]);
    }
    prog.extend([
        Insn::new(op::MOV64_K, 0, 0, 0, 1),
        Insn::new(op::EXIT, 0, 0, 0, 0),
    ]);
    prog
}

/// The program's bytes, as `bpf(BPF_PROG_LOAD)` and interpreters take them.
pub fn encode(prog: &[Insn]) -> Vec<u8> {
    prog.iter().flat_map(|insn| insn.encode()).collect()
}

/// One line per instruction, numbered (for logs and reports).
pub fn disassemble(prog: &[Insn]) -> String {
    prog.iter()
        .enumerate()
        .map(|(i, insn)| format!("{i:3}: {insn}\n"))
        .collect()
}

/// The context the kernel passes a device program: `struct bpf_cgroup_dev_ctx`.
pub fn dev_ctx(dev_type: u32, access: u32, major: u32, minor: u32) -> [u8; 12] {
    let mut ctx = [0u8; 12];
    ctx[0..4].copy_from_slice(&((access << 16) | dev_type).to_ne_bytes());
    ctx[4..8].copy_from_slice(&major.to_ne_bytes());
    ctx[8..12].copy_from_slice(&minor.to_ne_bytes());
    ctx
}

/// Attaches device programs to a cgroup v2 directory. The real one is [`BpfAttach`]; tests of
/// the v2 cgroup on a fake cgroupfs record the programs instead.
pub trait DeviceFilterAttach: fmt::Debug + Send + Sync {
    /// Loads `prog` and attaches it to the cgroup at `cgroup_dir`.
    fn attach(&self, cgroup_dir: &Path, prog: &[Insn]) -> Result<(), ConfineError>;
}

/// The real attachment: `bpf(BPF_PROG_LOAD)` then `bpf(BPF_PROG_ATTACH, BPF_CGROUP_DEVICE,
/// BPF_F_ALLOW_MULTI)` on the cgroup's directory fd. A cgroup that already has a device program
/// attached directly (the daemon re-opening a job's cgroup after a restart) is left as it is.
#[derive(Debug, Clone, Copy, Default)]
pub struct BpfAttach;

impl DeviceFilterAttach for BpfAttach {
    fn attach(&self, cgroup_dir: &Path, prog: &[Insn]) -> Result<(), ConfineError> {
        sys::attach(cgroup_dir, prog)
    }
}

/// The raw `bpf(2)` calls. `union bpf_attr` prefixes are laid out by hand (offsets from
/// linux/bpf.h); the kernel accepts a shorter attr than its own as long as what it does not
/// know is absent.
mod sys {
    use super::{encode, ConfineError, Insn};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::path::Path;

    const BPF_PROG_LOAD: libc::c_long = 5;
    const BPF_PROG_ATTACH: libc::c_long = 8;
    const BPF_PROG_QUERY: libc::c_long = 16;
    const BPF_PROG_TYPE_CGROUP_DEVICE: u32 = 15;
    const BPF_CGROUP_DEVICE: u32 = 6;
    const BPF_F_ALLOW_MULTI: u32 = 2;

    fn put_u32(buf: &mut [u8], at: usize, v: u32) {
        buf[at..at + 4].copy_from_slice(&v.to_ne_bytes());
    }

    fn put_u64(buf: &mut [u8], at: usize, v: u64) {
        buf[at..at + 8].copy_from_slice(&v.to_ne_bytes());
    }

    /// `bpf(cmd, attr, size)`.
    #[allow(unsafe_code)]
    fn bpf(cmd: libc::c_long, attr: &mut [u8]) -> std::io::Result<libc::c_long> {
        // SAFETY: `attr` is a live, writable buffer of `attr.len()` bytes laid out as the
        // prefix of `union bpf_attr` for `cmd`; every pointer stored in it refers to memory
        // the caller keeps alive across this call. The kernel reads and writes at most
        // `attr.len()` bytes of it.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                cmd,
                attr.as_mut_ptr(),
                attr.len() as libc::c_long,
            )
        };
        if rc < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(rc)
        }
    }

    fn err(op: &'static str, path: &Path, source: std::io::Error, log: String) -> ConfineError {
        ConfineError::Bpf {
            op,
            path: path.display().to_string(),
            source,
            log,
        }
    }

    /// Loads the program; on refusal, loads it again with the verifier's log for the error.
    fn load(path: &Path, prog: &[Insn]) -> Result<OwnedFd, ConfineError> {
        let insns = encode(prog);
        let license = b"Apache-2.0\0";
        let mut log = vec![0u8; 64 * 1024];
        let attr_for = |log_level: u32, log: &mut [u8]| {
            let mut attr = [0u8; 72];
            put_u32(&mut attr, 0, BPF_PROG_TYPE_CGROUP_DEVICE);
            put_u32(&mut attr, 4, prog.len() as u32);
            put_u64(&mut attr, 8, insns.as_ptr() as u64);
            put_u64(&mut attr, 16, license.as_ptr() as u64);
            put_u32(&mut attr, 24, log_level);
            if log_level > 0 {
                put_u32(&mut attr, 28, log.len() as u32);
                put_u64(&mut attr, 32, log.as_mut_ptr() as u64);
            }
            attr[48..56].copy_from_slice(b"flotilla"); // prog_name, NUL-padded
            attr
        };
        let mut attr = attr_for(0, &mut log);
        match bpf(BPF_PROG_LOAD, &mut attr) {
            Ok(fd) => Ok(owned(fd)),
            Err(first) => {
                let mut attr = attr_for(1, &mut log);
                let text = match bpf(BPF_PROG_LOAD, &mut attr) {
                    Ok(fd) => return Ok(owned(fd)),
                    Err(_) => {
                        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                        String::from_utf8_lossy(&log[..end])
                            .trim()
                            .replace('\n', "; ")
                    }
                };
                Err(err("BPF_PROG_LOAD", path, first, text))
            }
        }
    }

    #[allow(unsafe_code)]
    fn owned(fd: libc::c_long) -> OwnedFd {
        // SAFETY: `fd` was just returned by a successful bpf(2) call; nothing else owns it.
        unsafe { OwnedFd::from_raw_fd(fd as i32) }
    }

    /// Number of device programs attached directly to the cgroup.
    fn attached(path: &Path, cgroup: &std::fs::File) -> Result<u32, ConfineError> {
        let mut attr = [0u8; 32];
        put_u32(&mut attr, 0, cgroup.as_raw_fd() as u32);
        put_u32(&mut attr, 4, BPF_CGROUP_DEVICE);
        bpf(BPF_PROG_QUERY, &mut attr)
            .map_err(|e| err("BPF_PROG_QUERY", path, e, String::new()))?;
        Ok(u32::from_ne_bytes(
            attr[24..28].try_into().expect("4 bytes"),
        ))
    }

    pub(super) fn attach(path: &Path, prog: &[Insn]) -> Result<(), ConfineError> {
        let cgroup =
            std::fs::File::open(path).map_err(|e| super::super::fsutil::io_err(path, e))?;
        if attached(path, &cgroup)? > 0 {
            return Ok(());
        }
        let prog_fd = load(path, prog)?;
        let mut attr = [0u8; 20];
        put_u32(&mut attr, 0, cgroup.as_raw_fd() as u32);
        put_u32(&mut attr, 4, prog_fd.as_raw_fd() as u32);
        put_u32(&mut attr, 8, BPF_CGROUP_DEVICE);
        put_u32(&mut attr, 12, BPF_F_ALLOW_MULTI);
        bpf(BPF_PROG_ATTACH, &mut attr)
            .map_err(|e| err("BPF_PROG_ATTACH", path, e, String::new()))?;
        // The attachment holds its own reference to the program: closing our fd is fine.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCK: u32 = 1;
    const CHAR: u32 = 2;
    const MKNOD: u32 = 1;
    const READ: u32 = 2;
    const WRITE: u32 = 4;

    /// Runs `prog` in rbpf's interpreter (an implementation independent of this encoder) on
    /// the context of one device access; true = allowed.
    fn verdict(prog: &[Insn], dev_type: u32, access: u32, major: u32, minor: u32) -> bool {
        let bytes = encode(prog);
        let vm = rbpf::EbpfVmRaw::new(Some(&bytes)).expect("rbpf accepts the program");
        let mut ctx = dev_ctx(dev_type, access, major, minor);
        match vm.execute_program(&mut ctx).expect("program runs") {
            0 => false,
            1 => true,
            other => panic!("device programs return 0 or 1, got {other}"),
        }
    }

    /// 8 GPUs `/dev/nvidia0..7` = (195, 0..7); the job holds GPUs 1 and 3.
    fn job_filter() -> Vec<Insn> {
        let denied: Vec<(u32, u32)> = [0, 2, 4, 5, 6, 7].iter().map(|&m| (195, m)).collect();
        device_filter(&denied)
    }

    #[test]
    fn gpus_outside_the_mask_are_denied_for_every_access() {
        let prog = job_filter();
        for minor in [0, 2, 4, 5, 6, 7] {
            for access in [READ, WRITE, READ | WRITE, MKNOD, READ | WRITE | MKNOD] {
                assert!(
                    !verdict(&prog, CHAR, access, 195, minor),
                    "195:{minor} access {access}"
                );
            }
        }
    }

    #[test]
    fn gpus_of_the_mask_are_allowed() {
        let prog = job_filter();
        for minor in [1, 3] {
            assert!(verdict(&prog, CHAR, READ | WRITE, 195, minor));
        }
    }

    #[test]
    fn other_devices_are_allowed() {
        let prog = job_filter();
        // nvidiactl (195:255), nvidia-uvm (e.g. 508:0), /dev/null (1:3), /dev/nvme0n1 (259:0).
        assert!(verdict(&prog, CHAR, READ | WRITE, 195, 255));
        assert!(verdict(&prog, CHAR, READ | WRITE, 508, 0));
        assert!(verdict(&prog, CHAR, READ | WRITE, 1, 3));
        assert!(verdict(&prog, BLOCK, READ, 259, 0));
        // A block device with a GPU's numbers is not a GPU.
        assert!(verdict(&prog, BLOCK, READ | WRITE, 195, 0));
        // Same minor, other major.
        assert!(verdict(&prog, CHAR, READ, 196, 0));
    }

    #[test]
    fn an_empty_deny_list_allows_everything() {
        let prog = device_filter(&[]);
        assert!(verdict(&prog, CHAR, READ, 195, 0));
        assert!(verdict(&prog, BLOCK, WRITE, 8, 0));
    }

    #[test]
    fn program_text_and_encoding() {
        let prog = device_filter(&[(195, 0)]);
        assert_eq!(
            disassemble(&prog),
            "  0: r2 = *(u32 *)(r1 + 0)\n  1: r2 &= 0xffff\n  2: r3 = *(u32 *)(r1 + 4)\n  \
             3: r4 = *(u32 *)(r1 + 8)\n  4: if r2 != 2 goto +4\n  5: if r3 != 195 goto +3\n  \
             6: if r4 != 0 goto +2\n  7: r0 = 0\n  8: exit\n  9: r0 = 1\n 10: exit\n"
        );
        // `r2 = *(u32 *)(r1 + 4)`-style loads: opcode 0x61, src r1 in the high nibble.
        assert_eq!(prog[2].encode(), [0x61, 0x13, 4, 0, 0, 0, 0, 0]);
        assert_eq!(prog[5].encode(), [0x55, 0x03, 3, 0, 195, 0, 0, 0]);
        assert_eq!(prog[10].encode(), [0x95, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(encode(&prog).len(), 11 * 8);
    }
}
