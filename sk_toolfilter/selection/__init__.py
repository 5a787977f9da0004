"""Per-request policy over the index: `ToolFilterManager`, queries from conversations, visibility,
sticky lists, usage counts and the discovery plugin."""
