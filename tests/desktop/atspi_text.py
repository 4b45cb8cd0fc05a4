#!/usr/bin/python3
"""Prints the text of the first editable text element named argv[2] in the application whose
window title contains argv[1], read through AT-SPI (gir1.2-atspi-2.0)."""

import sys

import gi

gi.require_version("Atspi", "2.0")
from gi.repository import Atspi  # noqa: E402


def walk(node, depth=0):
    yield node
    if depth > 30:
        return
    for i in range(node.get_child_count()):
        child = node.get_child_at_index(i)
        if child is not None:
            yield from walk(child, depth + 1)


desktop = Atspi.get_desktop(0)
for app_index in range(desktop.get_child_count()):
    app = desktop.get_child_at_index(app_index)
    if app is None:
        continue
    for node in walk(app):
        if node.get_name() == sys.argv[2]:
            text = node.get_text_iface()
            if text is not None:
                print(text.get_text(0, text.get_character_count()))
                sys.exit(0)
sys.exit(1)
