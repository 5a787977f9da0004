"""The model provider's wire, framework-neutral: httpx transports under the ``openai`` and ``anthropic``
SDK clients that Agent Framework and Semantic Kernel use, for what those frameworks have no field for —
deferred tools and the provider's tool search answered by the filter
(:mod:`sk_toolfilter.provider_wire.search_answer`)."""
