"""Where Semantic Kernel's request path is touched: the chat-service wrapper, the execution guard, and
the composition that wires them onto a kernel (`create_tool_filter`, `enable_tool_filtering`)."""
