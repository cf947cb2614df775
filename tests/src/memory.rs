//! The test process's own memory, from `/proc/self/status`.
//!
//! Peak and current resident set in KiB; 0 where `/proc` is not available. The suite checks
//! memory *behaviour*; the bound itself (C02: peak ≈ limit + one chunk) is measured by the
//! benchmark in a process of its own, where other tests cannot disturb it.

/// Peak resident set size (`VmHWM`) of this process in KiB, or 0 if unknown.
pub fn vm_hwm_kib() -> u64 {
    status_field_kib("VmHWM:")
}

/// Current resident set size (`VmRSS`) of this process in KiB, or 0 if unknown.
pub fn vm_rss_kib() -> u64 {
    status_field_kib("VmRSS:")
}

fn status_field_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| parse_kib(&status, field))
        .unwrap_or(0)
}

fn parse_kib(status: &str, field: &str) -> Option<u64> {
    let rest = status.lines().find_map(|line| line.strip_prefix(field))?;
    rest.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_kib_fields_of_proc_status() {
        let status = "Name:\tx\nVmPeak:\t  9000 kB\nVmHWM:\t    1234 kB\nVmRSS:\t     999 kB\n";
        assert_eq!(parse_kib(status, "VmHWM:"), Some(1234));
        assert_eq!(parse_kib(status, "VmRSS:"), Some(999));
        assert_eq!(parse_kib(status, "VmSwap:"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reads_this_process_memory() {
        let rss = vm_rss_kib();
        assert!(rss > 0);
        assert!(vm_hwm_kib() >= rss);
    }
}
