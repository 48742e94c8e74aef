"""`jupyter hyperpod mcp`: the MCP server on stdin/stdout, over the API the CLI opened (the
running server's REST client, or the core in this process)."""

from __future__ import annotations

import sys

from ..core.api import HyperPodAPI
from .tools import Agent, policy_for


def serve(api: HyperPodAPI, *, actions_setting: str, allow_actions: bool = False) -> None:
    """Serve until the agent closes stdin. Actions: the administrator's `actions_setting`
    (c.HyperPodSettings.mcp_actions, as the server reads it) and --allow-actions. Needs the
    mcp package (the caller says how to install it when it is missing)."""
    import anyio

    from .server import serve_stdio

    policy = policy_for(
        actions_setting, allow_actions, "start it with jupyter hyperpod mcp --allow-actions"
    )
    if allow_actions and not policy.actions:
        print(f"jupyter hyperpod mcp: read only: {policy.why_not}", file=sys.stderr)
    print(
        f"jupyter hyperpod mcp: serving {api.description} over stdio, "
        f"{'actions allowed' if policy.actions else 'read only'}",
        file=sys.stderr,
    )
    anyio.run(serve_stdio, Agent(api, policy))


__all__ = ["serve"]
