//! Working in one tab: finding elements (by snapshot ref, CSS selector or text), what an
//! element is (a password field, a payment form's submit), acting on it with trusted input
//! events, waiting, and reading the page. Every script runs in an isolated world of ours,
//! where the page's own JavaScript cannot change what our functions see; the agent's values
//! travel as call arguments, never as script text.

use std::time::Duration;

use aai_descriptor::{AaiError, ErrorKind};
use serde_json::{Value, json};

use super::cdp::Cdp;
use super::session::Tab;

/// A tab and the connection that drives it.
pub struct Page<'a> {
    pub cdp: &'a Cdp,
    pub tab: &'a Tab,
}

/// An element the agent pointed at: `ref`, `selector` or `text`.
#[derive(Debug, Clone)]
pub enum Target {
    Ref(String),
    Selector(String),
    Text(String),
}

impl Target {
    /// The target in `args`, if any.
    pub fn from_args(args: &serde_json::Map<String, Value>) -> Option<Self> {
        let get = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_owned);
        get("ref")
            .map(Self::Ref)
            .or_else(|| get("selector").map(Self::Selector))
            .or_else(|| get("text").map(Self::Text))
    }

    pub fn describe(&self) -> String {
        match self {
            Self::Ref(r) => format!("ref {r}"),
            Self::Selector(s) => format!("selector {s:?}"),
            Self::Text(t) => format!("text {t:?}"),
        }
    }
}

/// What an element is, read in our isolated world.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub password: bool,
    pub payment_form: bool,
    pub submits: bool,
    pub editable: bool,
    pub select: bool,
    pub label: String,
}

pub fn failed(message: impl std::fmt::Display) -> AaiError {
    AaiError::new(ErrorKind::AutomationFailed, message.to_string())
}

fn not_found(message: impl Into<String>) -> AaiError {
    AaiError::new(ErrorKind::InvalidParams, message)
}

/// Reads what an element is: `this` is the element.
const FACTS: &str = r"function () {
  const el = this, tag = el.tagName ? el.tagName.toLowerCase() : '';
  const ac = ((el.getAttribute && el.getAttribute('autocomplete')) || '').toLowerCase();
  const password = (tag === 'input' && el.type === 'password') || /(current|new)-password/.test(ac);
  const form = el.form || (el.closest && el.closest('form'));
  const words = f => [f.name, f.id, f.getAttribute('placeholder'), f.getAttribute('aria-label'), f.getAttribute('autocomplete')].join(' ').toLowerCase();
  const pay = f => /\bcc-(number|csc|exp|name)/.test(words(f)) || /card.?(number|num|no\b)|cc.?num|\bcvc\b|\bcvv\b|\bcsc\b|security.?code|expir|\biban\b/.test(words(f));
  const payment_form = !!form && Array.from(form.elements || []).some(pay);
  const submits = !!form && ((tag === 'button' && (el.type || 'submit') === 'submit') || (tag === 'input' && /^(submit|image)$/.test(el.type)));
  const editable = tag === 'textarea' || (tag === 'input' && !/^(button|submit|reset|checkbox|radio|file|image|hidden|range|color)$/.test(el.type)) || !!el.isContentEditable;
  const label = (el.getAttribute && (el.getAttribute('aria-label') || el.getAttribute('name') || el.getAttribute('placeholder'))) || (el.innerText || el.value || '').slice(0, 60);
  return {password, payment_form, submits, editable, select: tag === 'select', label: tag + (label ? ' ' + JSON.stringify(label.trim()) : '')};
}";

/// Finds the element a person would mean by `text`: visible, interactive ones first, exact
/// matches before partial ones; a matching label gives its control.
const BY_TEXT: &str = r"function (text) {
  const want = text.trim().toLowerCase();
  const visible = el => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden';
  const said = el => [el.getAttribute('aria-label'), el.innerText, el.value, el.getAttribute('placeholder'), el.getAttribute('title'), el.getAttribute('alt')]
    .filter(v => typeof v === 'string').map(v => v.trim().toLowerCase());
  const tiers = ['a[href],button,input,select,textarea,summary,[role=button],[role=link],[role=tab],[role=menuitem],[role=checkbox],[role=option],[contenteditable=true],label', '*'];
  for (const exact of [true, false]) {
    for (const sel of tiers) {
      for (const el of document.querySelectorAll(sel)) {
        if (!visible(el)) continue;
        const hit = said(el).some(v => exact ? v === want : v.includes(want));
        if (!hit) continue;
        if (sel === '*' && Array.from(el.children).some(c => said(c).some(v => v.includes(want)))) continue;
        if (el.tagName === 'LABEL' && el.control) return el.control;
        return el;
      }
    }
  }
  return null;
}";

impl Page<'_> {
    fn session(&self) -> Option<&str> {
        Some(&self.tab.session)
    }

    /// Sends a command to this tab.
    pub async fn send(&self, method: &str, params: Value) -> Result<Value, AaiError> {
        self.cdp
            .send(self.session(), method, params)
            .await
            .map_err(failed)
    }

    /// The main frame's id.
    pub async fn main_frame(&self) -> Result<String, AaiError> {
        let tree = self.send("Page.getFrameTree", json!({})).await?;
        tree["frameTree"]["frame"]["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| failed("the tab has no main frame"))
    }

    /// Every frame's id and URL, the main frame first.
    pub async fn frames(&self) -> Result<Vec<(String, String)>, AaiError> {
        let tree = self.send("Page.getFrameTree", json!({})).await?;
        let mut out = Vec::new();
        let mut stack = vec![&tree["frameTree"]];
        while let Some(node) = stack.pop() {
            let frame = &node["frame"];
            out.push((
                frame["id"].as_str().unwrap_or_default().to_owned(),
                format!(
                    "{}{}",
                    frame["url"].as_str().unwrap_or_default(),
                    frame["urlFragment"].as_str().unwrap_or_default()
                ),
            ));
            if let Some(children) = node["childFrames"].as_array() {
                stack.extend(children.iter().rev());
            }
        }
        Ok(out)
    }

    /// A fresh isolated world in `frame` (the main frame when `None`).
    pub async fn world(&self, frame: Option<&str>) -> Result<i64, AaiError> {
        let frame = match frame {
            Some(f) => f.to_owned(),
            None => self.main_frame().await?,
        };
        let world = self
            .send(
                "Page.createIsolatedWorld",
                json!({"frameId": frame, "worldName": "aai-gateway"}),
            )
            .await?;
        world["executionContextId"]
            .as_i64()
            .ok_or_else(|| failed("the browser made no isolated world"))
    }

    /// Calls `function` in our world with `args` as values; returns its value.
    pub async fn call(&self, function: &str, args: &[Value]) -> Result<Value, AaiError> {
        let world = self.world(None).await?;
        self.call_in(world, function, args, Duration::from_secs(30))
            .await
    }

    /// [`Page::call`] in `world`, waiting at most `limit` (for a promise it returns).
    pub async fn call_in(
        &self,
        world: i64,
        function: &str,
        args: &[Value],
        limit: Duration,
    ) -> Result<Value, AaiError> {
        let arguments: Vec<Value> = args.iter().map(|v| json!({"value": v})).collect();
        let reply = self
            .cdp
            .send_within(
                self.session(),
                "Runtime.callFunctionOn",
                json!({"functionDeclaration": function, "executionContextId": world,
                       "arguments": arguments, "returnByValue": true, "awaitPromise": true}),
                limit + Duration::from_secs(2),
            )
            .await
            .map_err(failed)?;
        script_result(reply)
    }

    /// Calls `function` with `this` the element `node` (a backend node id), in our world.
    pub async fn call_on(
        &self,
        node: i64,
        function: &str,
        args: &[Value],
    ) -> Result<Value, AaiError> {
        let world = self.world(None).await?;
        let object = self
            .send(
                "DOM.resolveNode",
                json!({"backendNodeId": node, "executionContextId": world}),
            )
            .await
            .map_err(|_| gone(node))?;
        let object = object["object"]["objectId"]
            .as_str()
            .ok_or_else(|| gone(node))?
            .to_owned();
        let arguments: Vec<Value> = args.iter().map(|v| json!({"value": v})).collect();
        let reply = self
            .send(
                "Runtime.callFunctionOn",
                json!({"functionDeclaration": function, "objectId": object,
                       "arguments": arguments, "returnByValue": true, "awaitPromise": true}),
            )
            .await?;
        script_result(reply)
    }

    /// The backend node id of the element `target` names.
    pub async fn resolve(&self, target: &Target) -> Result<i64, AaiError> {
        match target {
            Target::Ref(r) => {
                let node: i64 = r.trim().trim_start_matches('e').parse().map_err(|_| {
                    not_found(format!(
                        "{r:?} is not a ref from browser_snapshot (they look like e42)"
                    ))
                })?;
                self.send("DOM.describeNode", json!({"backendNodeId": node}))
                    .await
                    .map_err(|_| gone(node))?;
                Ok(node)
            }
            Target::Selector(selector) => {
                self.find(
                    "function (s) { return document.querySelector(s); }",
                    selector,
                    target,
                )
                .await
            }
            Target::Text(text) => self.find(BY_TEXT, text, target).await,
        }
    }

    async fn find(&self, function: &str, arg: &str, target: &Target) -> Result<i64, AaiError> {
        let world = self.world(None).await?;
        let reply = self
            .send(
                "Runtime.callFunctionOn",
                json!({"functionDeclaration": function, "executionContextId": world,
                       "arguments": [{"value": arg}], "returnByValue": false}),
            )
            .await?;
        if let Some(exception) = reply.get("exceptionDetails") {
            return Err(not_found(format!(
                "{} is not a valid selector: {}",
                target.describe(),
                exception_text(exception)
            )));
        }
        let Some(object) = reply["result"]["objectId"].as_str() else {
            return Err(not_found(format!(
                "no element on the page matches {}; take a browser_snapshot to see what is there",
                target.describe()
            )));
        };
        let node = self
            .send("DOM.describeNode", json!({"objectId": object}))
            .await?;
        node["node"]["backendNodeId"]
            .as_i64()
            .ok_or_else(|| failed("the element has no node id"))
    }

    /// What the element is.
    pub async fn facts(&self, node: i64) -> Result<Facts, AaiError> {
        let v = self.call_on(node, FACTS, &[]).await?;
        let flag = |k: &str| v[k].as_bool().unwrap_or(false);
        Ok(Facts {
            password: flag("password"),
            payment_form: flag("payment_form"),
            submits: flag("submits"),
            editable: flag("editable"),
            select: flag("select"),
            label: v["label"].as_str().unwrap_or_default().to_owned(),
        })
    }

    /// The element that has the keyboard focus, if any.
    pub async fn focused(&self) -> Result<Option<i64>, AaiError> {
        let world = self.world(None).await?;
        let reply = self
            .send(
                "Runtime.callFunctionOn",
                json!({"functionDeclaration": "function () { let e = document.activeElement; while (e && e.shadowRoot && e.shadowRoot.activeElement) e = e.shadowRoot.activeElement; return e === document.body ? null : e; }",
                       "executionContextId": world, "returnByValue": false}),
            )
            .await?;
        let Some(object) = reply["result"]["objectId"].as_str() else {
            return Ok(None);
        };
        let node = self
            .send("DOM.describeNode", json!({"objectId": object}))
            .await?;
        Ok(node["node"]["backendNodeId"].as_i64())
    }

    /// The centre of the element in the viewport, scrolled into view.
    pub async fn center(&self, node: i64) -> Result<(f64, f64), AaiError> {
        let _ = self
            .send("DOM.scrollIntoViewIfNeeded", json!({"backendNodeId": node}))
            .await;
        let quads = self
            .send("DOM.getContentQuads", json!({"backendNodeId": node}))
            .await
            .map_err(|_| failed("the element is not visible (it has no box on the page)"))?;
        let quad = quads["quads"]
            .as_array()
            .and_then(|q| q.first())
            .and_then(Value::as_array)
            .ok_or_else(|| failed("the element is not visible (it has no box on the page)"))?;
        let n: Vec<f64> = quad.iter().filter_map(Value::as_f64).collect();
        if n.len() < 8 {
            return Err(failed("the element has no usable box"));
        }
        Ok((
            (n[0] + n[2] + n[4] + n[6]) / 4.0,
            (n[1] + n[3] + n[5] + n[7]) / 4.0,
        ))
    }

    /// A mouse event at (x, y).
    pub async fn mouse(&self, kind: &str, x: f64, y: f64, button: &str) -> Result<(), AaiError> {
        self.send(
            "Input.dispatchMouseEvent",
            json!({"type": kind, "x": x, "y": y, "button": button, "clickCount": 1}),
        )
        .await
        .map(drop)
    }

    /// Presses a key combination like `Enter`, `Control+A`, `Shift+Tab` or `é`.
    pub async fn press(&self, combo: &str) -> Result<(), AaiError> {
        let (modifiers, key) = parse_combo(combo)?;
        let (key_name, code, vk, text) = key_info(&key);
        let typed = if modifiers & !8 == 0 { text } else { None };
        let mut down = json!({"type": if typed.is_some() { "keyDown" } else { "rawKeyDown" },
            "key": key_name, "code": code, "windowsVirtualKeyCode": vk, "modifiers": modifiers});
        if let Some(text) = &typed {
            down["text"] = json!(text);
            down["unmodifiedText"] = json!(text);
        }
        self.send("Input.dispatchKeyEvent", down).await?;
        self.send(
            "Input.dispatchKeyEvent",
            json!({"type": "keyUp", "key": key_name, "code": code, "windowsVirtualKeyCode": vk, "modifiers": modifiers}),
        )
        .await
        .map(drop)
    }

    /// The current URL and title.
    pub async fn location(&self) -> Result<(String, String), AaiError> {
        let history = self.send("Page.getNavigationHistory", json!({})).await?;
        let index = history["currentIndex"].as_u64().unwrap_or(0) as usize;
        let entry = &history["entries"][index];
        Ok((
            entry["url"].as_str().unwrap_or_default().to_owned(),
            entry["title"].as_str().unwrap_or_default().to_owned(),
        ))
    }
}

fn gone(node: i64) -> AaiError {
    not_found(format!(
        "ref e{node} is not on the page any more; take a new browser_snapshot"
    ))
}

fn exception_text(exception: &Value) -> String {
    exception["exception"]["description"]
        .as_str()
        .or_else(|| exception["text"].as_str())
        .unwrap_or("error")
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

fn script_result(reply: Value) -> Result<Value, AaiError> {
    if let Some(exception) = reply.get("exceptionDetails") {
        return Err(failed(format!(
            "the page's script failed: {}",
            exception_text(exception)
        )));
    }
    Ok(reply["result"]["value"].clone())
}

/// `Control+Shift+A` → (modifier bits, key). Alt 1, Control 2, Meta 4, Shift 8.
fn parse_combo(combo: &str) -> Result<(i64, String), AaiError> {
    if combo.is_empty() {
        return Err(not_found(
            "press needs a key in `value` (e.g. Enter, Tab, Control+A)",
        ));
    }
    // A lone "+" is the key itself.
    let parts: Vec<&str> = if combo == "+" {
        vec!["+"]
    } else {
        combo.split('+').collect()
    };
    let (key, mods) = parts.split_last().ok_or_else(|| not_found("no key"))?;
    let mut bits = 0;
    for m in mods {
        bits |= match m.to_ascii_lowercase().as_str() {
            "alt" | "option" => 1,
            "control" | "ctrl" => 2,
            "meta" | "cmd" | "command" | "super" => 4,
            "shift" => 8,
            other => {
                return Err(not_found(format!(
                    "{other:?} is not a modifier (Alt, Control, Meta, Shift)"
                )));
            }
        };
    }
    if key.is_empty() {
        return Err(not_found(format!("{combo:?} names no key")));
    }
    Ok((bits, (*key).to_owned()))
}

/// DOM `key`, `code`, Windows virtual key code and the text a key types.
fn key_info(key: &str) -> (String, String, i64, Option<String>) {
    let named: &[(&str, &str, i64, Option<&str>)] = &[
        ("Enter", "Enter", 13, Some("\r")),
        ("Tab", "Tab", 9, None),
        ("Escape", "Escape", 27, None),
        ("Backspace", "Backspace", 8, None),
        ("Delete", "Delete", 46, None),
        ("ArrowUp", "ArrowUp", 38, None),
        ("ArrowDown", "ArrowDown", 40, None),
        ("ArrowLeft", "ArrowLeft", 37, None),
        ("ArrowRight", "ArrowRight", 39, None),
        ("Home", "Home", 36, None),
        ("End", "End", 35, None),
        ("PageUp", "PageUp", 33, None),
        ("PageDown", "PageDown", 34, None),
        ("Space", "Space", 32, Some(" ")),
        (" ", "Space", 32, Some(" ")),
    ];
    let aliases = [
        ("esc", "Escape"),
        ("return", "Enter"),
        ("up", "ArrowUp"),
        ("down", "ArrowDown"),
        ("left", "ArrowLeft"),
        ("right", "ArrowRight"),
        ("del", "Delete"),
    ];
    let lower = key.to_ascii_lowercase();
    let wanted = aliases
        .iter()
        .find(|(a, _)| *a == lower)
        .map_or(key, |(_, k)| k);
    if let Some((name, code, vk, text)) =
        named.iter().find(|(n, ..)| n.eq_ignore_ascii_case(wanted))
    {
        let name = if *name == " " { " " } else { name };
        return (
            (*name).to_owned(),
            (*code).to_owned(),
            *vk,
            text.map(str::to_owned),
        );
    }
    if let Some(n) = lower
        .strip_prefix('f')
        .and_then(|n| n.parse::<i64>().ok())
        .filter(|n| (1..=12).contains(n))
    {
        return (format!("F{n}"), format!("F{n}"), 111 + n, None);
    }
    let mut chars = key.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) if c.is_ascii_alphabetic() => (
            key.to_owned(),
            format!("Key{}", c.to_ascii_uppercase()),
            i64::from(c.to_ascii_uppercase() as u8),
            Some(key.to_owned()),
        ),
        (Some(c), None) if c.is_ascii_digit() => (
            key.to_owned(),
            format!("Digit{c}"),
            i64::from(c as u8),
            Some(key.to_owned()),
        ),
        _ => (key.to_owned(), String::new(), 0, Some(key.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_combinations() {
        assert_eq!(parse_combo("Enter").unwrap(), (0, "Enter".into()));
        assert_eq!(parse_combo("Control+Shift+a").unwrap(), (10, "a".into()));
        assert_eq!(parse_combo("+").unwrap(), (0, "+".into()));
        assert!(parse_combo("Hyper+a").is_err());
        assert!(parse_combo("").is_err());
        assert_eq!(key_info("enter").2, 13);
        assert_eq!(key_info("esc").0, "Escape");
        assert_eq!(key_info("a").1, "KeyA");
        assert_eq!(key_info("F5").2, 116);
        assert_eq!(key_info("é").3.as_deref(), Some("é"));
    }
}
