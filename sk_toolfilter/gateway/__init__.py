"""The filter as an MCP gateway (``sk-toolfilter serve AGENT``): an agent file's whole catalog behind
ranked search for any MCP client, with the agent's visibility and learning from use. Above
:mod:`sk_toolfilter.agents` (it opens the agent file's tool sources through it); only the CLI imports it."""
