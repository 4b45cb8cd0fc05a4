//! The one way tests run the gateway's command line: the binary under a home of the test's
//! own (`AAI_HOME`), logs at `warn`, stdin closed unless the test gives it, and the output
//! taken whole. A test names the binary (`env!("CARGO_BIN_EXE_aai-gateway")` is known only
//! to the binary's own crate).

use std::ffi::OsStr;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::TestBus;

/// A command line to run.
pub struct Run {
    command: Command,
    stdin: Option<Vec<u8>>,
}

impl Run {
    /// `binary` with `AAI_HOME=home`.
    pub fn new(binary: impl AsRef<OsStr>, home: &Path) -> Self {
        let mut command = Command::new(binary);
        command.env("AAI_HOME", home).env("AAI_LOG", "warn");
        Self {
            command,
            stdin: None,
        }
    }

    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.command.args(args);
        self
    }

    #[must_use]
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.command.env(key, value);
        self
    }

    #[must_use]
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Self {
        self.command.env_remove(key);
        self
    }

    /// The session bus is `bus`.
    #[must_use]
    pub fn bus(self, bus: &TestBus) -> Self {
        self.env("DBUS_SESSION_BUS_ADDRESS", bus.address())
    }

    /// What the command reads on stdin.
    #[must_use]
    pub fn stdin(mut self, text: &str) -> Self {
        self.stdin = Some(text.as_bytes().to_vec());
        self
    }

    /// Runs it to the end.
    ///
    /// # Panics
    /// The binary cannot be started.
    pub fn output(mut self) -> Output {
        self.command
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = self.command.spawn().expect("run the gateway");
        if let (Some(text), Some(mut stdin)) = (self.stdin.take(), child.stdin.take()) {
            let _ = stdin.write_all(&text);
        }
        child.wait_with_output().expect("wait for the gateway")
    }

    /// [`Run::output`] as its exit code, stdout and stderr in text.
    pub fn text(self) -> (Option<i32>, String, String) {
        let out = self.output();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}
