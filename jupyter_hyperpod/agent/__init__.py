"""The agent interface: the one API (`HyperPodAPI`) as an MCP server, with a skill file.

`inputs` (each tool's input, as its REST route takes it), `tools` (the table of tools and the
policy: read-only unless actions are on, preview tokens, confirmations), `preview` (the
tokens), `explain` (why a job waits or failed, metrics in a few numbers), `server` (the MCP
server, stdio), `http` (the streamable-HTTP endpoint of the Jupyter server), `skill` (the
skill file: `skills/hyperpod-jobs/SKILL.md`)."""
