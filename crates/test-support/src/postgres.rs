//! One real PostgreSQL (Debian's, installed by the test script) per process, in a temporary
//! directory, and a fresh database per test. The server dies with the process that started
//! it: a shell waits on that process's pipe and stops the server when the pipe closes.

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct Postgres {
    pub port: u16,
    _dir: tempfile::TempDir,
    _server: std::sync::Mutex<Child>,
}

fn bin(name: &str) -> PathBuf {
    for dir in [
        "/usr/lib/postgresql/17/bin",
        "/usr/lib/postgresql/16/bin",
        "/usr/lib/postgresql/15/bin",
    ] {
        let path = PathBuf::from(dir).join(name);
        if path.exists() {
            return path;
        }
    }
    PathBuf::from(name)
}

/// `argv` as the `postgres` user when we are root (initdb refuses root).
fn as_owner(root: bool, argv: &[String]) -> Command {
    if root {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).args(argv);
        command
    } else {
        let mut command = Command::new(&argv[0]);
        command.args(&argv[1..]);
        command
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The PostgreSQL of this process, started on first use.
pub fn postgres() -> &'static Postgres {
    static PG: OnceLock<Postgres> = OnceLock::new();
    PG.get_or_init(|| {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
            .unwrap_or(false);
        let dir = tempfile::Builder::new().prefix("aai-pg").tempdir().expect("dir");
        let data = dir.path().join("data");
        if root {
            // The postgres user must own the folder it writes.
            let status = Command::new("chown")
                .args(["postgres:postgres", &dir.path().display().to_string()])
                .status()
                .expect("chown");
            assert!(status.success(), "chown to postgres failed (is postgresql installed?)");
        }
        let initdb = as_owner(
            root,
            &[
                bin("initdb").display().to_string(),
                "-D".into(),
                data.display().to_string(),
                "-U".into(),
                "aai".into(),
                "--auth=trust".into(),
                "-E".into(),
                "UTF8".into(),
                "--no-sync".into(),
            ],
        )
        .stdout(Stdio::null())
        .output()
        .expect("initdb (apt-get install -y postgresql)");
        assert!(initdb.status.success(), "initdb: {}", String::from_utf8_lossy(&initdb.stderr));
        let port = free_port();
        let script = format!(
            "'{}' -D '{}' -p {port} -k '{}' -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 & pid=$!; read _; kill -INT $pid; wait $pid; rm -rf '{}'",
            bin("postgres").display(),
            data.display(),
            dir.path().display(),
            dir.path().display()
        );
        let server = as_owner(root, &["sh".into(), "-c".into(), script])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("postgres");
        let mut server = server;
        // Ready when it says it accepts connections.
        let stderr = server.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut ready = Some(tx);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("ready to accept connections")
                    && let Some(tx) = ready.take()
                {
                    let _ = tx.send(());
                }
            }
        });
        rx.recv_timeout(std::time::Duration::from_secs(30))
            .expect("PostgreSQL did not start within 30 s");
        Postgres {
            port,
            _dir: dir,
            _server: std::sync::Mutex::new(server),
        }
    })
}

impl Postgres {
    pub fn url(&self, database: &str) -> String {
        format!("postgres://aai@127.0.0.1:{}/{database}", self.port)
    }

    /// A new, empty database; its URL.
    pub fn database(&self) -> String {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "t{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        let out = Command::new(bin("createdb"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "aai",
                &name,
            ])
            .output()
            .expect("createdb");
        assert!(
            out.status.success(),
            "createdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.url(&name)
    }
}
