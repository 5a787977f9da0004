from __future__ import annotations

import json
import time
from typing import Annotated

from semantic_kernel.functions import kernel_function

from sk_toolfilter.demo._sandbox import sandbox_root


class MessagingPlugin:
    """Email and team chat. Offline: messages are queued in the sandbox outbox, not delivered."""

    def __init__(self, root: str | None = None) -> None:
        self.outbox = sandbox_root(root) / "outbox.jsonl"

    def _queue(self, record: dict[str, str]) -> str:
        record["queued_at"] = str(int(time.time()))
        with self.outbox.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
        return f"queued {record['kind']} to {record['to']}"

    @kernel_function(description="Send an email to a recipient with a subject and body.")
    def send_email(
        self,
        to: Annotated[str, "Recipient email address"],
        subject: Annotated[str, "Subject line"],
        body: Annotated[str, "Message text"],
    ) -> str:
        return self._queue({"kind": "email", "to": to, "subject": subject, "body": body})

    @kernel_function(description="Post a message to a Slack or Teams chat channel.")
    def post_to_channel(
        self, channel: Annotated[str, "Channel name, e.g. #general"], message: Annotated[str, "Message text"]
    ) -> str:
        return self._queue({"kind": "chat", "to": channel, "body": message})

    @kernel_function(description="Send a direct chat message to one person.")
    def send_direct_message(self, user: Annotated[str, "User name"], message: Annotated[str, "Message text"]) -> str:
        return self._queue({"kind": "dm", "to": user, "body": message})

    @kernel_function(description="List the messages and emails waiting in the outbox.")
    def list_outbox(self) -> str:
        if not self.outbox.exists():
            return "outbox is empty"
        rows = [json.loads(line) for line in self.outbox.read_text(encoding="utf-8").splitlines() if line]
        return "\n".join(f"{r['kind']} to {r['to']}: {r.get('subject') or r['body'][:40]}" for r in rows)
