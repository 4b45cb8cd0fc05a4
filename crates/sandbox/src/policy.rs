//! The browser's domain policy: which hosts the browser may connect to, and which URLs an
//! agent may open. One decision serves both the policy proxy (every connection the browser
//! opens) and the tools (the URL an agent passes, the frames a page shows), and a refusal
//! always names the rule that made it.

use url::Url;

use crate::files::Sandbox;

/// Banking, payment and password-manager sites (`spec/desktop-control.zh.md` §7.4): refused
/// unless the user allows one by name in `browser.allow` or drops the defaults. A rule
/// matches the domain and every subdomain.
pub const SENSITIVE_DEFAULTS: &[(&str, &str)] = &[
    ("paypal.com", "payment"),
    ("stripe.com", "payment"),
    ("venmo.com", "payment"),
    ("wise.com", "payment"),
    ("revolut.com", "banking"),
    ("klarna.com", "payment"),
    ("alipay.com", "payment"),
    ("pay.weixin.qq.com", "payment"),
    ("pay.google.com", "payment"),
    ("chase.com", "banking"),
    ("bankofamerica.com", "banking"),
    ("wellsfargo.com", "banking"),
    ("citi.com", "banking"),
    ("capitalone.com", "banking"),
    ("usbank.com", "banking"),
    ("hsbc.com", "banking"),
    ("barclays.co.uk", "banking"),
    ("santander.com", "banking"),
    ("ing.com", "banking"),
    ("americanexpress.com", "banking"),
    ("schwab.com", "banking"),
    ("fidelity.com", "banking"),
    ("vanguard.com", "banking"),
    ("robinhood.com", "banking"),
    ("coinbase.com", "banking"),
    ("binance.com", "banking"),
    ("kraken.com", "banking"),
    ("1password.com", "password manager"),
    ("lastpass.com", "password manager"),
    ("bitwarden.com", "password manager"),
    ("dashlane.com", "password manager"),
    ("keepersecurity.com", "password manager"),
    ("nordpass.com", "password manager"),
];

/// Why the policy refused a host or a URL: the rule, in words a user can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// The host or URL refused.
    pub target: String,
    /// The rule that refused it (`browser.deny "example.com"`, `not in browser.allow`, …).
    pub rule: String,
}

impl Blocked {
    /// A sentence for the agent: what was refused, by which rule, and what could change it.
    pub fn message(&self) -> String {
        format!(
            "{} is blocked by the browser's domain policy: {}. Only the user can change it (`browser.allow` / `browser.deny` in the gateway's config.json).",
            self.target, self.rule
        )
    }
}

/// One host rule: `example.com` (the domain and its subdomains) or `*.example.com` (its
/// subdomains only).
#[derive(Debug, Clone)]
struct Rule {
    domain: String,
    subdomains_only: bool,
    /// How the rule is named in a refusal.
    name: String,
}

impl Rule {
    fn new(pattern: &str, name: impl Into<String>) -> Option<Self> {
        let pattern = pattern.trim();
        let (subdomains_only, domain) = match pattern.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, pattern),
        };
        let domain = normalize_host(domain)?;
        Some(Self {
            domain,
            subdomains_only,
            name: name.into(),
        })
    }

    fn matches(&self, host: &str) -> bool {
        let sub = host
            .strip_suffix(self.domain.as_str())
            .is_some_and(|head| head.ends_with('.'));
        sub || (!self.subdomains_only && host == self.domain)
    }
}

/// Where the browser may connect.
#[derive(Debug, Clone, Default)]
pub struct DomainPolicy {
    allow: Vec<Rule>,
    deny: Vec<Rule>,
    defaults: Vec<Rule>,
    /// The config section the refusals name.
    section: String,
}

impl DomainPolicy {
    /// The policy of `allow` and `deny` lists (host patterns), with the sensitive defaults
    /// unless `no_defaults`. A pattern that is no host is skipped with a log line.
    pub fn new(allow: &[String], deny: &[String], no_defaults: bool) -> Self {
        Self::keyed("browser", allow, deny, no_defaults)
    }

    /// [`DomainPolicy::new`] whose refusals name the config section `section` (`browser`,
    /// `local.egress`).
    pub fn keyed(section: &str, allow: &[String], deny: &[String], no_defaults: bool) -> Self {
        let rules = |list: &[String], key: &str| -> Vec<Rule> {
            list.iter()
                .filter_map(|p| {
                    let rule = Rule::new(p, format!("{section}.{key} \"{p}\""));
                    if rule.is_none() {
                        tracing::warn!(pattern = %p, "{section}.{key}: not a host pattern; ignored");
                    }
                    rule
                })
                .collect()
        };
        let defaults = if no_defaults {
            Vec::new()
        } else {
            SENSITIVE_DEFAULTS
                .iter()
                .filter_map(|(domain, kind)| {
                    Rule::new(
                        domain,
                        format!("the sensitive default \"{domain}\" ({kind})"),
                    )
                })
                .collect()
        };
        Self {
            allow: rules(allow, "allow"),
            deny: rules(deny, "deny"),
            defaults,
            section: section.to_owned(),
        }
    }

    /// Whether the browser may connect to `host` (any spelling: upper case, a trailing dot,
    /// an IDN, a numeric IPv4 form, a bracketed IPv6 address).
    pub fn check_host(&self, host: &str) -> Result<(), Blocked> {
        let Some(normal) = normalize_host(host) else {
            return Err(Blocked {
                target: host.to_owned(),
                rule: "it is not a valid host name".into(),
            });
        };
        let blocked = |rule: &Rule| Blocked {
            target: normal.clone(),
            rule: rule.name.clone(),
        };
        if let Some(rule) = self.deny.iter().find(|r| r.matches(&normal)) {
            return Err(blocked(rule));
        }
        let allowed = self.allow.iter().any(|r| r.matches(&normal));
        // A sensitive default gives way only to the user naming the site in the allow list.
        if !allowed && let Some(rule) = self.defaults.iter().find(|r| r.matches(&normal)) {
            return Err(blocked(rule));
        }
        if !self.allow.is_empty() && !allowed {
            return Err(Blocked {
                target: normal,
                rule: format!("it is not in {}.allow", self.section),
            });
        }
        Ok(())
    }

    /// The URL an agent asked to open, checked: http(s) to an allowed host, `about:blank`, or
    /// `file:` inside the file sandbox (after resolving symlinks). `data:`, `blob:`,
    /// `javascript:` and every other scheme are refused: their content comes from the agent
    /// or the page, not from a host the policy can judge. A bare `example.com/x` is https.
    pub fn check_url(&self, raw: &str, sandbox: &Sandbox) -> Result<Url, Blocked> {
        let raw = raw.trim();
        let url = match Url::parse(raw) {
            Ok(url) => url,
            Err(url::ParseError::RelativeUrlWithoutBase) => Url::parse(&format!("https://{raw}"))
                .map_err(|e| Blocked {
                target: raw.to_owned(),
                rule: format!("it is not a URL ({e})"),
            })?,
            Err(e) => {
                return Err(Blocked {
                    target: raw.to_owned(),
                    rule: format!("it is not a URL ({e})"),
                });
            }
        };
        self.check_parsed(&url, Some(sandbox))?;
        Ok(url)
    }

    /// Whether a page or frame at `url` may be shown or read. `sandbox` judges `file:` URLs
    /// (without one, every `file:` URL is refused). Pages the browser makes itself
    /// (`about:blank`, `about:srcdoc`, its error pages) and content a page made (`data:`,
    /// `blob:` of an allowed origin) pass: whatever they load still goes through the proxy.
    pub fn check_frame(&self, url: &Url, sandbox: Option<&Sandbox>) -> Result<(), Blocked> {
        match url.scheme() {
            "data" | "about" | "chrome-error" => Ok(()),
            "blob" => match Url::parse(url.path()) {
                Ok(inner) => self.check_frame(&inner, sandbox),
                Err(_) => Ok(()),
            },
            _ => self.check_parsed(url, sandbox),
        }
    }

    fn check_parsed(&self, url: &Url, sandbox: Option<&Sandbox>) -> Result<(), Blocked> {
        let refuse = |rule: String| Blocked {
            target: url.as_str().chars().take(200).collect(),
            rule,
        };
        match url.scheme() {
            "http" | "https" => {
                let host = url
                    .host_str()
                    .ok_or_else(|| refuse("it has no host".into()))?;
                self.check_host(host)
            }
            "about" if matches!(url.path(), "blank" | "srcdoc") => Ok(()),
            "file" => {
                let Some(sandbox) = sandbox else {
                    return Err(refuse("file: pages are not shown here".into()));
                };
                if url
                    .host_str()
                    .is_some_and(|h| !h.is_empty() && h != "localhost")
                {
                    return Err(refuse("file: URLs on another host are not allowed".into()));
                }
                let path = url
                    .to_file_path()
                    .map_err(|()| refuse("it is not a local file path".into()))?;
                sandbox
                    .check_read(&path.to_string_lossy())
                    .map(drop)
                    .map_err(|e| {
                        refuse(format!(
                            "file: URLs must be inside the file sandbox ({})",
                            e.message
                        ))
                    })
            }
            other => Err(refuse(format!(
                "the {other}: scheme is not allowed (only http, https, and file: inside the file sandbox)"
            ))),
        }
    }
}

/// A host as the policy compares it: parsed as a URL host would be (lower case, IDN as
/// punycode, numeric IPv4 forms as dotted quads), without a trailing dot or IPv6 brackets.
pub fn normalize_host(host: &str) -> Option<String> {
    let host = host.trim();
    if host.is_empty() || host.contains(['/', '@', '?', '#', ' ']) {
        return None;
    }
    // An IPv6 address without its brackets (a CONNECT target, once split from its port).
    if let Ok(ip) = host.parse::<std::net::Ipv6Addr>() {
        return Some(ip.to_string());
    }
    let url = Url::parse(&format!("http://{host}/")).ok()?;
    let parsed = match url.host()? {
        url::Host::Domain(d) => d.trim_end_matches('.').to_owned(),
        url::Host::Ipv4(ip) => ip.to_string(),
        url::Host::Ipv6(ip) => ip.to_string(),
    };
    (!parsed.is_empty()).then_some(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str], deny: &[&str]) -> DomainPolicy {
        let own = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        DomainPolicy::new(&own(allow), &own(deny), false)
    }

    #[test]
    fn hosts_match_in_every_spelling() {
        let p = policy(&[], &["denied.test", "*.sub.test"]);
        for host in [
            "denied.test",
            "DENIED.TEST",
            "denied.test.",
            "a.b.denied.test",
            "x.sub.test",
        ] {
            let blocked = p.check_host(host).expect_err(host);
            assert!(blocked.rule.contains("browser.deny"), "{blocked:?}");
        }
        for host in [
            "notdenied.test",
            "denied.test.evil",
            "sub.test",
            "allowed.test",
        ] {
            assert!(p.check_host(host).is_ok(), "{host}");
        }
        // Numeric IPv4 forms are one address.
        let p = policy(&[], &["127.0.0.2"]);
        for host in ["127.0.0.2", "0x7f.0.0.2", "2130706434", "127.2"] {
            assert!(p.check_host(host).is_err(), "{host}");
        }
        let p = policy(&[], &["[::1]"]);
        assert!(p.check_host("[::1]").is_err());
        assert!(p.check_host("[0:0::1]").is_err());
        // IDN: the unicode and punycode spellings are one host.
        let p = policy(&[], &["bücher.test"]);
        assert!(p.check_host("xn--bcher-kva.test").is_err());
        assert!(p.check_host("BÜCHER.test").is_err());
    }

    #[test]
    fn allow_list_and_defaults() {
        let p = policy(&["allowed.test"], &[]);
        assert!(p.check_host("allowed.test").is_ok());
        assert!(p.check_host("www.allowed.test").is_ok());
        let blocked = p.check_host("other.test").unwrap_err();
        assert_eq!(blocked.rule, "it is not in browser.allow");
        // Sensitive defaults hold with an empty allow list, and give way only to a name in it.
        let p = policy(&[], &[]);
        let blocked = p.check_host("www.paypal.com").unwrap_err();
        assert!(blocked.rule.contains("sensitive default"), "{blocked:?}");
        assert!(p.check_host("1password.com").is_err());
        let p = policy(&["paypal.com"], &[]);
        assert!(p.check_host("paypal.com").is_ok());
        // A deny rule wins over an allow rule.
        let p = policy(&["example.test"], &["example.test"]);
        assert!(p.check_host("example.test").is_err());
        let p = DomainPolicy::new(&[], &[], true);
        assert!(p.check_host("paypal.com").is_ok());
    }

    #[test]
    fn urls_agents_pass() {
        let dir = tempfile::tempdir().expect("dir");
        let inside = dir.path().join("page.html");
        std::fs::write(&inside, "<p>hi</p>").expect("write");
        let config = aai_toolset::SandboxConfig {
            allowed_directories: vec![dir.path().to_path_buf()],
            ..aai_toolset::SandboxConfig::default()
        };
        let sandbox = Sandbox::new(&config, &[], &[]);
        let p = policy(&[], &["denied.test"]);
        assert!(p.check_url("https://allowed.test/x", &sandbox).is_ok());
        assert_eq!(
            p.check_url("allowed.test/a", &sandbox).unwrap().as_str(),
            "https://allowed.test/a"
        );
        assert!(p.check_url("about:blank", &sandbox).is_ok());
        let file = Url::from_file_path(&inside).expect("file url");
        assert!(p.check_url(file.as_str(), &sandbox).is_ok());
        for (url, says) in [
            ("https://denied.test/", "browser.deny"),
            ("https://allowed.test@denied.test/", "browser.deny"),
            ("HTTPS://DENIED.TEST./", "browser.deny"),
            (
                "data:text/html,<script>location='https://denied.test'</script>",
                "data:",
            ),
            ("blob:https://allowed.test/1234", "blob:"),
            ("javascript:location='https://denied.test'", "javascript:"),
            ("file:///etc/passwd", "file sandbox"),
            ("chrome://settings", "chrome:"),
            ("view-source:https://allowed.test/", "view-source:"),
            ("ftp://allowed.test/", "ftp:"),
            ("ws://denied.test/", "ws:"),
        ] {
            let blocked = p.check_url(url, &sandbox).expect_err(url);
            assert!(blocked.rule.contains(says), "{url}: {blocked:?}");
        }
        // A symlink inside the sandbox to a file outside it is judged by where it leads.
        #[cfg(unix)]
        {
            let link = dir.path().join("link.html");
            std::os::unix::fs::symlink("/etc/hostname", &link).expect("symlink");
            let url = Url::from_file_path(&link).expect("file url");
            assert!(p.check_url(url.as_str(), &sandbox).is_err());
        }
    }

    #[test]
    fn frames_a_page_shows() {
        let p = policy(&[], &["denied.test"]);
        let ok = |u: &str| p.check_frame(&Url::parse(u).unwrap(), None);
        assert!(ok("about:blank").is_ok());
        assert!(ok("data:text/html,hi").is_ok());
        assert!(ok("blob:https://allowed.test/uuid").is_ok());
        assert!(ok("blob:https://denied.test/uuid").is_err());
        assert!(ok("https://denied.test/").is_err());
        assert!(ok("file:///etc/passwd").is_err());
    }
}
