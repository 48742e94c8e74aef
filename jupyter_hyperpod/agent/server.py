"""The MCP server (the `mcp` SDK's low-level `Server`): its tools are the table of `tools.py`,
each with its input model's JSON Schema; its resources are a job's log and spec. Served over
stdio (`jupyter hyperpod mcp`) or streamable HTTP by the Jupyter server (`http.py`)."""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

from .._version import __version__
from ..core.errors import HyperPodError
from .tools import TOOLS, Agent, input_schema

NAME = "jupyter-hyperpod"
INSTRUCTIONS = (
    "Training jobs on this user's cluster (HyperPod EKS or Slurm, Slurm, or this machine). "
    "Discover (cluster, nodes, templates, files, read_file), preview with render, then submit "
    "with render's preview_token (when actions are on), follow with logs (follow_seconds, then "
    "offset), diagnose with why, compare runs with metrics. Paths are relative to the user's "
    "partition. `jupyter hyperpod mcp --skill` prints the whole workflow."
)
LOG_URI = re.compile(
    r"^hyperpod://jobs/(?P<job_id>[a-z0-9][-a-z0-9]{0,62})/log(?:/(?P<rank>\d+))?$"
)
SPEC_URI = re.compile(r"^hyperpod://jobs/(?P<job_id>[a-z0-9][-a-z0-9]{0,62})/spec$")
RESOURCE_JOBS = 20
"""The newest jobs listed as resources (any job's are read by their URI template)."""


def _text(value: Any) -> str:
    return json.dumps(value, indent=1, default=str)


def _error(error: HyperPodError) -> types.CallToolResult:
    field = f" (field: {error.field})" if error.field else ""
    body = {"error": {"code": error.code, "message": error.message, "field": error.field}}
    return types.CallToolResult(
        content=[types.TextContent(text=f"{error.code}: {error.message}{field}")],
        structured_content=body,
        is_error=True,
    )


def build_server(agent: Agent) -> Server[Any]:
    """One MCP server over `agent` (its API, policy and preview signer)."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=tool.name,
                    description=tool.description
                    + ("" if not tool.action or agent.policy.actions else " [actions are off]"),
                    input_schema=input_schema(tool),
                    annotations=types.ToolAnnotations(
                        read_only_hint=not tool.action,
                        destructive_hint=tool.name == "cancel",
                        idempotent_hint=not tool.action,
                    ),
                )
                for tool in TOOLS
            ]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            result = await anyio.to_thread.run_sync(agent.call, params.name, params.arguments)
        except HyperPodError as error:
            return _error(error)
        structured = result if isinstance(result, dict) else {"result": result}
        return types.CallToolResult(
            content=[types.TextContent(text=_text(result))], structured_content=structured
        )

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        page = await anyio.to_thread.run_sync(lambda: agent.api.jobs(limit=RESOURCE_JOBS))
        resources: list[types.Resource] = []
        for job in page.jobs:
            resources.append(
                types.Resource(
                    uri=f"hyperpod://jobs/{job.id}/log",
                    name=f"{job.id} log",
                    description=f"Rank 0's log of {job.name} ({job.state.value}), last 200 lines",
                    mime_type="text/plain",
                )
            )
            resources.append(
                types.Resource(
                    uri=f"hyperpod://jobs/{job.id}/spec",
                    name=f"{job.id} spec",
                    description=f"The spec {job.name} was submitted with",
                    mime_type="application/json",
                )
            )
        return types.ListResourcesResult(resources=resources)

    async def list_templates(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template="hyperpod://jobs/{job_id}/log/{rank}",
                    name="job log",
                    description="The last 200 lines of one rank's log of a job",
                    mime_type="text/plain",
                ),
                types.ResourceTemplate(
                    uri_template="hyperpod://jobs/{job_id}/spec",
                    name="job spec",
                    description="The spec a job was submitted with (after templates)",
                    mime_type="application/json",
                ),
            ]
        )

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)

        def read() -> tuple[str, str]:
            if match := LOG_URI.match(uri):
                rank = int(match["rank"] or 0)
                return agent.api.logs(match["job_id"], rank=rank, tail=200).text, "text/plain"
            if match := SPEC_URI.match(uri):
                job = agent.api.job(match["job_id"])
                return _text(job.spec.model_dump(mode="json")), "application/json"
            raise HyperPodError(
                f"no resource '{uri[:200]}': hyperpod://jobs/<id>/log[/<rank>] or "
                "hyperpod://jobs/<id>/spec"
            )

        try:
            text, mime = await anyio.to_thread.run_sync(read)
        except HyperPodError as error:
            from mcp.shared.exceptions import MCPError

            raise MCPError(types.INVALID_PARAMS, f"{error.code}: {error.message}") from None
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, text=text, mime_type=mime)]
        )

    return Server(
        NAME,
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )


async def serve_stdio(agent: Agent) -> None:
    """Serve MCP on this process's stdin/stdout until the client closes them."""
    server = build_server(agent)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


__all__ = ["INSTRUCTIONS", "NAME", "build_server", "serve_stdio"]
