//! The browser's tools, one method each: navigation, reading pages, acting on them, tabs.

use super::*;

/// One call's view of the client's browser.
pub(super) struct Tools<'a> {
    pub(super) session: &'a mut Session,
    pub(super) policy: &'a DomainPolicy,
    pub(super) sandbox: &'a aai_sandbox::files::Sandbox,
    pub(super) snapshot: &'a mut Option<(String, Vec<String>)>,
    /// The user approved this very call (it was asked because it is sensitive).
    pub(super) approved: bool,
}

pub(super) fn invalid(message: impl Into<String>) -> AaiError {
    AaiError::new(ErrorKind::InvalidParams, message)
}

pub(super) fn blocked(blocked: &policy::Blocked) -> AaiError {
    AaiError::new(ErrorKind::PermissionDenied, blocked.message()).with_detail(
        json!({"reason": "domain_policy", "blocked": blocked.target, "rule": blocked.rule}),
    )
}

pub(super) fn str_arg<'v>(args: &'v Map<String, Value>, key: &str) -> Option<&'v str> {
    args.get(key).and_then(Value::as_str)
}

impl Tools<'_> {
    pub(super) fn page(&self) -> Result<Page<'_>, AaiError> {
        let tab = self
            .session
            .tab()
            .ok_or_else(|| failed("the browser has no tab open; open one with browser_tabs"))?;
        Ok(Page {
            cdp: &self.session.cdp,
            tab,
        })
    }

    pub(super) async fn run(
        &mut self,
        tool: &str,
        args: &Map<String, Value>,
    ) -> Result<Value, AaiError> {
        // Tabs a page opened (popups, target=_blank) are the client's tabs too.
        self.session.sync_tabs().await.map_err(failed)?;
        if self.session.tabs.is_empty() {
            self.session.open_tab().await.map_err(failed)?;
        }
        match tool {
            "browser_navigate" => self.navigate(args).await,
            "browser_snapshot" => self.snapshot(args).await,
            "browser_interact" => self.interact(args).await,
            "browser_extract" => self.extract(args).await,
            "browser_tabs" => self.tabs(args).await,
            "browser_wait" => self.wait(args).await,
            other => Err(crate::unknown("local.browser", other)),
        }
    }

    /// The refusals the proxy made since `mark`, for a result.
    pub(super) fn refused(&self, mark: u64) -> Vec<Value> {
        let mut seen = Vec::new();
        for r in self.session.proxy.refused_since(mark) {
            let entry = json!({"host": r.host, "rule": r.rule});
            if !seen.contains(&entry) {
                seen.push(entry);
            }
        }
        seen
    }

    /// The page's address checked again: a page that moved (a redirect, a script, a meta
    /// refresh) to a place the policy refuses is not read.
    pub(super) async fn check_page(&self) -> Result<(String, String), AaiError> {
        let page = self.page()?;
        let (url, title) = page.location().await?;
        if let Ok(parsed) = url::Url::parse(&url)
            && let Err(b) = self.policy.check_frame(&parsed, Some(self.sandbox))
        {
            return Err(blocked(&b));
        }
        Ok((url, title))
    }

    pub(super) async fn navigate(&mut self, args: &Map<String, Value>) -> Result<Value, AaiError> {
        let raw = str_arg(args, "url").unwrap_or_default();
        let url = self
            .policy
            .check_url(raw, self.sandbox)
            .map_err(|b| blocked(&b))?;
        let wait_until = str_arg(args, "wait_until").unwrap_or("load");
        let timeout = Duration::from_millis(
            args.get("timeout")
                .and_then(Value::as_u64)
                .unwrap_or(30_000),
        );
        let mark = self.session.proxy.mark();
        let mut events = self.session.cdp.subscribe();
        self.go(url.as_str(), wait_until, timeout).await?;
        settle(&self.page()?, &mut events).await;
        self.after_navigation(mark, url.as_str()).await
    }

    /// Navigates the current tab and waits for `wait_until`.
    pub(super) async fn go(
        &self,
        url: &str,
        wait_until: &str,
        timeout: Duration,
    ) -> Result<(), AaiError> {
        let page = self.page()?;
        let mut events = self.session.cdp.subscribe();
        let reply = page.send("Page.navigate", json!({"url": url})).await?;
        if let Some(error) = reply["errorText"].as_str().filter(|e| !e.is_empty()) {
            // Refused by the proxy: the caller explains with the rule, once the browser's
            // error page is in place.
            if error.contains("ERR_TUNNEL_CONNECTION_FAILED") {
                let session = page.tab.session.clone();
                let _ = tokio::time::timeout(Duration::from_secs(5), async {
                    loop {
                        match events.recv().await {
                            Ok(e)
                                if e.session.as_deref() == Some(session.as_str())
                                    && (e.method == "Page.loadEventFired"
                                        || (e.method == "Page.lifecycleEvent"
                                            && e.params["name"] == "load")) =>
                            {
                                return;
                            }
                            Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                            Err(_) => return,
                        }
                    }
                })
                .await;
                return Ok(());
            }
            return Err(AaiError::new(
                ErrorKind::ApiRequestFailed,
                format!("the browser could not open {url}: {error}"),
            ));
        }
        let Some(loader) = reply["loaderId"].as_str() else {
            return Ok(()); // same-document navigation
        };
        let frame = reply["frameId"].as_str().unwrap_or_default().to_owned();
        let event_name = match wait_until {
            "domcontentloaded" => "DOMContentLoaded",
            "networkidle" => "networkIdle",
            _ => "load",
        };
        let session = page.tab.session.clone();
        let waited = tokio::time::timeout(timeout, async {
            loop {
                match events.recv().await {
                    Ok(e)
                        if e.session.as_deref() == Some(session.as_str())
                            && e.method == "Page.lifecycleEvent"
                            && e.params["frameId"] == frame.as_str()
                            && e.params["name"] == event_name =>
                    {
                        // Redirects keep the loader; a new one means another navigation
                        // took over, which counts too.
                        let _ = loader;
                        return;
                    }
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(_) => return,
                }
            }
        })
        .await;
        if waited.is_err() {
            let (now, _) = page.location().await.unwrap_or_default();
            return Err(AaiError::new(
                ErrorKind::Timeout,
                format!(
                    "the page did not reach {wait_until} within {} ms (it shows {now} so far); call browser_wait or browser_snapshot to see it",
                    timeout.as_millis()
                ),
            ));
        }
        Ok(())
    }

    /// The result of a navigation: where the tab is, and what the policy refused on the way.
    pub(super) async fn after_navigation(
        &mut self,
        mark: u64,
        asked: &str,
    ) -> Result<Value, AaiError> {
        let refused = self.refused(mark);
        let page = self.page()?;
        let (url, title) = page.location().await?;
        // The tab ended on a page the policy refuses (a redirect, a meta refresh, a script
        // that moved it): name the rule.
        if let Ok(parsed) = url::Url::parse(&url) {
            let host_refused = parsed
                .host_str()
                .and_then(policy::normalize_host)
                .and_then(|h| refused.iter().find(|r| r["host"] == h.as_str()));
            if let Some(r) = host_refused {
                return Err(AaiError::new(
                    ErrorKind::PermissionDenied,
                    format!(
                        "the browser was sent from {asked} to {url}, which is blocked by the browser's domain policy: {}. Nothing was loaded from it.",
                        r["rule"].as_str().unwrap_or_default()
                    ),
                )
                .with_detail(json!({"reason": "domain_policy", "blocked": parsed.host_str(), "rule": r["rule"], "refused": refused})));
            }
            if let Err(b) = self.policy.check_frame(&parsed, Some(self.sandbox)) {
                return Err(blocked(&b));
            }
        }
        let mut out =
            json!({"url": url, "title": untrusted_short(&title), "tab": self.session.current});
        if !refused.is_empty() {
            out["refused"] = json!(refused);
        }
        *self.snapshot = None;
        Ok(out)
    }

    pub(super) async fn snapshot(&mut self, args: &Map<String, Value>) -> Result<Value, AaiError> {
        let max_tokens = args
            .get("max_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(8000) as usize;
        let (lines, id, start) = match str_arg(args, "cursor") {
            Some(cursor) => {
                let (id, at) = cursor
                    .split_once('.')
                    .and_then(|(id, at)| Some((id, at.parse::<usize>().ok()?)))
                    .ok_or_else(|| invalid(format!("{cursor:?} is not a snapshot cursor")))?;
                match self.snapshot.as_ref() {
                    Some((current, lines)) if current == id => (lines.clone(), id.to_owned(), at),
                    _ => {
                        return Err(invalid(
                            "that cursor belongs to an older snapshot; take a new browser_snapshot",
                        ));
                    }
                }
            }
            None => {
                let (url, title) = self.check_page().await?;
                let mut lines = vec![format!("page \"{}\" {url}", title.replace('"', "'"))];
                lines.extend(self.tree(str_arg(args, "selector")).await?);
                let mut raw = [0u8; 4];
                let _ = getrandom::fill(&mut raw);
                let id: String = raw.iter().map(|b| format!("{b:02x}")).collect();
                *self.snapshot = Some((id.clone(), lines.clone()));
                (lines, id, 0)
            }
        };
        let mut used = 0;
        let mut end = start;
        while end < lines.len() {
            let cost = aai_descriptor::guide::estimate_tokens(&lines[end]) + 1;
            if used + cost > max_tokens && end > start {
                break;
            }
            used += cost;
            end += 1;
        }
        let body = lines.get(start..end).unwrap_or_default().join("\n");
        let mut text = untrusted(&body);
        if end < lines.len() {
            let left: usize = lines[end..]
                .iter()
                .map(|l| aai_descriptor::guide::estimate_tokens(l) + 1)
                .sum();
            text.push_str(&format!(
                "\nMore of the page (about {left} tokens): browser_snapshot {{\"cursor\": \"{id}.{end}\"}}"
            ));
        }
        Ok(Value::String(text))
    }

    /// The accessibility tree of the page (or the part under `selector`) as lines, with the
    /// page's frames: a frame the policy refuses is named, not read.
    pub(super) async fn tree(&self, selector: Option<&str>) -> Result<Vec<String>, AaiError> {
        let page = self.page()?;
        if let Some(selector) = selector {
            let node = page.resolve(&Target::Selector(selector.to_owned())).await?;
            let tree = page
                .send(
                    "Accessibility.getPartialAXTree",
                    json!({"backendNodeId": node, "fetchRelatives": false}),
                )
                .await?;
            // The partial tree holds the node itself; its subtree comes from a full read.
            let full = page.send("Accessibility.getFullAXTree", json!({})).await?;
            let nodes = full["nodes"].as_array().cloned().unwrap_or_default();
            let root = tree["nodes"][0]["nodeId"].clone();
            let at = nodes.iter().position(|n| n["nodeId"] == root);
            let mut subset = nodes.clone();
            if let Some(at) = at {
                subset.swap(0, at);
            }
            return Ok(snapshot::render(&subset));
        }
        let frames = page.frames().await?;
        let mut lines = Vec::new();
        for (n, (frame, url)) in frames.iter().enumerate() {
            if n > 0 {
                if let Ok(parsed) = url::Url::parse(url)
                    && let Err(b) = self.policy.check_frame(&parsed, Some(self.sandbox))
                {
                    lines.push(format!("iframe {url} (not shown: {})", b.rule));
                    continue;
                }
                lines.push(format!("iframe {url}:"));
            }
            let tree = page
                .send("Accessibility.getFullAXTree", json!({"frameId": frame}))
                .await;
            match tree {
                Ok(tree) => {
                    let nodes = tree["nodes"].as_array().cloned().unwrap_or_default();
                    let indent = if n > 0 { " " } else { "" };
                    lines.extend(
                        snapshot::render(&nodes)
                            .into_iter()
                            .map(|l| format!("{indent}{l}")),
                    );
                }
                Err(_) if n > 0 => lines.push(" (a frame from another site: not read)".into()),
                Err(e) => return Err(e),
            }
        }
        Ok(lines)
    }

    pub(super) async fn interact(&mut self, args: &Map<String, Value>) -> Result<Value, AaiError> {
        self.check_page().await?;
        let action = str_arg(args, "action").unwrap_or_default();
        let value = str_arg(args, "value");
        let page = self.page()?;
        // Checked again right before acting: a page that turned a field into a password
        // field after the gate looked is not typed into unasked.
        if !self.approved
            && let Some(why) = sensitive(&page, args).await?
        {
            return Err(AaiError::new(
                ErrorKind::PermissionDenied,
                format!("this interaction needs the user's approval because {why}; the page changed after it was checked. Call again to be asked."),
            )
            .with_detail(json!({"reason": "sensitive"})));
        }
        let target = Target::from_args(args);
        let node = match &target {
            Some(t) => Some(page.resolve(t).await?),
            None => None,
        };
        let need = |what: &str| {
            invalid(format!(
                "{action} needs an element: pass ref (from browser_snapshot), selector or text{what}"
            ))
        };
        let mark = self.session.proxy.mark();
        let mut events = self.session.cdp.subscribe();
        let label = match node {
            Some(n) => page.facts(n).await?.label,
            None => String::new(),
        };
        match action {
            "click" | "hover" => {
                let node = node.ok_or_else(|| need(""))?;
                let (x, y) = page.center(node).await?;
                page.mouse("mouseMoved", x, y, "none").await?;
                if action == "click" {
                    page.mouse("mousePressed", x, y, "left").await?;
                    page.mouse("mouseReleased", x, y, "left").await?;
                }
            }
            "fill" => {
                let node = node.ok_or_else(|| need(""))?;
                let facts = page.facts(node).await?;
                if facts.select {
                    return Err(invalid("that element is a drop-down: use action select"));
                }
                if !facts.editable {
                    return Err(invalid(format!("{} is not a text field", facts.label)));
                }
                page.send("DOM.focus", json!({"backendNodeId": node}))
                    .await?;
                page.call_on(node, "function () { if (this.select) this.select(); else { const r = document.createRange(); r.selectNodeContents(this); const s = getSelection(); s.removeAllRanges(); s.addRange(r); } }", &[]).await?;
                match value.unwrap_or_default() {
                    "" => page.press("Delete").await?,
                    text => {
                        page.send("Input.insertText", json!({"text": text})).await?;
                    }
                }
            }
            "select" => {
                let node = node.ok_or_else(|| need(""))?;
                let wanted = value.ok_or_else(|| {
                    invalid("select needs the option's value or label in `value`")
                })?;
                let chosen = page
                    .call_on(node, r"function (want) {
                      if (this.tagName !== 'SELECT') return {error: 'not a drop-down (select element); click it instead'};
                      const names = want.split(',').map(s => s.trim().toLowerCase());
                      let hit = [];
                      for (const o of this.options) {
                        const on = names.includes(o.value.toLowerCase()) || names.includes(o.label.trim().toLowerCase());
                        if (on && (this.multiple || hit.length === 0)) { hit.push(o.label); o.selected = true; } else if (this.multiple) o.selected = false;
                      }
                      if (!hit.length) return {error: 'no option ' + JSON.stringify(want) + '; options: ' + Array.from(this.options).map(o => o.label).slice(0, 30).join(', ')};
                      this.dispatchEvent(new Event('input', {bubbles: true}));
                      this.dispatchEvent(new Event('change', {bubbles: true}));
                      return {selected: hit};
                    }", &[json!(wanted)])
                    .await?;
                if let Some(error) = chosen["error"].as_str() {
                    return Err(invalid(error.to_owned()));
                }
            }
            "scroll" => {
                if let Some(node) = node {
                    page.send("DOM.scrollIntoViewIfNeeded", json!({"backendNodeId": node}))
                        .await?;
                } else {
                    let amount = value.unwrap_or("down");
                    page.call(r"function (v) {
                      const h = innerHeight * 0.8;
                      if (v === 'top') scrollTo(0, 0); else if (v === 'bottom') scrollTo(0, document.documentElement.scrollHeight);
                      else if (v === 'up') scrollBy(0, -h); else if (v === 'down') scrollBy(0, h);
                      else { const n = Number(v); if (Number.isFinite(n)) scrollBy(0, n); }
                    }", &[json!(amount)]).await?;
                }
            }
            "press" => {
                let key = value.ok_or_else(|| {
                    invalid("press needs a key in `value` (Enter, Tab, Control+A, …)")
                })?;
                if let Some(node) = node {
                    page.send("DOM.focus", json!({"backendNodeId": node}))
                        .await?;
                }
                page.press(key).await?;
            }
            other => return Err(invalid(format!("{other:?} is not an action"))),
        }
        let navigated = settle(&page, &mut events).await;
        let added = self.session.sync_tabs().await.map_err(failed)?;
        let refused = self.refused(mark);
        let page = self.page()?;
        let (url, _) = page.location().await?;
        let mut out = json!({"done": action, "url": url});
        if !label.is_empty() {
            out["element"] = json!(untrusted_short(&label));
        }
        if navigated {
            out["navigated"] = json!(true);
            *self.snapshot = None;
        }
        if !added.is_empty() {
            out["new_tabs"] = json!(added);
        }
        if !refused.is_empty() {
            out["refused"] = json!(refused);
        }
        if let Ok(parsed) = url::Url::parse(&url)
            && let Err(b) = self.policy.check_frame(&parsed, Some(self.sandbox))
        {
            out["blocked"] = json!({"url": b.target, "rule": b.rule});
        }
        Ok(out)
    }

    pub(super) async fn extract(&mut self, args: &Map<String, Value>) -> Result<Value, AaiError> {
        let (url, _) = self.check_page().await?;
        let kind = str_arg(args, "type").unwrap_or("text");
        let selector = str_arg(args, "selector");
        let page = self.page()?;
        if kind == "screenshot" {
            return self.screenshot(args, &url).await;
        }
        let function = match kind {
            "text" => {
                "function (s) { const el = s ? document.querySelector(s) : document.body; return el ? {text: el.innerText} : {missing: true}; }"
            }
            "html" => {
                "function (s) { const el = s ? document.querySelector(s) : document.documentElement; return el ? {text: el.outerHTML} : {missing: true}; }"
            }
            "links" => {
                r"function (s) {
              const root = s ? document.querySelector(s) : document; if (!root) return {missing: true};
              const seen = new Set(), out = [];
              for (const a of root.querySelectorAll('a[href]')) {
                const url = a.href; if (!url || seen.has(url) || url.startsWith('javascript:')) continue; seen.add(url);
                out.push({text: (a.innerText || a.getAttribute('aria-label') || a.title || '').trim().replace(/\s+/g, ' ').slice(0, 200), url});
                if (out.length >= 1000) break;
              }
              return {json: out};
            }"
            }
            "tables" => {
                r"function (s) {
              const root = s ? document.querySelector(s) : document; if (!root) return {missing: true};
              const tables = root.tagName === 'TABLE' ? [root] : Array.from(root.querySelectorAll('table'));
              const text = c => (c.innerText || '').trim().replace(/\s+/g, ' ');
              return {json: tables.slice(0, 50).map(t => {
                const rows = Array.from(t.rows);
                let head = t.tHead && t.tHead.rows.length ? Array.from(t.tHead.rows[0].cells).map(text) : null;
                let body = rows.filter(r => !t.tHead || r.parentElement !== t.tHead);
                if (!head && body.length && Array.from(body[0].cells).every(c => c.tagName === 'TH')) { head = Array.from(body[0].cells).map(text); body = body.slice(1); }
                const out = body.map(r => { const cells = Array.from(r.cells).map(text);
                  if (!head) return cells; const o = {}; cells.forEach((v, i) => { o[head[i] || ('column ' + (i + 1))] = v; }); return o; });
                return {caption: t.caption ? text(t.caption) : undefined, columns: head || undefined, rows: out};
              })};
            }"
            }
            other => return Err(invalid(format!("{other:?} is not an extract type"))),
        };
        let got = page.call(function, &[json!(selector)]).await?;
        if got["missing"] == true {
            return Err(invalid(format!(
                "nothing on the page matches the selector {:?}",
                selector.unwrap_or_default()
            )));
        }
        let body = match got.get("json") {
            Some(v) => v.to_string(),
            None => got["text"].as_str().unwrap_or_default().to_owned(),
        };
        Ok(Value::String(format!(
            "{kind} of {url}\n{}",
            untrusted(&body)
        )))
    }

    pub(super) async fn screenshot(
        &self,
        args: &Map<String, Value>,
        url: &str,
    ) -> Result<Value, AaiError> {
        let page = self.page()?;
        // A frame the policy refuses (a file outside the sandbox) would show in the picture.
        for (_, frame_url) in page.frames().await?.iter().skip(1) {
            if let Ok(parsed) = url::Url::parse(frame_url)
                && let Err(b) = self.policy.check_frame(&parsed, Some(self.sandbox))
            {
                return Err(blocked(&b));
            }
        }
        let mut params = json!({"format": "png"});
        if let Some(selector) = str_arg(args, "selector") {
            let node = page.resolve(&Target::Selector(selector.to_owned())).await?;
            let _ = page
                .send("DOM.scrollIntoViewIfNeeded", json!({"backendNodeId": node}))
                .await;
            let model = page
                .send("DOM.getBoxModel", json!({"backendNodeId": node}))
                .await?;
            let b: Vec<f64> = model["model"]["border"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default();
            if b.len() == 8 {
                let (x0, y0) = (b[0].min(b[6]), b[1].min(b[3]));
                let (x1, y1) = (b[2].max(b[4]), b[5].max(b[7]));
                params["clip"] = json!({"x": x0, "y": y0, "width": (x1 - x0).max(1.0), "height": (y1 - y0).max(1.0), "scale": 1});
            }
        } else if args.get("full_page").and_then(Value::as_bool) == Some(true) {
            params["captureBeyondViewport"] = json!(true);
            let metrics = page.send("Page.getLayoutMetrics", json!({})).await?;
            let size = &metrics["cssContentSize"];
            params["clip"] = json!({"x": 0, "y": 0, "width": size["width"], "height": size["height"].as_f64().unwrap_or(800.0).min(16384.0), "scale": 1});
        }
        let shot = page.send("Page.captureScreenshot", params).await?;
        let data = shot["data"]
            .as_str()
            .ok_or_else(|| failed("the browser sent no image"))?;
        let bytes = data.len() / 4 * 3;
        Ok(json!({
            "url": url,
            aai_executor::rest::BINARY_KEY: {"mime": "image/png", "bytes": bytes, "base64": data},
        }))
    }

    pub(super) async fn tabs(&mut self, args: &Map<String, Value>) -> Result<Value, AaiError> {
        let action = str_arg(args, "action").unwrap_or("list");
        let index = args
            .get("index")
            .and_then(Value::as_u64)
            .map(|i| i as usize);
        let pick = |n: Option<usize>, len: usize| {
            n.filter(|&i| i < len).ok_or_else(|| {
                invalid(format!(
                    "{action} needs the index of one of the {len} tabs (browser_tabs list)"
                ))
            })
        };
        match action {
            "open" => {
                let url = match str_arg(args, "url") {
                    Some(raw) => Some(
                        self.policy
                            .check_url(raw, self.sandbox)
                            .map_err(|b| blocked(&b))?,
                    ),
                    None => None,
                };
                self.session.open_tab().await.map_err(failed)?;
                *self.snapshot = None;
                if let Some(url) = url {
                    let mark = self.session.proxy.mark();
                    self.go(url.as_str(), "load", Duration::from_secs(30))
                        .await?;
                    return self.after_navigation(mark, url.as_str()).await;
                }
            }
            "switch" => {
                let i = pick(index, self.session.tabs.len())?;
                self.session.current = i;
                let target = self.session.tabs[i].target.clone();
                let _ = self
                    .session
                    .cdp
                    .send(None, "Target.activateTarget", json!({"targetId": target}))
                    .await;
                *self.snapshot = None;
            }
            "close" => {
                let i = pick(
                    index.or(Some(self.session.current)),
                    self.session.tabs.len(),
                )?;
                self.session.close_tab(i).await.map_err(failed)?;
                if self.session.tabs.is_empty() {
                    self.session.open_tab().await.map_err(failed)?;
                }
                *self.snapshot = None;
            }
            "list" => {}
            other => return Err(invalid(format!("{other:?} is not a tabs action"))),
        }
        let mut lines = Vec::new();
        for (i, tab) in self.session.tabs.iter().enumerate() {
            let info = self
                .session
                .cdp
                .send(
                    None,
                    "Target.getTargetInfo",
                    json!({"targetId": tab.target}),
                )
                .await
                .unwrap_or_default();
            let info = &info["targetInfo"];
            lines.push(format!(
                "{i}{} {} \"{}\"",
                if i == self.session.current { "*" } else { "" },
                info["url"].as_str().unwrap_or_default(),
                info["title"].as_str().unwrap_or_default().replace('"', "'")
            ));
        }
        Ok(Value::String(format!(
            "tabs (* current):\n{}",
            untrusted(&lines.join("\n"))
        )))
    }

    pub(super) async fn wait(&mut self, args: &Map<String, Value>) -> Result<Value, AaiError> {
        let text = str_arg(args, "text");
        let selector = str_arg(args, "selector");
        if text.is_none() && selector.is_none() {
            return Err(invalid("browser_wait needs text or selector"));
        }
        let gone = args.get("gone").and_then(Value::as_bool).unwrap_or(false);
        let timeout = Duration::from_millis(
            args.get("timeout_ms")
                .and_then(Value::as_u64)
                .unwrap_or(10_000),
        );
        let deadline = Instant::now() + timeout;
        let page = self.page()?;
        const WAIT: &str = r"function (text, selector, gone, ms) {
          const found = () => selector ? (() => { const el = document.querySelector(selector); return !!el && el.getClientRects().length > 0; })()
                                       : ((document.body && document.body.innerText) || '').includes(text);
          const ok = () => found() !== gone;
          return new Promise(resolve => {
            if (ok()) return resolve(true);
            const obs = new MutationObserver(() => { if (ok()) { obs.disconnect(); clearTimeout(t); resolve(true); } });
            obs.observe(document, {subtree: true, childList: true, characterData: true, attributes: true});
            const t = setTimeout(() => { obs.disconnect(); resolve(false); }, ms);
          });
        }";
        // A navigation while waiting destroys the page's world: wait again in the new one.
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let world = match page.world(None).await {
                Ok(w) => w,
                Err(_) => continue,
            };
            let ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX);
            match page
                .call_in(
                    world,
                    WAIT,
                    &[json!(text), json!(selector), json!(gone), json!(ms)],
                    left,
                )
                .await
            {
                Ok(Value::Bool(true)) => {
                    let (url, _) = self.check_page().await?;
                    return Ok(json!({"found": !gone, "gone": gone, "url": url}));
                }
                Ok(_) => break,
                Err(e)
                    if e.message.contains("not a valid selector")
                        || e.message.contains("is not a valid") =>
                {
                    return Err(invalid(e.message));
                }
                Err(_) => {
                    // The context went away mid-wait; try again until the deadline.
                    tokio::task::yield_now().await;
                }
            }
        }
        Err(AaiError::new(
            ErrorKind::Timeout,
            format!(
                "{} did not {} within {} ms",
                text.map_or_else(
                    || format!("selector {:?}", selector.unwrap_or_default()),
                    |t| format!("text {t:?}")
                ),
                if gone { "go away" } else { "appear" },
                timeout.as_millis()
            ),
        ))
    }
}
