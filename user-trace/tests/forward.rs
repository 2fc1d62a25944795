//! Signals around `run`, in a test binary of their own: these tests send signals to the test
//! process itself and change its dispositions, which would disturb runs of other tests.

use std::path::{Path, PathBuf};
use std::process::Command;

use user_trace::{RunConfig, run};

fn compile(dir: &Path, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{name}.c"));
    let out = dir.join(name);
    assert!(
        Command::new("cc")
            .args(["-O2", "-o"])
            .arg(&out)
            .arg(&src)
            .status()
            .unwrap()
            .success()
    );
    out
}

fn state(prog: &Path, out: &Path, wait: bool) -> std::thread::JoinHandle<user_trace::RunOutcome> {
    let mut command = vec![prog.as_os_str().to_owned(), out.as_os_str().to_owned()];
    if wait {
        command.push("wait".into());
    }
    std::thread::spawn(move || {
        // The thread that calls run() has SIGUSR1 blocked, as if fsprof had been started so.
        // SAFETY: valid sigset pointers; changes this thread's mask only.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGUSR1);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        }
        run(&RunConfig {
            command,
            ..RunConfig::default()
        })
        .unwrap()
    })
}

fn wait_for(f: impl Fn() -> bool) {
    for _ in 0..3000 {
        if f() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("gave up waiting");
}

fn disposition(sig: libc::c_int) -> libc::sighandler_t {
    // SAFETY: a zeroed sigaction is a valid output buffer; a null new action only reads.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut sa);
        sa.sa_sigaction
    }
}

#[test]
fn the_program_gets_its_own_signal_state_and_the_signals_sent_to_fsprof() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = compile(tmp.path(), "sigstate");

    // As a shell would start it under nohup: SIGHUP ignored, nothing blocked, the others at
    // their defaults (set here: a test run started as a background job of a script has
    // SIGINT and SIGQUIT ignored).
    // SAFETY: changes this test process's dispositions; no handler is involved.
    unsafe {
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGQUIT] {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
    let out = tmp.path().join("direct");
    assert!(Command::new(&prog).arg(&out).status().unwrap().success());
    let direct = std::fs::read_to_string(&out).unwrap();
    assert_eq!(direct, "mask 0 int dfl term dfl hup ign quit dfl\n");

    for (sig, name) in [(libc::SIGTERM, "term"), (libc::SIGINT, "int")] {
        // Under run(): the same dispositions though run() catches SIGINT, SIGTERM and SIGQUIT,
        // and the mask of the thread that called it (SIGUSR1, 10, blocked).
        let out = tmp.path().join(name);
        let runner = state(&prog, &out, true);
        wait_for(|| std::fs::read_to_string(&out).is_ok_and(|s| s.ends_with('\n')));
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "mask 400 int dfl term dfl hup ign quit dfl\n"
        );
        // A signal sent to fsprof reaches the program, and fsprof reports how it ended.
        // SAFETY: signals this process, whose handler (run's) passes it on.
        unsafe { libc::kill(libc::getpid(), sig) };
        let outcome = runner.join().unwrap();
        assert_eq!(outcome.exit_code, 128 + sig, "{name}");
    }
    // Afterwards the test process's own dispositions are back.
    assert_eq!(disposition(libc::SIGTERM), libc::SIG_DFL);
    assert_eq!(disposition(libc::SIGINT), libc::SIG_DFL);
    assert_eq!(disposition(libc::SIGHUP), libc::SIG_IGN);
}
