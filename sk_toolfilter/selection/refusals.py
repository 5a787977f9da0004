"""What the model is told when a tool call does not run (the same words in every framework)."""


def not_available(full_name: str) -> str:
    """The answer to a call of a tool this agent may never use (excluded or disabled)."""
    return f"error: {full_name} is not available to this agent."


def not_offered(full_name: str) -> str:
    """The answer to a call of a visible tool that was not sent with the request that called it."""
    return (
        f"{full_name} was not among the tools loaded for this step, so it did not run. "
        "It is loaded now: call it again if you still need it."
    )
