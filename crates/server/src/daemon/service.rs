//! The per-user service that keeps `aai-gateway serve` running (`spec/desktop-control.zh.md`
//! §6.2): a systemd user unit, a launchd LaunchAgent or a Task Scheduler task, each written
//! for the user alone (no admin rights) and restarting with backoff after a crash.

use std::path::{Path, PathBuf};

/// Which service manager a unit is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manager {
    Systemd,
    Launchd,
    TaskScheduler,
}

impl Manager {
    /// This machine's.
    pub fn native() -> Self {
        if cfg!(target_os = "macos") {
            Self::Launchd
        } else if cfg!(windows) {
            Self::TaskScheduler
        } else {
            Self::Systemd
        }
    }

    /// Where the unit lives for the user whose home folder is `user_home`.
    pub fn unit_path(self, user_home: &Path, aai_home: &Path) -> PathBuf {
        match self {
            Self::Systemd => user_home.join(".config/systemd/user/aai-gateway.service"),
            Self::Launchd => user_home.join("Library/LaunchAgents/org.aai.gateway.plist"),
            // schtasks imports the XML from here; the task itself lives in the scheduler.
            Self::TaskScheduler => aai_home.join("aai-gateway-task.xml"),
        }
    }

    /// The unit's text: `exe serve` with `AAI_HOME`, restarted after a failure.
    pub fn unit(self, exe: &Path, aai_home: &Path) -> String {
        match self {
            Self::Systemd => systemd(exe, aai_home),
            Self::Launchd => launchd(exe, aai_home),
            Self::TaskScheduler => task_scheduler(exe, aai_home),
        }
    }
}

/// A value for a systemd unit line: quoted, with `\`, `"`, `%` and `$` escaped.
fn systemd_quote(value: &str) -> String {
    let mut out = String::from("\"");
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '%' => out.push_str("%%"),
            '$' => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn systemd(exe: &Path, aai_home: &Path) -> String {
    let exe = systemd_quote(&exe.to_string_lossy());
    let home = systemd_quote(&format!("AAI_HOME={}", aai_home.to_string_lossy()));
    // Backoff 5 s → 15 s → 60 s: RestartSteps/RestartMaxDelaySec (systemd 254+) grow the
    // delay from RestartSec to the maximum; older systemd ignores them and waits 5 s.
    format!(
        "[Unit]\n\
         Description=aai-gateway: one MCP server for your applications\n\
         StartLimitIntervalSec=0\n\
         \n\
         [Service]\n\
         Type=exec\n\
         ExecStart={exe} serve\n\
         Environment={home}\n\
         Restart=on-failure\n\
         RestartSec=5s\n\
         RestartSteps=2\n\
         RestartMaxDelaySec=60s\n\
         # The emergency stop kills every process of a call; the unit's cgroup holds them all,\n\
         # and with delegation each call gets a cgroup of its own below it.\n\
         KillMode=control-group\n\
         Delegate=yes\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n"
    )
}

/// Text for XML character data and attribute values.
fn xml_escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

fn launchd(exe: &Path, aai_home: &Path) -> String {
    let exe = xml_escape(&exe.to_string_lossy());
    let home = xml_escape(&aai_home.to_string_lossy());
    // launchd has no growing backoff: it relaunches a crashed agent no sooner than
    // ThrottleInterval after its last start.
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
  <key>Label</key>
  <string>org.aai.gateway</string>
  <key>ProgramArguments</key>
  <array>
    <string>{exe}</string>
    <string>serve</string>
  </array>
  <key>EnvironmentVariables</key>
  <dict>
    <key>AAI_HOME</key>
    <string>{home}</string>
  </dict>
  <key>RunAtLoad</key>
  <true/>
  <key>KeepAlive</key>
  <dict>
    <key>SuccessfulExit</key>
    <false/>
  </dict>
  <key>ThrottleInterval</key>
  <integer>15</integer>
  <key>ProcessType</key>
  <string>Interactive</string>
  <key>StandardErrorPath</key>
  <string>{home}/logs/launchd.err.log</string>
</dict>
</plist>
"#
    )
}

fn task_scheduler(exe: &Path, aai_home: &Path) -> String {
    let exe = xml_escape(&exe.to_string_lossy());
    let home = xml_escape(&aai_home.to_string_lossy());
    // Task Scheduler restarts at a fixed interval of at least one minute.
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<Task version="1.4" xmlns="http://schemas.microsoft.com/windows/2004/02/mit/task">
  <RegistrationInfo>
    <Description>aai-gateway: one MCP server for your applications</Description>
    <URI>\aai-gateway</URI>
  </RegistrationInfo>
  <Triggers>
    <LogonTrigger>
      <Enabled>true</Enabled>
    </LogonTrigger>
  </Triggers>
  <Principals>
    <Principal id="Author">
      <LogonType>InteractiveToken</LogonType>
      <RunLevel>LeastPrivilege</RunLevel>
    </Principal>
  </Principals>
  <Settings>
    <MultipleInstancesPolicy>IgnoreNew</MultipleInstancesPolicy>
    <DisallowStartIfOnBatteries>false</DisallowStartIfOnBatteries>
    <StopIfGoingOnBatteries>false</StopIfGoingOnBatteries>
    <ExecutionTimeLimit>PT0S</ExecutionTimeLimit>
    <RestartOnFailure>
      <Interval>PT1M</Interval>
      <Count>999</Count>
    </RestartOnFailure>
    <Enabled>true</Enabled>
  </Settings>
  <Actions Context="Author">
    <Exec>
      <Command>{exe}</Command>
      <Arguments>serve</Arguments>
      <WorkingDirectory>{home}</WorkingDirectory>
    </Exec>
  </Actions>
</Task>
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_escaped_for_each_format() {
        let exe = Path::new("/opt/a b/100%$x\"/aai-gateway");
        let home = Path::new("/home/u/<&>");
        let unit = Manager::Systemd.unit(exe, home);
        assert!(
            unit.contains(r#"ExecStart="/opt/a b/100%%$$x\"/aai-gateway" serve"#),
            "{unit}"
        );
        assert!(
            unit.contains(r#"Environment="AAI_HOME=/home/u/<&>""#),
            "{unit}"
        );
        for manager in [Manager::Launchd, Manager::TaskScheduler] {
            let text = manager.unit(exe, home);
            assert!(text.contains("/home/u/&lt;&amp;&gt;"), "{text}");
            assert!(!text.contains("<&>"), "{text}");
        }
    }
}
