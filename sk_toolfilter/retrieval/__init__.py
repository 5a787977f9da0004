"""The ranking core: tokenizer, BM25, embeddings, fusion, exact names, cut-off and the `ToolIndex`.

It reads tool records and a query and returns ranked tools; it knows nothing of agents or chats.
"""
