#!/usr/bin/python3
"""A window showing lines of text at GTK's default (small) size, for the OCR tests: argv[1] is the
window title, the rest are the lines, each a label of its own. Run with Debian's python3
(python3-gi, gir1.2-gtk-3.0). Prints the window's frame once it is shown:
"ready X Y WIDTH HEIGHT" in screen pixels."""

import sys

import gi

gi.require_version("Gtk", "3.0")
gi.require_version("Gdk", "3.0")
from gi.repository import GLib, Gtk  # noqa: E402

window = Gtk.Window(title=sys.argv[1])
window.move(80, 80)
box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=8, margin=16)
for line in sys.argv[2:]:
    label = Gtk.Label(label=line)
    label.set_xalign(0)
    box.pack_start(label, False, False, 0)
window.add(box)
window.connect("destroy", Gtk.main_quit)
window.show_all()


def announce():
    frame = window.get_window().get_frame_extents()
    print(f"ready {frame.x} {frame.y} {frame.width} {frame.height}", flush=True)
    return False


GLib.timeout_add(300, announce)
Gtk.main()
