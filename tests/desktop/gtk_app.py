#!/usr/bin/python3
"""A small GTK 3 app for the desktop tests: a label, a text field and an OK button that
changes the label, and a keypad window of symbol buttons. Run with Debian's python3 (python3-gi, gir1.2-gtk-3.0). Prints "ready" once
its window is shown.

It also offers the same actions as an app's own automation interface on the session bus
(org.aai.TestApp: Press, Status), described by org.aai.testapp.aai.json beside it, so one task
can be done both ways and compared (bench/)."""

import sys

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import Gio, GLib, Gtk  # noqa: E402

title = sys.argv[1] if len(sys.argv) > 1 else "AAI Test App"

window = Gtk.Window(title=title)
window.set_default_size(520, 260)
window.move(60, 60)
box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=16, margin=24)
label = Gtk.Label(label="Status: waiting")
label.get_accessible().set_name("Status")
css = Gtk.CssProvider()
css.load_from_data(b"* { font-size: 22px; }")
Gtk.StyleContext.add_provider_for_screen(window.get_screen(), css, Gtk.STYLE_PROVIDER_PRIORITY_APPLICATION)
entry = Gtk.Entry()
entry.get_accessible().set_name("Input field")
button = Gtk.Button(label="OK")


def clicked(_button):
    label.set_text("Status: clicked")


button.connect("clicked", clicked)
for widget in (label, entry, button):
    box.pack_start(widget, False, False, 0)
window.add(box)
window.connect("destroy", Gtk.main_quit)
window.show_all()

# A keypad of its own, right of the main window: buttons named by a symbol or a digit, as a
# calculator's are; each press is appended to the "Keys" label.
keypad = Gtk.Window(title=f"{title} Keypad")
keypad.move(760, 60)
pad = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=12, margin=16)
keys = Gtk.Label(label="")
keys.get_accessible().set_name("Keys")
row = Gtk.Box(spacing=8)
for symbol in ("7", "+", "\u2212", "\u00d7", "\u2190", "="):
    key = Gtk.Button(label=symbol)
    key.connect("clicked", lambda _b, s=symbol: keys.set_text(keys.get_text() + s))
    row.pack_start(key, False, False, 0)
pad.pack_start(keys, False, False, 0)
pad.pack_start(row, False, False, 0)
keypad.add(pad)
keypad.show_all()


def announce():
    print("ready", flush=True)
    return False


INTERFACE = """<node><interface name="org.aai.TestApp">
  <method name="Press"/>
  <method name="Status"><arg type="s" direction="out"/></method>
</interface></node>"""


def on_call(_conn, _sender, _path, _iface, method, _params, invocation):
    if method == "Press":
        button.clicked()
        invocation.return_value(None)
    elif method == "Status":
        invocation.return_value(GLib.Variant("(s)", (label.get_text(),)))


def on_bus(conn, _name):
    node = Gio.DBusNodeInfo.new_for_xml(INTERFACE)
    conn.register_object("/org/aai/TestApp", node.interfaces[0], on_call, None, None)


Gio.bus_own_name(Gio.BusType.SESSION, "org.aai.TestApp", Gio.BusNameOwnerFlags.NONE, on_bus, None, None)
GLib.timeout_add(300, announce)
Gtk.main()
