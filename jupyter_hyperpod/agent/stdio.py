"""`jupyter hyperpod mcp`: the MCP server on stdin/stdout, over the API the CLI opened (the
running server's REST client, or the core in this process)."""

from __future__ import annotations

import sys

from ..core.api import HyperPodAPI
from .tools import Agent, policy_for


def serve(api: HyperPodAPI, *, allow_actions: bool = False) -> None:
    """Serve until the agent closes stdin. Actions: c.HyperPodSettings.mcp_actions of the
    Jupyter configuration files (as the server reads them) and --allow-actions."""
    try:
        import anyio

        from .server import serve_stdio
    except ImportError:
        from ..cli.exits import EXIT_USAGE, CommandError

        raise CommandError(
            "jupyter hyperpod mcp needs the mcp package: pip install 'jupyter-hyperpod[mcp]'",
            EXIT_USAGE,
        ) from None
    from ..cli.session import load_settings

    setting = str(load_settings().mcp_actions)
    policy = policy_for(
        setting, allow_actions, "start it with jupyter hyperpod mcp --allow-actions"
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
