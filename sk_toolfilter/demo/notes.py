from __future__ import annotations

import json
from typing import Annotated

from semantic_kernel.functions import kernel_function

from sk_toolfilter.demo._sandbox import sandbox_root


class NotesPlugin:
    """Notes and remembered facts, stored as JSON in the sandbox folder."""

    def __init__(self, root: str | None = None) -> None:
        self.path = sandbox_root(root) / ".notes.json"

    def _load(self) -> dict[str, dict[str, str]]:
        if not self.path.exists():
            return {"notes": {}, "facts": {}}
        return json.loads(self.path.read_text(encoding="utf-8"))

    def _save(self, data: dict[str, dict[str, str]]) -> None:
        self.path.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")

    @kernel_function(description="Save a new note with a title and body text.")
    def add_note(self, title: Annotated[str, "Short title"], body: Annotated[str, "Note text"]) -> str:
        data = self._load()
        data["notes"][title] = body
        self._save(data)
        return f"saved note {title!r}"

    @kernel_function(description="List the titles of all saved notes.")
    def list_notes(self) -> str:
        return "\n".join(sorted(self._load()["notes"])) or "no notes"

    @kernel_function(description="Show the body of a saved note by its title.")
    def get_note(self, title: Annotated[str, "Note title"]) -> str:
        return self._load()["notes"].get(title, f"no note titled {title!r}")

    @kernel_function(description="Find notes whose title or text contains a keyword.")
    def search_notes(self, keyword: Annotated[str, "Word to look for"]) -> str:
        notes = self._load()["notes"]
        hits = [t for t, b in notes.items() if keyword.lower() in (t + " " + b).lower()]
        return "\n".join(sorted(hits)) or "no matching notes"

    @kernel_function(description="Delete a saved note by its title.")
    def delete_note(self, title: Annotated[str, "Note title"]) -> str:
        data = self._load()
        if data["notes"].pop(title, None) is None:
            return f"no note titled {title!r}"
        self._save(data)
        return f"deleted note {title!r}"

    @kernel_function(description="Remember a fact about the user for later (long-term memory), e.g. a preference.")
    def remember_fact(self, key: Annotated[str, "What the fact is about"], value: Annotated[str, "The fact"]) -> str:
        data = self._load()
        data["facts"][key] = value
        self._save(data)
        return f"remembered {key}"

    @kernel_function(
        description="Recall something the user told you earlier (a remembered fact or preference) "
        "from long-term memory."
    )
    def recall_fact(self, key: Annotated[str, "What the fact is about"]) -> str:
        return self._load()["facts"].get(key, f"nothing remembered about {key!r}")
