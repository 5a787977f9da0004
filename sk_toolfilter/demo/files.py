from __future__ import annotations

from typing import Annotated

from semantic_kernel.functions import kernel_function

from sk_toolfilter.demo._sandbox import inside, sandbox_root


class FilesPlugin:
    """Read and write files in a sandbox folder."""

    def __init__(self, root: str | None = None) -> None:
        self.root = sandbox_root(root)

    @kernel_function(description="List the files and folders in a folder of the workspace.")
    def list_files(self, folder: Annotated[str, "Folder path relative to the workspace"] = ".") -> str:
        path = inside(self.root, folder)
        if not path.is_dir():
            return f"no folder {folder!r}"
        entries = sorted(p.name + ("/" if p.is_dir() else "") for p in path.iterdir())
        return "\n".join(entries) or "(empty)"

    @kernel_function(description="Open a file and read its full text content.")
    def read_file(self, path: Annotated[str, "File path relative to the workspace"]) -> str:
        target = inside(self.root, path)
        return target.read_text(encoding="utf-8") if target.is_file() else f"no file {path!r}"

    @kernel_function(description="Save text to a file in the workspace, creating or overwriting it.")
    def write_file(
        self,
        path: Annotated[str, "File path relative to the workspace"],
        content: Annotated[str, "Text to write"],
    ) -> str:
        target = inside(self.root, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {len(content)} characters to {path}"

    @kernel_function(description="Append text to the end of a file, creating it if needed.")
    def append_to_file(
        self,
        path: Annotated[str, "File path relative to the workspace"],
        content: Annotated[str, "Text to append"],
    ) -> str:
        target = inside(self.root, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a", encoding="utf-8") as f:
            f.write(content)
        return f"appended {len(content)} characters to {path}"

    @kernel_function(description="Delete a file from the workspace.")
    def delete_file(self, path: Annotated[str, "File path relative to the workspace"]) -> str:
        target = inside(self.root, path)
        if not target.is_file():
            return f"no file {path!r}"
        target.unlink()
        return f"deleted {path}"

    @kernel_function(description="Find which files mention a word or phrase: search the text of all files (like grep).")
    def search_in_files(self, phrase: Annotated[str, "Text to look for, case-insensitive"]) -> str:
        hits = []
        for file in sorted(self.root.rglob("*")):
            if not file.is_file():
                continue
            try:
                lines = file.read_text(encoding="utf-8").splitlines()
            except (UnicodeDecodeError, OSError):
                continue
            for number, line in enumerate(lines, 1):
                if phrase.lower() in line.lower():
                    hits.append(f"{file.relative_to(self.root)}:{number}: {line.strip()}")
        return "\n".join(hits[:50]) or "no matches"

    @kernel_function(description="Get the size in bytes and the last-modified time of a file.")
    def file_info(self, path: Annotated[str, "File path relative to the workspace"]) -> str:
        target = inside(self.root, path)
        if not target.exists():
            return f"no file {path!r}"
        stat = target.stat()
        return f"{path}: {stat.st_size} bytes, modified at unix time {int(stat.st_mtime)}"

    @kernel_function(description="Create a new folder (directory) in the workspace.")
    def create_folder(self, folder: Annotated[str, "Folder path relative to the workspace"]) -> str:
        inside(self.root, folder).mkdir(parents=True, exist_ok=True)
        return f"created {folder}"
