//! What the harness tells its user while it runs: lines (warnings, notes, each run's figures)
//! and, on a terminal, a progress bar with the run under way, the time so far and an estimate
//! of the time left.
//!
//! The harness reports through [`Progress`]. Any `FnMut(&str)` is one that prints the lines
//! and ignores the steps (what `fsprof-bench` uses when standard error is not a terminal, so
//! logs get the lines and no bar). [`Bar`] draws the bar on standard error, and prints the
//! lines above it.

use std::fmt;
use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// One measured run about to start: run `run` of `runs` of a workload on a target.
#[derive(Debug, Clone, Copy)]
pub struct Step<'a> {
    /// Runs started before this one, over the whole plan.
    pub done: u64,
    /// Runs in the whole plan (every workload, target and run).
    pub total: u64,
    /// The suite.
    pub suite: &'a str,
    /// The workload within it (the suite's name for a suite of one workload).
    pub label: &'a str,
    /// The target.
    pub target: &'a str,
    /// This run of the workload on the target, from 1.
    pub run: u32,
    /// Runs of the workload on each target.
    pub runs: u32,
}

impl fmt::Display for Step<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.label == self.suite {
            write!(f, "{}", self.suite)?;
        } else {
            write!(f, "{} / {}", self.suite, self.label)?;
        }
        write!(f, " on {}, run {}/{}", self.target, self.run, self.runs)
    }
}

/// Receives what the harness has to say.
pub trait Progress {
    /// A line of its own (a warning, a note, one run's figures).
    fn line(&mut self, text: &str);
    /// A run starts.
    fn step(&mut self, step: &Step<'_>);
}

impl<F: FnMut(&str)> Progress for F {
    fn line(&mut self, text: &str) {
        self(text)
    }

    fn step(&mut self, _: &Step<'_>) {}
}

/// A progress bar on standard error: the run under way (suite, workload, target, run i/n),
/// runs done of all, time so far and an estimate of the time left (from the runs so far, so
/// rough while workloads of different lengths alternate). Lines are printed above it.
pub struct Bar {
    bar: ProgressBar,
    /// Whether a run has started (before that there is nothing to draw: lines go straight
    /// to standard error).
    started: bool,
}

impl Bar {
    /// A bar when standard error is a terminal; `None` otherwise (print lines only).
    pub fn on_terminal() -> Option<Bar> {
        if !std::io::stderr().is_terminal() {
            return None;
        }
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "[{elapsed_precise}] {bar:24} {pos}/{len} runs, about {eta} left: {msg}",
            )
            .expect("a valid template"),
        );
        Some(Bar {
            bar,
            started: false,
        })
    }

    /// Removes the bar (before the results are printed).
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Progress for Bar {
    fn line(&mut self, text: &str) {
        if self.started {
            self.bar.println(text);
        } else {
            eprintln!("{text}");
        }
    }

    fn step(&mut self, step: &Step<'_>) {
        if !self.started {
            self.started = true;
            // Redraw every second, so the time moves during a long run.
            self.bar.enable_steady_tick(Duration::from_secs(1));
        }
        self.bar.set_length(step.total);
        self.bar.set_position(step.done);
        self.bar.set_message(step.to_string());
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_name_suite_workload_target_and_run() {
        let s = Step {
            done: 4,
            total: 12,
            suite: "clients",
            label: "clients-2",
            target: "fsprof-fuse",
            run: 2,
            runs: 3,
        };
        assert_eq!(s.to_string(), "clients / clients-2 on fsprof-fuse, run 2/3");
        let s = Step {
            label: "metadata",
            suite: "metadata",
            ..s
        };
        assert_eq!(s.to_string(), "metadata on fsprof-fuse, run 2/3");
    }

    /// A closure gets the lines and nothing else.
    #[test]
    fn closures_print_lines_only() {
        let mut got = Vec::new();
        {
            let mut p = |l: &str| got.push(l.to_string());
            let step = Step {
                done: 0,
                total: 1,
                suite: "s",
                label: "s",
                target: "t",
                run: 1,
                runs: 1,
            };
            Progress::step(&mut p, &step);
            Progress::line(&mut p, "a line");
        }
        assert_eq!(got, ["a line"]);
    }
}
