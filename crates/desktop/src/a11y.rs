//! Finding UI elements: the AT-SPI accessibility tree over D-Bus (Linux), walked with a node
//! cap and a time budget, matched fuzzily on name, role and description; OCR text is the
//! fallback. Every hit's bounds are in the agent's space.
//!
//! The handful of AT-SPI calls (the bus address, `GetChildren`, `GetRoleName`, `Name`,
//! `Description`, `GetExtents`, `GetState`) are made with the gateway's own zbus: the `atspi`
//! crates pin zbus to another async runtime, which the gateway does not otherwise need.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aai_descriptor::AaiError;
use serde_json::{Value, json};
use zbus::zvariant::OwnedObjectPath;

use crate::desktop::backend::Desktop;
use crate::desktop::{DesktopConfig, Rect, Space};
use crate::ocr::Block;

/// Nodes looked at, at most, per search.
const NODE_CAP: usize = 3000;
/// How long a search of the tree may take.
const BUDGET: Duration = Duration::from_millis(1500);
/// Hits below this score are not returned.
const THRESHOLD: f64 = 0.6;

/// One element found.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub description: String,
    pub role: String,
    /// Agent space.
    pub bounds: Rect,
    pub confidence: f64,
    pub source: &'static str,
}

impl Hit {
    pub fn to_json(&self) -> Value {
        json!({
            "description": self.description,
            "role": self.role,
            "center": {"x": self.bounds.x + (self.bounds.width / 2) as i32,
                       "y": self.bounds.y + (self.bounds.height / 2) as i32},
            "bounds": self.bounds.to_json(),
            "confidence": (self.confidence * 1000.0).round() / 1000.0,
            "source": self.source,
        })
    }
}

/// Words of a description that name a role, and the AT-SPI role names they mean.
const ROLE_WORDS: &[(&str, &[&str])] = &[
    ("button", &["push button", "toggle button", "button"]),
    ("field", &["text", "entry", "password text", "spin button"]),
    ("input", &["text", "entry", "password text"]),
    ("textbox", &["text", "entry"]),
    ("entry", &["text", "entry"]),
    ("label", &["label", "static"]),
    ("link", &["link"]),
    ("checkbox", &["check box"]),
    ("check", &["check box"]),
    ("radio", &["radio button"]),
    ("menu", &["menu", "menu item"]),
    ("tab", &["page tab"]),
    ("combo", &["combo box"]),
    ("dropdown", &["combo box"]),
    ("slider", &["slider"]),
    ("list", &["list", "list item"]),
    ("icon", &["icon"]),
    ("image", &["image", "icon"]),
];

/// A description split into the words naming the element and the roles it asks for.
struct Query {
    name: String,
    roles: Vec<String>,
}

impl Query {
    fn new(description: &str, role: Option<&str>) -> Self {
        let mut roles: Vec<String> = Vec::new();
        let mut words = Vec::new();
        for word in description.to_lowercase().split_whitespace() {
            let word = bare_word(word);
            match ROLE_WORDS.iter().find(|(w, _)| *w == word) {
                Some((_, names)) => roles.extend(names.iter().map(|n| (*n).to_owned())),
                None if matches!(word, "the" | "a" | "an" | "") => {}
                None => words.push(fold(word)),
            }
        }
        if let Some(role) = role {
            let role = role.to_lowercase();
            roles = ROLE_WORDS.iter().find(|(w, _)| *w == role).map_or_else(
                || vec![role.clone()],
                |(_, names)| names.iter().map(|n| (*n).to_owned()).collect(),
            );
        }
        Self {
            name: words.join(" "),
            roles,
        }
    }

    /// How well a node with this name, role and description matches (0–1).
    fn score(&self, name: &str, role: &str, description: &str) -> f64 {
        let role_ok = self.roles.is_empty() || self.roles.iter().any(|r| role == r);
        if !role_ok {
            return 0.0;
        }
        if self.name.is_empty() {
            return if self.roles.is_empty() { 0.0 } else { 0.7 };
        }
        // A name of one or two characters, or of symbols only (`+`, `=`, `<-`, `OK`, `7`), is
        // matched whole: as a substring it is in almost every name ("ok" in "Cookie"), and an
        // edit distance between such short strings says nothing.
        let short = self.name.chars().count() < 3 || !self.name.chars().any(char::is_alphanumeric);
        let text = |t: &str| {
            let t = fold(t.trim());
            if t.is_empty() {
                0.0
            } else if t == self.name {
                1.0
            } else if short {
                if t.split_whitespace().any(|word| word == self.name) {
                    0.85
                } else {
                    0.0
                }
            } else if t.contains(&self.name) || (self.name.contains(&t) && t.len() >= 3) {
                0.85
            } else {
                strsim::normalized_levenshtein(&t, &self.name) * 0.9
            }
        };
        text(name).max(text(description) * 0.9)
    }
}

/// A word of a description without the quotes and sentence punctuation around it; a word
/// that is only symbols (`+`, `=`, `<-`, `.`) keeps them, since they are the name asked for.
fn bare_word(word: &str) -> &str {
    let unquoted = word.trim_matches(|c: char| "\"'`\u{2018}\u{2019}\u{201C}\u{201D}".contains(c));
    if !unquoted.chars().any(char::is_alphanumeric) {
        return unquoted;
    }
    // `C++` and `M+` keep their symbols; only brackets and sentence punctuation go.
    unquoted
        .trim_start_matches(|c: char| "([{".contains(c))
        .trim_end_matches(|c: char| ".,;:!?)]}".contains(c))
}

/// Lowercase text with the look-alike symbols apps and agents write differently brought to
/// one spelling: the minus sign, dashes and hyphen to `-`, multiplication signs to `*`,
/// division signs to `/`, full-width `+` and `=` to ASCII, arrows to `<-` and `->`.
fn fold(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\u{2212}' | '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' | '\u{2014}'
            | '\u{FE63}' | '\u{FF0D}' => out.push('-'),
            '\u{00D7}' | '\u{2715}' | '\u{2716}' | '\u{2A2F}' | '\u{2217}' | '\u{22C5}'
            | '\u{FF0A}' => out.push('*'),
            '\u{00F7}' | '\u{2215}' | '\u{2044}' | '\u{FF0F}' => out.push('/'),
            '\u{FF0B}' => out.push('+'),
            '\u{FF1D}' => out.push('='),
            '\u{2190}' | '\u{27F5}' | '\u{232B}' | '\u{21E6}' => out.push_str("<-"),
            '\u{2192}' | '\u{27F6}' | '\u{21E8}' => out.push_str("->"),
            c => out.extend(c.to_lowercase()),
        }
    }
    out
}

/// OCR blocks that match `description`, best first.
pub fn match_text(blocks: &[Block], description: &str) -> Vec<Hit> {
    let query = Query::new(description, None);
    let mut hits: Vec<Hit> = blocks
        .iter()
        .filter_map(|block| {
            let name_score = Query {
                name: query.name.clone(),
                roles: Vec::new(),
            }
            .score(&block.text, "", "");
            let score = name_score * block.confidence.clamp(0.5, 1.0);
            (score >= THRESHOLD).then(|| Hit {
                description: block.text.clone(),
                role: "text".into(),
                bounds: block.bounds,
                confidence: score,
                source: "ocr",
            })
        })
        .collect();
    hits.sort_by(|a, b| b.confidence.total_cmp(&a.confidence));
    hits
}

async fn call<R>(
    conn: &zbus::Connection,
    dest: &str,
    path: &OwnedObjectPath,
    iface: &str,
    method: &str,
    args: &(impl serde::Serialize + zbus::zvariant::DynamicType),
) -> Result<R, zbus::Error>
where
    R: for<'d> zbus::zvariant::DynamicDeserialize<'d>,
{
    let reply = conn
        .call_method(Some(dest), path.as_str(), Some(iface), method, args)
        .await?;
    reply.body().deserialize::<R>()
}

async fn property(
    conn: &zbus::Connection,
    dest: &str,
    path: &OwnedObjectPath,
    name: &str,
) -> String {
    let value: Result<zbus::zvariant::OwnedValue, _> = call(
        conn,
        dest,
        path,
        "org.freedesktop.DBus.Properties",
        "Get",
        &("org.a11y.atspi.Accessible", name),
    )
    .await;
    value
        .ok()
        .and_then(|v| String::try_from(v).ok())
        .unwrap_or_default()
}

/// Connects to the accessibility bus the session bus names.
async fn a11y_bus(session_bus: Option<&str>) -> Result<zbus::Connection, AaiError> {
    let session = match session_bus {
        Some(address) => match zbus::connection::Builder::address(address) {
            Ok(builder) => builder.build().await,
            Err(e) => Err(e),
        },
        None => zbus::Connection::session().await,
    };
    let session = session.map_err(|e| {
        crate::desktop::not_supported(&format!(
            "no D-Bus session bus for the accessibility tree: {e}"
        ))
    })?;
    let path = OwnedObjectPath::try_from("/org/a11y/bus")
        .map_err(|e| aai_toolset::failed(e.to_string()))?;
    let address: String = call(
        &session,
        "org.a11y.Bus",
        &path,
        "org.a11y.Bus",
        "GetAddress",
        &(),
    )
    .await
    .map_err(|e| {
        crate::desktop::not_supported(&format!(
            "the accessibility bus (at-spi2-core) is not running: {e}"
        ))
    })?;
    zbus::connection::Builder::address(address.as_str())
        .map_err(|e| aai_toolset::failed(format!("accessibility bus address {address:?}: {e}")))?
        .build()
        .await
        .map_err(|e| aai_toolset::failed(format!("cannot reach the accessibility bus: {e}")))
}

/// Whether the accessibility bus answers, and how many applications it lists.
///
/// # Errors
/// Why the tree cannot be read.
pub async fn reachable(desktop: &Desktop) -> Result<String, AaiError> {
    let conn = a11y_bus(desktop.session_bus()).await?;
    let root = OwnedObjectPath::try_from("/org/a11y/atspi/accessible/root")
        .map_err(|e| aai_toolset::failed(e.to_string()))?;
    let apps: Vec<(String, OwnedObjectPath)> = call(
        &conn,
        "org.a11y.atspi.Registry",
        &root,
        "org.a11y.atspi.Accessible",
        "GetChildren",
        &(),
    )
    .await
    .map_err(|e| aai_toolset::failed(format!("the accessibility registry does not answer: {e}")))?;
    Ok(format!("AT-SPI ({} application(s))", apps.len()))
}

/// Searches the accessibility tree of every application for `description`.
///
/// # Errors
/// No accessibility bus, or no desktop to map coordinates with.
pub async fn locate(
    desktop: &Arc<Desktop>,
    config: &DesktopConfig,
    description: &str,
    role: Option<&str>,
) -> Result<Vec<Hit>, AaiError> {
    // The agent's space and the protected windows, from one look at the desktop.
    let (space, protected) = {
        let desktop = desktop.clone();
        let config = config.clone();
        crate::desktop::blocking(move || {
            let x = desktop.x11()?;
            let protected: Vec<Rect> = x
                .windows()
                .into_iter()
                .filter(|w| config.protects(&w.title, &w.class).is_some())
                .map(|w| w.bounds)
                .collect();
            Ok((Space::new(x.desktop(), config.max_edge()), protected))
        })
        .await?
    };
    let conn = a11y_bus(desktop.session_bus()).await?;
    let query = Query::new(description, role);
    let started = Instant::now();
    let root = OwnedObjectPath::try_from("/org/a11y/atspi/accessible/root")
        .map_err(|e| aai_toolset::failed(e.to_string()))?;
    let mut queue: Vec<(String, OwnedObjectPath, usize)> =
        vec![("org.a11y.atspi.Registry".to_owned(), root, 0)];
    let mut seen = 0usize;
    let mut hits = Vec::new();
    while let Some((dest, path, depth)) = queue.pop() {
        if seen >= NODE_CAP || started.elapsed() > BUDGET {
            break;
        }
        seen += 1;
        let children: Vec<(String, OwnedObjectPath)> = call(
            &conn,
            &dest,
            &path,
            "org.a11y.atspi.Accessible",
            "GetChildren",
            &(),
        )
        .await
        .unwrap_or_default();
        if depth > 0 {
            let name = property(&conn, &dest, &path, "Name").await;
            let role: String = call(
                &conn,
                &dest,
                &path,
                "org.a11y.atspi.Accessible",
                "GetRoleName",
                &(),
            )
            .await
            .unwrap_or_default();
            let about = property(&conn, &dest, &path, "Description").await;
            let score = query.score(&name, &role, &about);
            if score >= THRESHOLD {
                let extents: Result<(i32, i32, i32, i32), _> = call(
                    &conn,
                    &dest,
                    &path,
                    "org.a11y.atspi.Component",
                    "GetExtents",
                    &(0u32,),
                )
                .await;
                if let Ok((x, y, w, h)) = extents
                    && w > 0
                    && h > 0
                {
                    let physical = Rect::new(x, y, w as u32, h as u32);
                    let hidden = protected.iter().any(|p| p.intersect(&physical).is_some());
                    if !hidden && physical.intersect(&space.desktop).is_some() {
                        hits.push(Hit {
                            description: if name.is_empty() { about } else { name },
                            role,
                            bounds: space.rect_to_agent(physical),
                            confidence: score,
                            source: "a11y",
                        });
                    }
                }
            }
        }
        for (child_dest, child_path) in children.into_iter().rev() {
            queue.push((child_dest, child_path, depth + 1));
        }
    }
    hits.sort_by(|a, b| b.confidence.total_cmp(&a.confidence));
    tracing::debug!(
        nodes = seen,
        hits = hits.len(),
        ms = started.elapsed().as_millis() as u64,
        "accessibility search"
    );
    Ok(hits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_match_names_and_roles() {
        let q = Query::new("the OK button", None);
        assert_eq!(q.name, "ok");
        assert!(q.score("OK", "push button", "") >= 0.99);
        assert_eq!(q.score("OK", "label", ""), 0.0, "a label is not a button");
        assert!(q.score("Cancel", "push button", "") < THRESHOLD);
        let q = Query::new("search field", None);
        assert!(q.score("Search", "text", "") >= 0.99);
        let q = Query::new("Status", Some("label"));
        assert!(q.score("Status: ready", "label", "") >= 0.85);
        let blocks = vec![
            Block {
                text: "Press OK".into(),
                bounds: Rect::new(0, 0, 10, 10),
                confidence: 0.9,
            },
            Block {
                text: "Cancel".into(),
                bounds: Rect::new(0, 20, 10, 10),
                confidence: 0.9,
            },
        ];
        let hits = match_text(&blocks, "OK button");
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].description, "Press OK");
        assert_eq!(hits[0].source, "ocr");
    }

    /// The best hit among named nodes, as `locate` ranks them (ties keep tree order).
    fn best<'a>(query: &Query, nodes: &[(&'a str, &str, &str)]) -> Option<&'a str> {
        let mut scored: Vec<(f64, &str)> = nodes
            .iter()
            .map(|(name, role, about)| (query.score(name, role, about), *name))
            .filter(|(score, _)| *score >= THRESHOLD)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored.first().map(|(_, name)| *name)
    }

    #[test]
    fn symbols_and_short_words_are_matched_whole_and_exact_names_win() {
        // galculator's keypad as AT-SPI shows it (name, role, description), in tree order: the
        // backspace key `<-` comes first, and once won every symbol asked for.
        let keypad = [
            ("<-", "toggle button", "Backspace    BackSpace"),
            ("C", "toggle button", "Clear display    Alt+C"),
            (
                "AC",
                "toggle button",
                "Reset calculator (clear all)    Escape",
            ),
            ("%", "toggle button", "Percent"),
            ("=", "toggle button", "Enter"),
            ("7", "toggle button", "Seven    7"),
            ("17", "label", ""),
            ("*", "toggle button", "Multiply    KP *"),
            ("+/-", "toggle button", "Change sign"),
            ("+", "toggle button", "Sum    KP +"),
            ("-", "toggle button", "Subtract    KP -"),
            ("/", "toggle button", "Divide    KP /"),
            ("M+", "toggle button", "Add current display value to memory"),
            ("Cookie settings", "push button", ""),
            ("OK", "push button", ""),
        ];
        for (asked, expected) in [
            ("+", "+"),
            ("+ button", "+"),
            ("\"+\" button", "+"),
            ("=", "="),
            ("the = button", "="),
            ("\u{2212}", "-"),
            ("\u{00D7}", "*"),
            ("\u{00F7}", "/"),
            ("\u{2190}", "<-"),
            ("7", "7"),
            ("7 button", "7"),
            ("OK", "OK"),
            ("ok button", "OK"),
            ("OK.", "OK"),
            ("M+", "M+"),
        ] {
            assert_eq!(
                best(&Query::new(asked, None), &keypad),
                Some(expected),
                "{asked:?}"
            );
        }
        // Nothing near enough is nothing, not the first button.
        assert_eq!(best(&Query::new("\u{221A}", None), &keypad), None);
        assert_eq!(best(&Query::new("x", Some("button")), &keypad), None);
        // Longer names still match fuzzily, and a substring of a word is no match for a short one.
        let q = Query::new("cookie setting", None);
        assert!(q.score("Cookie settings", "push button", "") >= 0.85);
        assert_eq!(
            Query::new("ok", None).score("Cookie", "push button", ""),
            0.0
        );
        assert!(Query::new("7", None).score("", "push button", "Seven    7") > THRESHOLD);
    }
}
