from __future__ import annotations

import re
import unicodedata
from typing import Annotated

from semantic_kernel.functions import kernel_function


class TextPlugin:
    """Text utilities."""

    @kernel_function(description="Count the words, sentences and characters in a text.")
    def count_words(self, text: Annotated[str, "The text"]) -> str:
        words = len(text.split())
        sentences = len([s for s in re.split(r"[.!?]+", text) if s.strip()])
        return f"{words} words, {sentences} sentences, {len(text)} characters"

    @kernel_function(description="Convert text to UPPER CASE, lower case or Title Case.")
    def change_case(self, text: Annotated[str, "The text"], case: Annotated[str, "upper, lower or title"]) -> str:
        return {"upper": text.upper(), "lower": text.lower(), "title": text.title()}.get(case.lower(), text)

    @kernel_function(description="Shorten a text to its first sentences, as a quick summary.")
    def summarize(self, text: Annotated[str, "The text"], sentences: Annotated[int, "How many sentences"] = 2) -> str:
        parts = re.split(r"(?<=[.!?])\s+", text.strip())
        return " ".join(parts[: max(1, sentences)])

    @kernel_function(description="Find and replace every occurrence of a phrase in a text.")
    def find_and_replace(
        self,
        text: Annotated[str, "The text"],
        find: Annotated[str, "Phrase to find"],
        replace: Annotated[str, "Replacement"],
    ) -> str:
        return text.replace(find, replace)

    @kernel_function(description="Extract all email addresses found in a text.")
    def extract_emails(self, text: Annotated[str, "The text"]) -> str:
        return "\n".join(dict.fromkeys(re.findall(r"[\w.+-]+@[\w-]+\.[\w.-]+", text))) or "none found"

    @kernel_function(description="Extract all web links (URLs) found in a text.")
    def extract_urls(self, text: Annotated[str, "The text"]) -> str:
        return "\n".join(dict.fromkeys(re.findall(r"https?://\S+", text))) or "none found"

    @kernel_function(description="Turn a title into a URL-friendly slug, e.g. 'Hello World!' -> 'hello-world'.")
    def slugify(self, text: Annotated[str, "The title"]) -> str:
        ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
        return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")

    @kernel_function(description="Reverse the order of the characters in a text.")
    def reverse_text(self, text: Annotated[str, "The text"]) -> str:
        return text[::-1]

    @kernel_function(description="Check whether a word or phrase is a palindrome.")
    def is_palindrome(self, text: Annotated[str, "Word or phrase"]) -> bool:
        letters = [c.lower() for c in text if c.isalnum()]
        return bool(letters) and letters == letters[::-1]
