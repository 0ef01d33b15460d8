//! What benchmarks read of a process from /proc (Linux): CPU ticks and resident memory.
#![allow(dead_code)]

use std::process::Command;

/// Clock ticks per second of /proc/PID/stat, from `getconf CLK_TCK` (libc is not a
/// direct dependency); 100, the Linux value, if getconf is missing.
pub fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// CPU of a process from /proc/PID/stat, in clock ticks.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cpu {
    /// utime + stime: the process itself (all its threads).
    pub own: u64,
    /// cutime + cstime: its children that it has waited for (the helm renders).
    pub children: u64,
}

pub fn read_cpu(pid: u32) -> Option<Cpu> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain spaces: fields follow the last ')'.
    // After it: state (field 3), ... utime 14, stime 15, cutime 16, cstime 17.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let n = |i: usize| f.get(i - 3).and_then(|v| v.parse::<u64>().ok());
    Some(Cpu {
        own: n(14)? + n(15)?,
        children: n(16)? + n(17)?,
    })
}

/// (VmRSS, VmHWM) in KiB from /proc/PID/status.
pub fn read_rss(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// The live children of `pid` whose command name starts with `name` (as /proc shows it:
/// at most 15 bytes).
pub fn children_named(pid: u32, name: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let short: String = name.chars().take(15).collect();
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
                return false;
            };
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
                return false;
            };
            let comm = &stat[open + 1..close];
            let ppid = stat[close + 1..].split_whitespace().nth(1);
            comm == short && ppid == Some(&pid.to_string())
        })
        .collect()
}
