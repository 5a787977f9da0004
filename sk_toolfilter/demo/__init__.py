"""Native Semantic Kernel plugins bundled for the example agent; every one works offline.

Files, notes and the outbox live in a sandbox folder (``root``), never outside it.
"""

from sk_toolfilter.demo.files import FilesPlugin
from sk_toolfilter.demo.mathtools import MathPlugin
from sk_toolfilter.demo.messaging import MessagingPlugin
from sk_toolfilter.demo.notes import NotesPlugin
from sk_toolfilter.demo.text import TextPlugin
from sk_toolfilter.demo.timetools import TimePlugin

ALL_PLUGINS = {
    "Files": FilesPlugin,
    "Notes": NotesPlugin,
    "Math": MathPlugin,
    "Time": TimePlugin,
    "Text": TextPlugin,
    "Messaging": MessagingPlugin,
}

__all__ = [
    "ALL_PLUGINS",
    "FilesPlugin",
    "MathPlugin",
    "MessagingPlugin",
    "NotesPlugin",
    "TextPlugin",
    "TimePlugin",
]
