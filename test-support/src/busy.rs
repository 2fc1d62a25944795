//! Every CPU kept out of the idle task while a test measures, without taking time from any
//! other task.
//!
//! On this project's VM (Linux 6.18) perf counts a tracepoint hit taken in an interrupt
//! while a CPU idles and, at times, writes no sample for it (docs/format.md, "Lost
//! records"): a block completion is such a hit whenever the thread waiting for it sleeps.
//! A test that checks the timing of `--kernel`'s block layer runs its workload while
//! [`BusyCpus`] holds: one busy loop per online CPU, pinned to it, at `SCHED_IDLE` priority
//! (any other task preempts it at once). Needs `taskset` and `chrt` (util-linux).

use std::process::{Child, Command, Stdio};

/// The busy loops; killed when dropped (on success, failure and panic).
pub struct BusyCpus(Vec<Child>);

impl BusyCpus {
    /// Starts one busy loop per online CPU.
    pub fn start() -> BusyCpus {
        let cpus = kernel_trace::online_cpus().expect("online CPUs");
        let mut busy = BusyCpus(Vec::new());
        for c in cpus {
            let child = Command::new("taskset")
                .args(["-c", &c.to_string(), "chrt", "-i", "0"])
                .args(["sh", "-c", "while :; do :; done"])
                .stdin(Stdio::null())
                .spawn()
                .expect("taskset and chrt (util-linux)");
            busy.0.push(child);
        }
        busy
    }
}

impl Drop for BusyCpus {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
