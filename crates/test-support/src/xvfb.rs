//! A virtual X server for desktop tests that is ready before anything connects to it.
//!
//! Xvfb picks a free display number itself and reports it on `-displayfd` only once it accepts
//! clients, so nothing here guesses numbers from lock files (another test binary or a parallel
//! build may take one between a check and a start) or from the socket appearing (it appears
//! before the server answers). `-noreset` keeps the server from resetting when its first client
//! leaves: a client that connects during a reset is dropped mid-handshake, which a busy machine
//! made happen.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running Xvfb; killed when dropped.
pub struct Xvfb {
    /// `:N`
    pub display: String,
    child: Child,
}

impl Xvfb {
    /// Starts Xvfb with one screen of `size` (e.g. `1280x800x24`) and waits (30 s at most) until
    /// it accepts clients.
    pub fn start(size: &str) -> Self {
        let mut child = Command::new("Xvfb")
            .args([
                "-displayfd",
                "1",
                "-noreset",
                "-nolisten",
                "tcp",
                "-screen",
                "0",
                size,
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("Xvfb is missing: run scripts/test.sh, which installs xvfb");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let number = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_default()
            .trim()
            .to_owned();
        if number.parse::<u32>().is_err() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("Xvfb did not report a display within 30 s");
        }
        Self {
            display: format!(":{number}"),
            child,
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Xvfb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
