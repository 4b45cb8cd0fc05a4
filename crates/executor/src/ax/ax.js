// aai-gateway AX runner: the same program for every call. The app, the steps and every value
// arrive as JSON on stdin; nothing here is built from them, so no value can become code.
// Answers one JSON line: {"ok":true,"result":{...}} or {"ok":false,"error":{...}}.
ObjC.import('Foundation');

const NODE_CAP = 5000;
const NEAR_AT_MOST = 20;

function readRequest() {
  const data = $.NSFileHandle.fileHandleWithStandardInput.readDataToEndOfFile;
  const text = $.NSString.alloc.initWithDataEncoding(data, $.NSUTF8StringEncoding);
  return JSON.parse(ObjC.unwrap(text));
}

// Ends the run with an error of this kind.
function stop(kind, more) {
  return { aai: Object.assign({ kind: kind }, more || {}) };
}

function failed(message) {
  return stop('failed', { message: message });
}

// macOS refusing UI scripting or Apple events: never taken for a missing element.
const REFUSED = [-1719, -25211, -1743, -1744];

// What `read` gives, or `otherwise` when it fails (an element gone, a missing attribute).
function attempt(read, otherwise) {
  try {
    const value = read();
    return value === undefined ? otherwise : value;
  } catch (e) {
    if (e && REFUSED.indexOf(e.errorNumber) !== -1) throw e;
    return otherwise;
  }
}

function key(text) {
  return String(text === null || text === undefined ? '' : text).replace(/\s+/g, '').toLowerCase();
}

function present(text) {
  return text !== null && text !== undefined && typeof text !== 'object' && String(text) !== '';
}

// The children of a process or element, each with its role, role description and name
// (`name`, else `title`, else `description`, else a static text's value), read a property at
// a time for all of them.
function kids(ref, parent) {
  const specs = ref.uiElements;
  const roles = attempt(() => specs.role(), []);
  const n = roles.length;
  if (n === 0) return [];
  const all = (property) => {
    const values = attempt(() => specs[property](), []);
    return values.length === n ? values : new Array(n).fill(null);
  };
  const names = all('name');
  const titles = all('title');
  const descriptions = all('description');
  const roleDescriptions = all('roleDescription');
  const out = [];
  for (let i = 0; i < n; i++) {
    const role = String(roles[i] || '');
    let name = [names[i], titles[i], descriptions[i]].find(present);
    if (name === undefined && role === 'AXStaticText') {
      name = attempt(() => specs[i].value(), null);
    }
    out.push({
      ref: specs[i],
      parent: parent,
      role: role,
      roleDescription: String(roleDescriptions[i] || ''),
      name: present(name) ? String(name) : '',
    });
  }
  return out;
}

// A role matches the AX role with or without `AX`, or the role description, in any case,
// spaces aside: `button`, `AXButton`, `menu item`, `MenuItem`.
function roleMatches(node, role) {
  if (role === '*') return true;
  const want = key(role);
  const axRole = key(node.role);
  return want === axRole || want === axRole.replace(/^ax/, '') ||
    (node.roleDescription !== '' && want === key(node.roleDescription));
}

function segmentMatches(node, segment) {
  const nameOk = segment.name === null || segment.name === undefined ||
    segment.name === node.name.trim();
  return nameOk && roleMatches(node, segment.role);
}

function shownRole(node) {
  return node.role.replace(/^AX/, '');
}

// What a not-found error lists: elements of the role wanted first, then others with a name.
function addNear(node, segment, near) {
  const entry = { role: shownRole(node), name: node.name.trim() };
  if (roleMatches(node, segment.role)) {
    if (near.same.length < NEAR_AT_MOST) near.same.push(entry);
  } else if (entry.name !== '' && near.other.length < NEAR_AT_MOST) {
    near.other.push(entry);
  }
}

function nearList(near) {
  return near.same.concat(near.other).slice(0, NEAR_AT_MOST);
}

// The segment.nth node matching segment among `first` and their descendants, breadth first.
function descendant(first, segment, near) {
  const queue = first.slice();
  let count = 0;
  let looked = 0;
  while (queue.length > 0 && looked < NODE_CAP) {
    const node = queue.shift();
    looked++;
    if (segmentMatches(node, segment)) {
      count++;
      if (count === segment.nth) return node;
    } else {
      addNear(node, segment, near);
    }
    for (const child of kids(node.ref, node)) queue.push(child);
  }
  return null;
}

// The process whose name or bundle id is `app`, any case.
function findProcess(events, app) {
  const want = String(app).toLowerCase();
  const processes = events.processes;
  const names = attempt(() => processes.name(), []);
  const ids = attempt(() => processes.bundleIdentifier(), []);
  for (let i = 0; i < names.length; i++) {
    if (String(names[i]).toLowerCase() === want || String(ids[i] || '').toLowerCase() === want) {
      return processes.byName(names[i]);
    }
  }
  const background = attempt(() => processes.backgroundOnly(), []);
  const running = names.filter((name, i) => background[i] === false).slice(0, 60);
  throw stop('app_not_running', { running: running });
}

function refuseProtected(process, request) {
  const names = [String(request.app)];
  names.push(attempt(() => String(process.name()), ''));
  names.push(attempt(() => String(process.bundleIdentifier()), ''));
  for (const title of attempt(() => process.windows.name(), [])) names.push(String(title));
  for (const name of names) {
    const lower = name.toLowerCase();
    for (const pattern of request.protected || []) {
      if (pattern && lower.indexOf(String(pattern)) !== -1) {
        throw stop('protected', { pattern: String(pattern) });
      }
    }
  }
}

// The node a step's path names, or where the search stopped and what was there.
function find(process, step) {
  let first = kids(process, null);
  let node = null;
  for (let at = 0; at < step.segments.length; at++) {
    const near = { same: [], other: [] };
    node = descendant(first, step.segments[at], near);
    if (node === null) return { missing: { at: at, near: nearList(near) } };
    if (at + 1 < step.segments.length) first = kids(node.ref, node);
  }
  return { node: node };
}

function findOrStop(process, step) {
  const found = find(process, step);
  if (found.node) return found.node;
  throw stop('not_found', { path: step.path, at: found.missing.at, near: found.missing.near });
}

function waitFor(process, step) {
  const gone = step.action === 'gone';
  const until = Date.now() + Number(step.timeout_ms);
  for (;;) {
    const found = find(process, step);
    if (Boolean(found.node) !== gone) return;
    if (Date.now() >= until) {
      const more = { path: step.path, gone: gone, timeout_ms: step.timeout_ms };
      if (!gone && found.missing) {
        more.at = found.missing.at;
        more.near = found.missing.near;
      }
      throw stop('timeout', more);
    }
    delay(0.05);
  }
}

function actionNames(ref) {
  return attempt(() => ref.actions.name(), []).map(String);
}

// Performs an AX action: `use` names it (`AXPress`, `AXShowMenu`, `ShowMenu`; click, press
// and activate are AXPress); AXPress when it does not.
function press(ref, use) {
  // `pointer` (a click where the element shows) is the element's own press here: AX does not
  // run a modal dialog inside the call that pressed it.
  let want = use && String(use) !== 'pointer' ? String(use) : 'AXPress';
  if (['click', 'press', 'activate'].indexOf(want.toLowerCase()) !== -1) want = 'AXPress';
  if (!/^AX/i.test(want)) want = 'AX' + want.charAt(0).toUpperCase() + want.slice(1);
  const names = actionNames(ref);
  const found = names.find((name) => name.toLowerCase() === want.toLowerCase());
  if (found === undefined) {
    throw failed('it has no action ' + want + '; it has ' + (names.join(', ') || 'none'));
  }
  ref.actions.byName(found).perform();
}

function setValue(ref, value, what) {
  attempt(() => { ref.focused = true; }, null);
  try {
    ref.value = value;
  } catch (e) {
    if (e && REFUSED.indexOf(e.errorNumber) !== -1) throw e;
    throw failed(what + ' cannot be changed (read-only?): ' + e.message);
  }
}

// Its text: its value, else its name.
function textOf(node) {
  const value = attempt(() => node.ref.value(), null);
  return present(value) ? String(value) : node.name;
}

// A cell's text: its own, else its first child's.
function cellText(node) {
  const own = textOf(node);
  if (own !== '') return own;
  const inner = kids(node.ref, node);
  return inner.length > 0 ? textOf(inner[0]) : '';
}

// Selects it, or the item named by the step's text inside it (opening a pop-up first); an
// item that cannot be selected itself is pressed, or its row selected.
function select(node, step) {
  let target = node;
  let opened = false;
  if (step.text !== null && step.text !== undefined) {
    const item = { role: '*', name: String(step.text), nth: 1 };
    let near = { same: [], other: [] };
    target = descendant(kids(node.ref, node), item, near);
    if (target === null && actionNames(node.ref).indexOf('AXPress') !== -1) {
      press(node.ref, 'AXPress');
      opened = true;
      const until = Date.now() + 2000;
      while (target === null && Date.now() < until) {
        delay(0.05);
        near = { same: [], other: [] };
        target = descendant(kids(node.ref, node), item, near);
      }
    }
    if (target === null) {
      throw stop('not_found', { path: step.path, item: true, near: nearList(near) });
    }
  }
  const pressable = (n) => actionNames(n.ref).indexOf('AXPress') !== -1;
  if (opened || key(target.role) === 'axmenuitem') {
    if (pressable(target)) return press(target.ref, 'AXPress');
  }
  for (let n = target; n !== null && n !== node.parent; n = n.parent) {
    let done = false;
    try {
      n.ref.selected = true;
      done = true;
    } catch (e) {
      if (e && REFUSED.indexOf(e.errorNumber) !== -1) throw e;
    }
    if (done) return undefined;
    if (pressable(n)) return press(n.ref, 'AXPress');
  }
  throw failed('it cannot be selected');
}

function state(node) {
  const ref = node.ref;
  const out = {
    role: node.role,
    name: node.name,
    enabled: attempt(() => ref.enabled(), null),
    focused: attempt(() => ref.focused(), null),
    selected: attempt(() => ref.selected(), null),
  };
  const value = attempt(() => ref.value(), null);
  if (value !== null && typeof value !== 'object') out.value = value;
  out.states = ['enabled', 'focused', 'selected'].filter((name) => out[name] === true);
  if (out.role === 'AXCheckBox' || out.role === 'AXRadioButton') {
    if (value === 1) out.states.push('checked');
  }
  return out;
}

// A list's, table's or outline's rows: a row's text, or its cells' texts.
function rows(node) {
  const children = kids(node.ref, node);
  const marked = children.filter((child) => child.role === 'AXRow');
  const list = marked.length > 0 ? marked :
    children.filter((child) => ['AXScrollBar', 'AXColumn'].indexOf(child.role) === -1);
  return list.map((row) => {
    const cells = kids(row.ref, row).filter((cell) => cell.role !== 'AXColumn');
    return cells.length === 0 ? textOf(row) : cells.map(cellText);
  });
}

// An app greys out what it is not ready for and catches up on its own loop (a dialog's Save
// lights up once the app has seen the name set into its field; pressed before, the press is
// lost): a step that acts waits for its element to take input, a look every 50 ms.
const ENABLED_LOOKS = 60;

function awaitEnabled(node) {
  for (let looks = 1; attempt(() => node.ref.enabled(), true) === false; looks++) {
    if (looks >= ENABLED_LOOKS) throw failed(`it stayed disabled (greyed out) through ${ENABLED_LOOKS} looks 50 ms apart`);
    delay(0.05);
  }
}

function perform(node, step) {
  // A check box whose argument was not given is left as it is: nothing to wait for.
  const leftAlone = step.action === 'check' && typeof step.value !== 'boolean';
  if (!['read_text', 'read_state', 'read_rows'].includes(step.action) && !leftAlone) awaitEnabled(node);
  switch (step.action) {
    case 'invoke':
      press(node.ref, step.use);
      return undefined;
    case 'set_text':
      setValue(node.ref, String(step.text), 'its text');
      return undefined;
    case 'set_value':
      setValue(node.ref, Number(step.value), 'its value');
      return undefined;
    case 'select':
      select(node, step);
      return undefined;
    case 'check':
      // No value: the argument was not given, and the box is left as it is.
      if (typeof step.value === 'boolean' && (attempt(() => node.ref.value(), 0) === 1) !== step.value) {
        press(node.ref, '');
      }
      return undefined;
    case 'read_text':
      return textOf(node);
    case 'read_state':
      return state(node);
    case 'read_rows':
      return rows(node);
    default:
      throw failed('unknown action');
  }
}

function run() {
  let index = 0;
  try {
    const request = readRequest();
    const events = Application('System Events');
    const process = findProcess(events, request.app);
    refuseProtected(process, request);
    const results = {};
    for (; index < request.steps.length; index++) {
      const step = request.steps[index];
      if (step.action === 'wait' || step.action === 'gone') {
        waitFor(process, step);
      } else {
        const read = perform(findOrStop(process, step), step);
        if (read !== undefined) results[step.as] = read;
      }
    }
    return JSON.stringify({ ok: true, result: results });
  } catch (e) {
    const error = e && e.aai ? Object.assign({ step: index }, e.aai) : {
      kind: 'failed',
      step: index,
      message: String((e && e.message) || e),
      code: e && typeof e.errorNumber === 'number' ? e.errorNumber : null,
    };
    return JSON.stringify({ ok: false, error: error });
  }
}
