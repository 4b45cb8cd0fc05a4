// The gateway's fixed macOS desktop program (JXA, run as `osascript -l JavaScript -e <this>`).
// Every value arrives as JSON on stdin — {"tool", "args", "max_edge", "protected"} — and never
// becomes program text. The answer is one JSON object on stdout.
ObjC.import("Foundation");
ObjC.import("AppKit");
ObjC.import("CoreGraphics");
ObjC.import("ApplicationServices");
ObjC.import("Vision");

function readRequest() {
  const data = $.NSFileHandle.fileHandleWithStandardInput.readDataToEndOfFile;
  const text = $.NSString.alloc.initWithDataEncoding(data, $.NSUTF8StringEncoding).js;
  return JSON.parse(text);
}

function desktop() {
  const frame = $.NSScreen.mainScreen.frame;
  return { x: 0, y: 0, width: frame.size.width, height: frame.size.height };
}

function scaleFor(maxEdge) {
  const d = desktop();
  return Math.min(1, maxEdge / Math.max(d.width, d.height));
}

function toPoint(args, scale, xKey, yKey) {
  const d = desktop();
  const x = Math.min(Math.max(Number(args[xKey]) / scale, 0), d.width - 1);
  const y = Math.min(Math.max(Number(args[yKey]) / scale, 0), d.height - 1);
  return $.CGPointMake(x, y);
}

function post(type, point, button) {
  const event = $.CGEventCreateMouseEvent(null, type, point, button);
  $.CGEventPost($.kCGHIDEventTap, event);
}

function windows() {
  const list = ObjC.deepUnwrap($.CGWindowListCopyWindowInfo($.kCGWindowListOptionOnScreenOnly | $.kCGWindowListExcludeDesktopElements, 0)) || [];
  return list.filter((w) => w.kCGWindowLayer === 0).map((w) => ({
    id: w.kCGWindowNumber,
    title: w.kCGWindowName || "",
    app: w.kCGWindowOwnerName || "",
    pid: w.kCGWindowOwnerPID,
    bounds: { x: w.kCGWindowBounds.X, y: w.kCGWindowBounds.Y, width: w.kCGWindowBounds.Width, height: w.kCGWindowBounds.Height },
  }));
}

function frontmost() {
  const app = $.NSWorkspace.sharedWorkspace.frontmostApplication;
  return app ? app.localizedName.js : "";
}

function isProtected(request, name, title) {
  const text = (name + " " + title).toLowerCase();
  return (request.protected || []).find((p) => text.includes(p));
}

function refuseProtected(request) {
  const front = frontmost();
  const hit = windows().find((w) => w.app === front && isProtected(request, w.app, w.title));
  if (hit) throw new Error("protected:" + hit.app);
}

function keyCodeFor(name) {
  const codes = { return: 36, enter: 36, tab: 48, space: 49, backspace: 51, delete: 117, esc: 53, escape: 53,
    left: 123, right: 124, down: 125, up: 126, home: 115, end: 119, pageup: 116, pagedown: 121,
    f1: 122, f2: 120, f3: 99, f4: 118, f5: 96, f6: 97, f7: 98, f8: 100, f9: 101, f10: 109, f11: 103, f12: 111 };
  return codes[name.toLowerCase()];
}

function flagsFor(names) {
  const flags = { shift: $.kCGEventFlagMaskShift, ctrl: $.kCGEventFlagMaskControl, control: $.kCGEventFlagMaskControl,
    alt: $.kCGEventFlagMaskAlternate, option: $.kCGEventFlagMaskAlternate, cmd: $.kCGEventFlagMaskCommand,
    command: $.kCGEventFlagMaskCommand, super: $.kCGEventFlagMaskCommand };
  return names.reduce((all, n) => all | (flags[n.toLowerCase()] || 0), 0);
}

function typeUnicode(text, delayMs) {
  for (const ch of text) {
    for (const down of [true, false]) {
      const event = $.CGEventCreateKeyboardEvent(null, 0, down);
      $.CGEventKeyboardSetUnicodeString(event, ch.length, $(ch));
      $.CGEventPost($.kCGHIDEventTap, event);
    }
    if (delayMs > 0) delay(delayMs / 1000);
  }
}

function pressKeys(names) {
  const modifiers = names.filter((n) => flagsFor([n]) !== 0);
  const keys = names.filter((n) => flagsFor([n]) === 0);
  const flags = flagsFor(modifiers);
  for (const key of keys) {
    const code = keyCodeFor(key);
    for (const down of [true, false]) {
      const event = $.CGEventCreateKeyboardEvent(null, code === undefined ? 0 : code, down);
      if (code === undefined) $.CGEventKeyboardSetUnicodeString(event, key.length, $(key));
      $.CGEventSetFlags(event, flags);
      $.CGEventPost($.kCGHIDEventTap, event);
    }
  }
}

function capture(request, scale) {
  const image = $.CGWindowListCreateImage($.CGRectInfinite, $.kCGWindowListOptionOnScreenOnly, 0, $.kCGWindowImageDefault);
  const rep = $.NSBitmapImageRep.alloc.initWithCGImage(image);
  const png = rep.representationUsingTypeProperties($.NSBitmapImageFileTypePNG, $());
  const hidden = windows().filter((w) => isProtected(request, w.app, w.title)).map((w) => w.bounds);
  return { png: png.base64EncodedStringWithOptions(0).js, desktop: desktop(), pixels: { width: rep.pixelsWide, height: rep.pixelsHigh }, hidden: hidden, scale: scale };
}

// Text on screen with Apple's Vision framework (on-device, shipped with macOS): lines with
// their boxes in the agent's space; lines inside protected windows are left out.
function recognize(request, scale) {
  const image = $.CGWindowListCreateImage($.CGRectInfinite, $.kCGWindowListOptionOnScreenOnly, 0, $.kCGWindowImageDefault);
  const handler = $.VNImageRequestHandler.alloc.initWithCGImageOptions(image, $({}));
  const textRequest = $.VNRecognizeTextRequest.alloc.init;
  textRequest.recognitionLevel = $.VNRequestTextRecognitionLevelAccurate;
  handler.performRequestsError($([textRequest]), null);
  const d = desktop();
  const hidden = windows().filter((w) => isProtected(request, w.app, w.title)).map((w) => w.bounds);
  const region = (request.args || {}).region;
  const blocks = [];
  const results = textRequest.results;
  for (let i = 0; i < results.count; i++) {
    const observation = results.objectAtIndex(i);
    const best = observation.topCandidates(1).objectAtIndex(0);
    const box = observation.boundingBox;
    const x = box.origin.x * d.width;
    const y = (1 - box.origin.y - box.size.height) * d.height;
    const w = box.size.width * d.width;
    const h = box.size.height * d.height;
    if (hidden.some((b) => x < b.x + b.width && b.x < x + w && y < b.y + b.height && b.y < y + h)) continue;
    const bounds = { x: Math.round(x * scale), y: Math.round(y * scale), width: Math.round(w * scale), height: Math.round(h * scale) };
    if (region && (bounds.x + bounds.width < region.x || bounds.x > region.x + region.width || bounds.y + bounds.height < region.y || bounds.y > region.y + region.height)) continue;
    blocks.push({ text: best.string.js, bounds: bounds, confidence: best.confidence });
  }
  return { text: blocks.map((b) => b.text).join("\n"), blocks: blocks, engine: "Vision" };
}

function run() {
  const request = readRequest();
  const args = request.args || {};
  const scale = scaleFor(request.max_edge || 1568);
  const se = Application("System Events");
  try {
    switch (request.tool) {
      case "screenshot":
        return JSON.stringify(capture(request, scale));
      case "screen_ocr":
        return JSON.stringify(recognize(request, scale));
      case "mouse_move":
        post($.kCGEventMouseMoved, toPoint(args, scale, "x", "y"), $.kCGMouseButtonLeft);
        return JSON.stringify({ success: true, position: { x: args.x, y: args.y } });
      case "left_click":
      case "right_click":
      case "double_click": {
        refuseProtected(request);
        const point = toPoint(args, scale, "x", "y");
        const right = request.tool === "right_click";
        const times = request.tool === "double_click" ? 2 : 1;
        for (let i = 0; i < times; i++) {
          post(right ? $.kCGEventRightMouseDown : $.kCGEventLeftMouseDown, point, right ? $.kCGMouseButtonRight : $.kCGMouseButtonLeft);
          post(right ? $.kCGEventRightMouseUp : $.kCGEventLeftMouseUp, point, right ? $.kCGMouseButtonRight : $.kCGMouseButtonLeft);
        }
        return JSON.stringify({ success: true, position: { x: args.x, y: args.y } });
      }
      case "mouse_drag": {
        refuseProtected(request);
        const from = toPoint(args, scale, "from_x", "from_y");
        const to = toPoint(args, scale, "to_x", "to_y");
        post($.kCGEventLeftMouseDown, from, $.kCGMouseButtonLeft);
        const steps = Math.max(1, Math.round((args.duration_ms || 500) / 10));
        for (let i = 1; i <= steps; i++) {
          const p = $.CGPointMake(from.x + (to.x - from.x) * i / steps, from.y + (to.y - from.y) * i / steps);
          post($.kCGEventLeftMouseDragged, p, $.kCGMouseButtonLeft);
          delay(0.01);
        }
        post($.kCGEventLeftMouseUp, to, $.kCGMouseButtonLeft);
        return JSON.stringify({ success: true, position: { x: args.to_x, y: args.to_y } });
      }
      case "scroll": {
        refuseProtected(request);
        post($.kCGEventMouseMoved, toPoint(args, scale, "x", "y"), $.kCGMouseButtonLeft);
        const amount = args.amount || 3;
        const dy = args.direction === "up" ? amount : args.direction === "down" ? -amount : 0;
        const dx = args.direction === "left" ? amount : args.direction === "right" ? -amount : 0;
        $.CGEventPost($.kCGHIDEventTap, $.CGEventCreateScrollWheelEvent(null, $.kCGScrollEventUnitLine, 2, dy, dx));
        return JSON.stringify({ success: true, position: { x: args.x, y: args.y }, steps: amount });
      }
      case "type_text":
        refuseProtected(request);
        typeUnicode(String(args.text), args.delay_ms === undefined ? 10 : args.delay_ms);
        return JSON.stringify({ success: true, typed: Array.from(String(args.text)).length });
      case "key_press":
      case "hotkey":
        refuseProtected(request);
        pressKeys(args.keys || []);
        return JSON.stringify({ success: true, keys: args.keys });
      case "app_list": {
        const all = windows();
        const apps = {};
        for (const w of all) {
          const app = apps[w.pid] || (apps[w.pid] = { name: w.app, pid: w.pid, windows: [] });
          app.windows.push({ title: w.title, bounds: { x: Math.round(w.bounds.x * scale), y: Math.round(w.bounds.y * scale), width: Math.round(w.bounds.width * scale), height: Math.round(w.bounds.height * scale) }, focused: w.app === frontmost() });
        }
        return JSON.stringify({ apps: Object.values(apps).map((a) => args.include_windows ? a : { name: a.name, pid: a.pid, window_count: a.windows.length }) });
      }
      case "app_launch": {
        const app = Application(String(args.name));
        app.launch();
        return JSON.stringify({ launched: args.name });
      }
      case "app_switch":
        Application(String(args.name)).activate();
        return JSON.stringify({ switched: args.name, focused: frontmost() === String(args.name) });
      case "app_close": {
        const app = Application(String(args.name));
        if (args.force) {
          const running = $.NSRunningApplication.runningApplicationsWithBundleIdentifier(app.id());
          for (let i = 0; i < running.count; i++) running.objectAtIndex(i).forceTerminate;
        } else {
          app.quit();
        }
        return JSON.stringify({ app: args.name, closed: true });
      }
      case "window_manage": {
        const wanted = String(args.window_title).toLowerCase();
        for (const process of se.processes.whose({ backgroundOnly: false })()) {
          for (const window of process.windows()) {
            if (!String(window.name()).toLowerCase().includes(wanted)) continue;
            const b = args.bounds || {};
            if (args.action === "minimize") window.attributes["AXMinimized"].value = true;
            if (args.action === "restore") window.attributes["AXMinimized"].value = false;
            if (args.action === "maximize") { const d = desktop(); window.position = [0, 0]; window.size = [d.width, d.height]; }
            if (args.action === "move") window.position = [Math.round(b.x / scale), Math.round(b.y / scale)];
            if (args.action === "resize") window.size = [Math.round(b.width / scale), Math.round(b.height / scale)];
            if (args.action === "focus") { process.frontmost = true; window.actions["AXRaise"].perform(); }
            return JSON.stringify({ window: window.name(), action: args.action, done: true });
          }
        }
        throw new Error("no window matches " + JSON.stringify(args.window_title));
      }
      case "element_locate": {
        const wanted = String(args.description).toLowerCase();
        const hits = [];
        const front = se.processes.whose({ frontmost: true })();
        for (const process of front) {
          for (const element of process.entireContents()) {
            let name = "";
            try { name = String(element.name() || element.description() || ""); } catch (e) { continue; }
            if (!name || !wanted.includes(name.toLowerCase())) continue;
            const [x, y] = element.position();
            const [w, h] = element.size();
            hits.push({ description: name, role: String(element.role()), bounds: { x: Math.round(x * scale), y: Math.round(y * scale), width: Math.round(w * scale), height: Math.round(h * scale) }, source: "a11y", confidence: 0.9 });
            if (hits.length >= (args.max_results || 5)) break;
          }
        }
        return JSON.stringify({ found: hits.length > 0, elements: hits });
      }
      default:
        throw new Error("unknown tool " + request.tool);
    }
  } catch (error) {
    return JSON.stringify({ error: String(error.message || error) });
  }
}
