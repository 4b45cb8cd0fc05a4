//! One client's browser: Debian's (or the user's) Chromium launched on a profile of the
//! client's own behind the policy proxy, or a browser context of its own in a Chrome the user
//! runs, with the tabs the client works in.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};

use super::BrowserConfig;
use super::cdp::Cdp;
use super::error::BrowserError;
use super::profile::{claim_profile, prepare_profile};
use aai_sandbox::policy::DomainPolicy;
use aai_sandbox::proxy::Proxy;

/// How long Chromium may take to start.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// One tab: its target and the flat session the gateway drives it through.
#[derive(Debug, Clone)]
pub struct Tab {
    pub target: String,
    pub session: String,
}

/// A browser for one client.
pub struct Session {
    pub cdp: Cdp,
    pub proxy: Proxy,
    /// Our own Chromium, when we launched it.
    child: Option<tokio::process::Child>,
    /// The browser context we made in an attached browser.
    context: Option<String>,
    pub tabs: Vec<Tab>,
    pub current: usize,
    pub profile: Option<PathBuf>,
    _lock: Option<std::fs::File>,
    /// The browser's debugging endpoint is one of the gateway's listeners: a page must not
    /// drive its own browser through it.
    _own: Option<aai_contain::own_listeners::Registered>,
}

/// Registers the debugging endpoint at `ws` (`ws://127.0.0.1:PORT/devtools/…`) as one of the
/// gateway's listeners.
fn register_endpoint(ws: &str) -> Option<aai_contain::own_listeners::Registered> {
    let url = url::Url::parse(ws).ok()?;
    let port = url.port_or_known_default()?;
    let ip = match url.host()? {
        url::Host::Ipv4(ip) => std::net::IpAddr::V4(ip),
        url::Host::Ipv6(ip) => std::net::IpAddr::V6(ip),
        url::Host::Domain(_) => std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
    };
    Some(aai_contain::own_listeners::register(
        std::net::SocketAddr::new(ip, port),
    ))
}

/// Refuses every download of the browser (in `context`, else all of it): a page must not
/// write files — under the profile (which lies in `AAI_HOME`) or anywhere else — past the
/// file tools' sandbox.
async fn deny_downloads(cdp: &Cdp, context: Option<&str>) -> Result<(), BrowserError> {
    let mut params = json!({"behavior": "deny"});
    if let Some(context) = context {
        params["browserContextId"] = json!(context);
    }
    cdp.send(None, "Browser.setDownloadBehavior", params)
        .await
        .map(|_| ())
        .map_err(BrowserError::Downloads)
}

/// A failure to start, worded for the agent.
pub type StartError = (aai_descriptor::ErrorKind, String);

fn start_failed(problem: impl std::fmt::Display) -> StartError {
    (
        aai_descriptor::ErrorKind::AutomationFailed,
        problem.to_string(),
    )
}

impl Session {
    /// Starts a browser for `client` as `config` says: attached to the configured endpoint,
    /// else launched on the client's profile under `home/browser/` (a headed one on `display`
    /// when given, else on the gateway's own).
    pub async fn start(
        config: &BrowserConfig,
        policy: Arc<DomainPolicy>,
        home: &Path,
        client: &str,
        extra_ca_certs: &[PathBuf],
        display: Option<&str>,
    ) -> Result<Self, StartError> {
        let proxy = Proxy::start(policy, config.resolve.clone(), Some(home.to_path_buf()))
            .await
            .map_err(|e| start_failed(format!("cannot start the browser's policy proxy: {e}")))?;
        let proxy_url = format!("http://{}", proxy.addr);
        if let Some(endpoint) = &config.attach {
            let ws = websocket_url(endpoint).await.map_err(start_failed)?;
            let cdp = Cdp::connect(&ws).await.map_err(start_failed)?;
            let own = register_endpoint(&ws);
            let context = cdp
                .send(
                    None,
                    "Target.createBrowserContext",
                    json!({"disposeOnDetach": true, "proxyServer": proxy_url, "proxyBypassList": "<-loopback>"}),
                )
                .await
                .map_err(start_failed)?;
            let context = context["browserContextId"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            deny_downloads(&cdp, Some(&context))
                .await
                .map_err(start_failed)?;
            let mut session = Self {
                cdp,
                proxy,
                child: None,
                context: Some(context),
                tabs: Vec::new(),
                current: 0,
                profile: None,
                _lock: None,
                _own: own,
            };
            session.open_tab().await.map_err(start_failed)?;
            return Ok(session);
        }
        let executable = find_executable(config).ok_or_else(|| {
            (
                aai_descriptor::ErrorKind::AutomationNotSupported,
                "no Chromium or Chrome was found: install it (Debian/Ubuntu: `apt-get install chromium`), set `browser.executable` in the gateway's config.json, or `browser.attach` to a running Chrome's debugging endpoint".to_owned(),
            )
        })?;
        let (profile, lock) = claim_profile(home, client).map_err(start_failed)?;
        prepare_profile(&profile).map_err(start_failed)?;
        let nss_home = if extra_ca_certs.is_empty() {
            None
        } else {
            Some(
                trust_cas(&profile, extra_ca_certs)
                    .await
                    .map_err(start_failed)?,
            )
        };
        // DevTools over a pipe where the gateway binary can hand one over (see
        // `aai_contain::cdp_pipe`): a debugging port on loopback would let any local process —
        // a contained command too — drive this browser.
        #[cfg(target_os = "linux")]
        let helper = aai_contain::launcher();
        #[cfg(not(target_os = "linux"))]
        let helper: Option<&Path> = None;
        let mut args = launch_args(config, &profile, &proxy_url);
        let mut command = match helper {
            Some(helper) => {
                for arg in &mut args {
                    if arg == "--remote-debugging-port=0" {
                        "--remote-debugging-pipe".clone_into(arg);
                    }
                }
                let mut command = tokio::process::Command::new(helper);
                #[cfg(target_os = "linux")]
                command.arg(aai_contain::cdp_pipe::MARKER).env(
                    aai_contain::cdp_pipe::LIFELINE_VAR,
                    std::process::id().to_string(),
                );
                command
                    .arg("--")
                    .arg(&executable)
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped());
                command
            }
            None => {
                let mut command = match tied_by_setpriv() {
                    // No helper of ours to set the parent-death signal (a library's tests):
                    // util-linux's `setpriv` sets it, then runs the browser.
                    Some(setpriv) => {
                        let mut command = tokio::process::Command::new(setpriv);
                        command
                            .args(["--pdeathsig", "SIGKILL", "--"])
                            .arg(&executable);
                        command
                    }
                    None => tokio::process::Command::new(&executable),
                };
                command.stdin(Stdio::null()).stdout(Stdio::null());
                command
            }
        };
        command
            .args(&args)
            .stderr(Stdio::piped())
            .env(
                aai_executor::process::TAG_VAR,
                aai_executor::process::process_tag(),
            )
            .kill_on_drop(true);
        #[cfg(unix)]
        command.process_group(0);
        if let Some(nss_home) = &nss_home {
            command.env("HOME", nss_home);
        }
        if !config.headless
            && let Some(display) = display
        {
            command.env("DISPLAY", display);
        }
        let mut child = spawn_lasting(command).await.map_err(|e| {
            start_failed(format!(
                "cannot start {}: {e}",
                executable.to_string_lossy()
            ))
        })?;
        let (cdp, own) = match (child.stdin.take(), child.stdout.take()) {
            (Some(commands), Some(replies)) => {
                drain_stderr(&mut child);
                (Cdp::over_pipe(commands, replies), None)
            }
            _ => {
                let ws = devtools_url(&mut child).await.map_err(start_failed)?;
                let cdp = Cdp::connect(&ws).await.map_err(start_failed)?;
                (cdp, register_endpoint(&ws))
            }
        };
        deny_downloads(&cdp, None).await.map_err(start_failed)?;
        let mut session = Self {
            cdp,
            proxy,
            child: Some(child),
            context: None,
            tabs: Vec::new(),
            current: 0,
            profile: Some(profile),
            _lock: Some(lock),
            _own: own,
        };
        session.sync_tabs().await.map_err(start_failed)?;
        if session.tabs.is_empty() {
            session.open_tab().await.map_err(start_failed)?;
        }
        Ok(session)
    }

    /// Whether the browser is still there.
    pub fn alive(&mut self) -> bool {
        let exited = self
            .child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_some());
        !exited && !self.cdp.is_closed()
    }

    /// The current tab.
    pub fn tab(&self) -> Option<&Tab> {
        self.tabs.get(self.current)
    }

    /// Opens a blank tab, makes it current and returns its index.
    pub async fn open_tab(&mut self) -> Result<usize, BrowserError> {
        let mut params = json!({"url": "about:blank"});
        if let Some(context) = &self.context {
            params["browserContextId"] = json!(context);
        }
        let created = self.cdp.send(None, "Target.createTarget", params).await?;
        let target = created["targetId"].as_str().unwrap_or_default().to_owned();
        let tab = self.attach(&target).await?;
        self.tabs.push(tab);
        self.current = self.tabs.len() - 1;
        Ok(self.current)
    }

    /// Brings the tab list up to date with the browser's pages: popups and tabs a page
    /// opened are added at the end (and become current when `follow`), closed ones dropped.
    pub async fn sync_tabs(&mut self) -> Result<Vec<usize>, BrowserError> {
        let targets = self.cdp.send(None, "Target.getTargets", json!({})).await?;
        let pages: Vec<&Value> = targets["targetInfos"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter(|t| t["type"] == "page")
                    .filter(|t| {
                        self.context
                            .as_ref()
                            .is_none_or(|c| t["browserContextId"].as_str() == Some(c))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let current = self.tab().map(|t| t.target.clone());
        self.tabs.retain(|tab| {
            pages
                .iter()
                .any(|p| p["targetId"].as_str() == Some(&tab.target))
        });
        let mut added = Vec::new();
        for page in pages {
            let Some(id) = page["targetId"].as_str() else {
                continue;
            };
            if self.tabs.iter().any(|t| t.target == id) {
                continue;
            }
            let tab = self.attach(id).await?;
            self.tabs.push(tab);
            added.push(self.tabs.len() - 1);
        }
        self.current = current
            .and_then(|c| self.tabs.iter().position(|t| t.target == c))
            .unwrap_or(0);
        Ok(added)
    }

    async fn attach(&self, target: &str) -> Result<Tab, BrowserError> {
        let attached = self
            .cdp
            .send(
                None,
                "Target.attachToTarget",
                json!({"targetId": target, "flatten": true}),
            )
            .await?;
        let session = attached["sessionId"]
            .as_str()
            .ok_or(BrowserError::NoSession)?
            .to_owned();
        let s = Some(session.as_str());
        self.cdp.send(s, "Page.enable", json!({})).await?;
        self.cdp
            .send(
                s,
                "Page.setLifecycleEventsEnabled",
                json!({"enabled": true}),
            )
            .await?;
        // Chromium's own pages (error pages) never load a script of ours: nothing to add.
        Ok(Tab {
            target: target.to_owned(),
            session,
        })
    }

    /// Closes the tab at `index`.
    pub async fn close_tab(&mut self, index: usize) -> Result<(), BrowserError> {
        let tab = self.tabs.get(index).ok_or(BrowserError::NoTab)?.clone();
        self.cdp
            .send(None, "Target.closeTarget", json!({"targetId": tab.target}))
            .await?;
        self.tabs.remove(index);
        if self.current >= index && self.current > 0 {
            self.current -= 1;
        }
        Ok(())
    }

    /// Closes the browser (or our context in an attached one) and waits for it to go.
    pub async fn close(mut self) {
        if let Some(context) = self.context.take() {
            let _ = self
                .cdp
                .send(
                    None,
                    "Target.disposeBrowserContext",
                    json!({"browserContextId": context}),
                )
                .await;
        } else {
            let _ = tokio::time::timeout(
                Duration::from_secs(2),
                self.cdp.send(None, "Browser.close", json!({})),
            )
            .await;
        }
        self.cdp.close();
        if let Some(mut child) = self.child.take()
            && tokio::time::timeout(Duration::from_secs(3), child.wait())
                .await
                .is_err()
        {
            kill_group(&child);
            let _ = child.kill().await;
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            kill_group(child);
        }
    }
}

/// Kills the browser's whole process group (renderers and helpers with it).
fn kill_group(child: &tokio::process::Child) {
    #[cfg(unix)]
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    #[cfg(not(unix))]
    let _ = child;
}

/// The program to launch: `browser.executable`, else the first Chromium-family browser found.
pub fn find_executable(config: &BrowserConfig) -> Option<PathBuf> {
    if let Some(path) = &config.executable {
        return Some(aai_toolset::expand_home(path));
    }
    let names = [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
        "microsoft-edge",
    ];
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in names {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    let fixed: &[&str] = if cfg!(target_os = "macos") {
        &[
            "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
            "/Applications/Chromium.app/Contents/MacOS/Chromium",
        ]
    } else if cfg!(windows) {
        &[
            r"C:\Program Files\Google\Chrome\Application\chrome.exe",
            r"C:\Program Files (x86)\Microsoft\Edge\Application\msedge.exe",
        ]
    } else {
        &[]
    };
    fixed.iter().map(PathBuf::from).find(|p| p.is_file())
}

/// Chromium's command line: our profile, the policy proxy for everything (loopback too), no
/// name resolution of its own, no prediction, no background traffic, no UDP around the proxy.
pub fn launch_args(config: &BrowserConfig, profile: &Path, proxy_url: &str) -> Vec<String> {
    let mut args = vec![
        format!("--user-data-dir={}", profile.display()),
        "--remote-debugging-port=0".into(),
        format!("--proxy-server={proxy_url}"),
        "--proxy-bypass-list=<-loopback>".into(),
        // Every name goes to the proxy; Chromium itself resolves none (no DNS warm-up).
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1".into(),
        "--dns-prefetch-disable".into(),
        "--disable-quic".into(),
        "--force-webrtc-ip-handling-policy=disable_non_proxied_udp".into(),
        "--disable-background-networking".into(),
        "--disable-component-update".into(),
        "--disable-domain-reliability".into(),
        "--disable-client-side-phishing-detection".into(),
        "--disable-sync".into(),
        "--disable-extensions".into(),
        "--disable-default-apps".into(),
        "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication,Prerender2,NetworkPrediction,PreloadingHeuristics,SpeculationRulesPrefetchFuture".into(),
        "--no-first-run".into(),
        "--no-default-browser-check".into(),
        "--no-pings".into(),
        "--password-store=basic".into(),
        "--use-mock-keychain".into(),
        "--mute-audio".into(),
        format!("--window-size={},{}", config.width, config.height),
    ];
    if config.headless {
        args.push("--headless=new".into());
    }
    // Chromium refuses to run as root with its sandbox (containers, CI).
    #[cfg(unix)]
    if rustix::process::geteuid().is_root() {
        args.push("--no-sandbox".into());
    }
    args.push("about:blank".into());
    args
}

/// `setpriv`, where it can give the browser a parent-death signal (Linux, util-linux).
fn tied_by_setpriv() -> Option<&'static Path> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .map(Path::new)
        .find(|path| path.exists())
}

/// Starts `command` from a thread that lasts as long as the gateway.
///
/// The browser's parent-death signal (see `aai_contain::cdp_pipe::LIFELINE_VAR`) fires when
/// the *thread* that started it ends, not the process: a runtime's worker can become a
/// blocking-pool thread (`block_in_place`) that exits when idle, and a test's thread ends with
/// its test. This thread never ends before the process does.
async fn spawn_lasting(
    mut command: tokio::process::Command,
) -> std::io::Result<tokio::process::Child> {
    type Job = (
        tokio::process::Command,
        tokio::runtime::Handle,
        tokio::sync::oneshot::Sender<std::io::Result<tokio::process::Child>>,
    );
    static SPAWNER: std::sync::OnceLock<Option<std::sync::mpsc::Sender<Job>>> =
        std::sync::OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (jobs, queue) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("aai-browser-spawner".into())
            .spawn(move || {
                for (mut command, runtime, reply) in queue {
                    // The child is reaped by the runtime of the caller that asked for it.
                    let _entered = runtime.enter();
                    let _ = reply.send(command.spawn());
                }
            })
            .ok()
            .map(|_| jobs)
    });
    let Some(spawner) = spawner else {
        tracing::warn!(
            "no thread to start browsers from; this browser is started without a lifeline"
        );
        return command.spawn();
    };
    let (reply, answer) = tokio::sync::oneshot::channel();
    spawner
        .send((command, tokio::runtime::Handle::current(), reply))
        .map_err(|_| std::io::Error::other("the browser starter thread is gone"))?;
    answer
        .await
        .map_err(|_| std::io::Error::other("the browser starter thread did not answer"))?
}

/// Makes Chromium trust `cas` (the gateway's `web.extra_ca_certs`): an NSS database in a home
/// folder of the profile's own, which Chromium on Linux reads for locally trusted roots.
async fn trust_cas(profile: &Path, cas: &[PathBuf]) -> Result<PathBuf, BrowserError> {
    let home = profile.join("home");
    let db = home.join(".pki").join("nssdb");
    std::fs::create_dir_all(&db).map_err(BrowserError::file("create", &db))?;
    let db_arg = format!("sql:{}", db.display());
    let run = |args: Vec<String>| async move {
        let out = tokio::process::Command::new("certutil")
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(BrowserError::NoCertutil)?;
        if out.status.success() {
            Ok(())
        } else {
            Err(BrowserError::Certutil(
                String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            ))
        }
    };
    if !db.join("cert9.db").exists() {
        run(vec![
            "-d".into(),
            db_arg.clone(),
            "-N".into(),
            "--empty-password".into(),
        ])
        .await?;
    }
    for (n, ca) in cas.iter().enumerate() {
        run(vec![
            "-d".into(),
            db_arg.clone(),
            "-A".into(),
            "-t".into(),
            "C,,".into(),
            "-n".into(),
            format!("aai-extra-ca-{n}"),
            "-i".into(),
            ca.display().to_string(),
        ])
        .await?;
    }
    Ok(home)
}

/// Reads Chromium's stderr until it says where DevTools listens; the rest goes to the log.
async fn devtools_url(child: &mut tokio::process::Child) -> Result<String, BrowserError> {
    let stderr = child.stderr.take().ok_or(BrowserError::NoStderr)?;
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    let mut seen = Vec::new();
    let found = tokio::time::timeout(START_TIMEOUT, async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(at) = line.find("ws://") {
                return Some(line[at..].trim().to_owned());
            }
            seen.push(line);
        }
        None
    })
    .await;
    let url = match found {
        Ok(Some(url)) => url,
        Ok(None) => {
            let tail: Vec<_> = seen.iter().rev().take(5).rev().cloned().collect();
            return Err(BrowserError::ExitedStarting(tail.join(" | ")));
        }
        Err(_) => return Err(BrowserError::StartTimeout),
    };
    // Keep draining stderr so the browser never blocks on a full pipe.
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::trace!(target: "aai_local::browser::chromium", "{line}");
        }
    });
    Ok(url)
}

/// Passes what the browser says on stderr to the trace log, so it never blocks on a full pipe.
fn drain_stderr(child: &mut tokio::process::Child) {
    use tokio::io::AsyncBufReadExt as _;
    if let Some(stderr) = child.stderr.take() {
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::trace!(target: "aai_local::browser::chromium", "{line}");
            }
        });
    }
}

/// The browser's WebSocket endpoint from `attach`: a `ws://` URL as is, else
/// `http://host:port`, whose `/json/version` names it.
async fn websocket_url(endpoint: &str) -> Result<String, BrowserError> {
    if endpoint.starts_with("ws://") || endpoint.starts_with("wss://") {
        return Ok(endpoint.to_owned());
    }
    let url = url::Url::parse(endpoint).map_err(|source| BrowserError::AttachUrl {
        endpoint: endpoint.to_owned(),
        source,
    })?;
    let host = url.host_str().ok_or(BrowserError::AttachHost)?;
    let port = url.port_or_known_default().unwrap_or(9222);
    let unreachable = |source| BrowserError::Unreachable {
        endpoint: endpoint.to_owned(),
        source,
    };
    let mut tcp = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(unreachable)?;
    // Chromium's DevTools server answers HTTP/1.1 and keeps the connection open whatever the
    // request says, so the body is read by its Content-Length.
    tcp.write_all(
        format!("GET /json/version HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
    .map_err(unreachable)?;
    let body = tokio::time::timeout(Duration::from_secs(10), read_response(&mut tcp))
        .await
        .map_err(|_| BrowserError::NoAnswer(endpoint.to_owned()))?
        .map_err(unreachable)?;
    let text = String::from_utf8_lossy(&body);
    let json = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let version: Value =
        serde_json::from_str(json).map_err(|_| BrowserError::NotDevTools(endpoint.to_owned()))?;
    version["webSocketDebuggerUrl"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| BrowserError::NoDebuggerUrl(endpoint.to_owned()))
}

/// One HTTP response: its head, and as much body as its Content-Length says (or all until the
/// peer closes, when it names none).
async fn read_response(tcp: &mut tokio::net::TcpStream) -> std::io::Result<Vec<u8>> {
    const MAX: usize = 1 << 20;
    let mut data = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = tcp.read(&mut chunk).await?;
        if n == 0 {
            return Ok(data);
        }
        data.extend_from_slice(&chunk[..n]);
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
            let length = head.lines().find_map(|line| {
                line.strip_prefix("content-length:")
                    .and_then(|v| v.trim().parse::<usize>().ok())
            });
            if let Some(length) = length
                && data.len() >= end + 4 + length.min(MAX)
            {
                data.truncate(end + 4 + length.min(MAX));
                return Ok(data);
            }
        }
        if data.len() > MAX {
            return Ok(data);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::browser::profile::{profile_slug, recover_stale_lock, runs_on_profile};

    #[test]
    fn slugs() {
        assert_eq!(profile_slug("Claude Code"), "claude_code");
        assert_eq!(profile_slug("../../etc"), "______etc");
        assert_eq!(profile_slug(""), "client");
        assert_eq!(profile_slug("///"), "client");
    }

    #[test]
    fn profiles_are_private_and_never_shared() {
        let home = tempfile::tempdir().expect("home");
        let (first, lock) = claim_profile(home.path(), "cursor").expect("first");
        let (second, _lock2) = claim_profile(home.path(), "cursor").expect("second");
        assert_ne!(first, second);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            for dir in [home.path().join("browser"), first.clone(), second] {
                let mode = std::fs::metadata(&dir).expect("meta").permissions().mode();
                assert_eq!(mode & 0o777, 0o700, "{}", dir.display());
            }
        }
        drop(lock);
        // Freed, the first profile is the next one claimed. (A process another test forks at
        // that moment holds a copy of the lock's descriptor until it execs: claim again then.)
        let mut again = None;
        for _ in 0..200 {
            let (path, claimed) = claim_profile(home.path(), "cursor").expect("again");
            if path == first {
                again = Some(claimed);
                break;
            }
            drop(claimed);
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(again.is_some(), "the freed profile was never claimed again");
    }

    #[test]
    fn launch_line_keeps_the_browser_behind_the_proxy() {
        let config = BrowserConfig::default();
        let args = launch_args(&config, Path::new("/p"), "http://127.0.0.1:9");
        for needed in [
            "--proxy-server=http://127.0.0.1:9",
            "--proxy-bypass-list=<-loopback>",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            "--disable-quic",
            "--headless=new",
        ] {
            assert!(args.iter().any(|a| a == needed), "{needed} in {args:?}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_lock_is_recovered_only_when_its_browser_is_gone() {
        let dir = tempfile::tempdir().expect("dir");
        let profile = dir.path();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
        let lock = |pid: u32| {
            let _ = std::fs::remove_file(profile.join("SingletonLock"));
            std::os::unix::fs::symlink(
                format!("{}-{pid}", host.trim()),
                profile.join("SingletonLock"),
            )
            .expect("symlink");
            std::fs::write(profile.join("SingletonCookie"), "x").expect("cookie");
        };
        // A process on this profile holds it.
        let mut holder = std::process::Command::new("sh")
            .args(["-c", "sleep 30; :", "sh"])
            .arg(format!("--user-data-dir={}", profile.display()))
            .spawn()
            .expect("sh");
        // Until the child has exec'ed, its command line is still this test's.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !runs_on_profile(holder.id(), profile) {
            assert!(
                std::time::Instant::now() < until,
                "sh started on the profile"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        lock(holder.id());
        let refused = recover_stale_lock(profile).expect_err("held").to_string();
        assert!(
            refused.contains(&format!("kill {}", holder.id())),
            "{refused}"
        );
        assert!(profile.join("SingletonLock").symlink_metadata().is_ok());
        // A live process that is not on this profile (its pid given to another program).
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        lock(other.id());
        recover_stale_lock(profile).expect("recovered");
        assert!(profile.join("SingletonLock").symlink_metadata().is_err());
        assert!(!profile.join("SingletonCookie").exists());
        // The holder gone.
        holder.kill().expect("kill");
        holder.wait().expect("wait");
        lock(holder.id());
        recover_stale_lock(profile).expect("recovered");
        assert!(profile.join("SingletonLock").symlink_metadata().is_err());
        other.kill().expect("kill");
        other.wait().expect("wait");
    }
}
