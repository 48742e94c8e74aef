"""The agent's tools: one table (tool -> its input model -> the API call -> the REST route it
mirrors), run over any `HyperPodAPI` (the core in the server, or the server's REST client).

Safe by default: the actions (submit, cancel) are refused unless the policy allows them;
`submit` needs the preview token that `render` returned for the same spec (an agent always
sees what it runs); `cancel` needs the job's name as well as its id. Every action is recorded
in the job's events as done "by an agent via MCP"."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from ..core.api import HyperPodAPI
from ..core.errors import Forbidden, InvalidRequest, validation_error
from ..core.models import Job, JobState
from .explain import explain, metrics_summary
from .inputs import (
    SPEC_SCHEMA,
    CancelInput,
    FilesInput,
    JobInput,
    JobsInput,
    LogsInput,
    NoInput,
    QueueInput,
    ReadFileInput,
    RenderInput,
    SubmitInput,
    ToolInput,
    WhyInput,
)
from .preview import PreviewSigner

AGENT = "by an agent via MCP"
MAX_FOLLOW_BYTES = 256 * 1024
"""The most log text one bounded follow returns (the agent continues from `offset`)."""


@dataclass(frozen=True)
class Policy:
    """Whether the actions are allowed, and why not (for the refusal)."""

    actions: bool
    why_not: str = ""


def policy_for(setting: str, asked: bool, how: str) -> Policy:
    """Actions by the admin's setting and the user's choice (`how` says how to make it)."""
    if setting == "off":
        return Policy(
            False,
            "the administrator turned agent actions off (c.HyperPodSettings.mcp_actions = 'off')",
        )
    if setting == "on" or asked:
        return Policy(True)
    return Policy(False, f"this MCP server is read-only: {how} to let the agent submit and cancel")


@dataclass(frozen=True)
class ToolDef:
    name: str
    description: str
    input: type[ToolInput]
    run: Callable[[Agent, Any], Any]
    route: tuple[str, str] | None = None
    """(method, OpenAPI path) of the REST route this tool mirrors; None: composed of others."""
    agent_only: frozenset[str] = frozenset()
    """Input fields the route does not take (they only exist for an agent)."""
    route_only: frozenset[str] = frozenset()
    """Route parameters the tool leaves out (with the reason in its description)."""
    action: bool = False


@dataclass
class Agent:
    """The tools over one API, with the policy and the preview signer of its server."""

    api: HyperPodAPI
    policy: Policy
    signer: PreviewSigner = field(default_factory=PreviewSigner)

    def call(self, name: str, arguments: dict[str, Any] | None) -> Any:
        """Run a tool: its input validated by its model, its result as JSON-ready data.
        Raises HyperPodError (a refusal with a message) as the REST route would."""
        tool = TOOLS_BY_NAME.get(name)
        if tool is None:
            raise InvalidRequest(f"no tool '{name}' (the tools: {', '.join(TOOLS_BY_NAME)})")
        try:
            given = tool.input.model_validate(arguments or {})
        except ValidationError as error:
            raise validation_error(error) from None
        if tool.action and not self.policy.actions:
            raise Forbidden(f"{name} is an action and actions are off: {self.policy.why_not}")
        return _jsonable(tool.run(self, given))


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    return value


# -- the tools ---------------------------------------------------------------------------------


def _cluster(agent: Agent, _: NoInput) -> Any:
    info = agent.api.cluster().model_dump(mode="json")
    info["agent_actions"] = agent.policy.actions
    return info


def _nodes(agent: Agent, _: NoInput) -> Any:
    return {"nodes": agent.api.nodes()}


def _templates(agent: Agent, _: NoInput) -> Any:
    return {"templates": agent.api.templates()}


def _files(agent: Agent, given: FilesInput) -> Any:
    return agent.api.files(given.path, offset=given.offset, limit=given.limit, sort=given.sort)


def _read_file(agent: Agent, given: ReadFileInput) -> Any:
    return agent.api.read_file(given.path, limit=given.limit)


def _render(agent: Agent, given: RenderInput) -> Any:
    rendered = agent.api.render(given.spec)
    result = rendered.model_dump(mode="json")
    result["preview_token"] = agent.signer.token(rendered)
    result["next"] = (
        "read `text`: it is exactly what submit runs; to run it, call submit with the same spec "
        "and this preview_token"
        if agent.policy.actions
        else f"actions are off, so this can only be previewed: {agent.policy.why_not}"
    )
    return result


def _submit(agent: Agent, given: SubmitInput) -> Any:
    if not given.preview_token:
        raise InvalidRequest(
            "submit needs the preview_token that render returns for this spec: call render "
            "with the same spec, read its text, then submit with its preview_token",
            field="preview_token",
        )
    rendered = agent.api.render(given.spec)  # validated and rendered as the submit will be
    if not agent.signer.matches(rendered, given.preview_token):
        raise InvalidRequest(
            "the preview_token is not the one render returned for this spec (the spec changed, "
            "or the token is from another server): call render with this spec again",
            field="preview_token",
        )
    job = agent.api.submit(given.spec)
    return agent.api.add_event(job.id, f"submitted {AGENT} (preview {given.preview_token[:12]})")


def _jobs(agent: Agent, given: JobsInput) -> Any:
    states: list[JobState] = []
    for value in filter(None, given.state.split(",")):
        try:
            states.append(JobState(value.strip().upper()))
        except ValueError:
            allowed = ", ".join(s.value for s in JobState)
            raise InvalidRequest(f"state must be one of {allowed}", field="state") from None
    return agent.api.jobs(states=states or None, limit=given.limit, offset=given.offset)


def _job(agent: Agent, given: JobInput) -> Any:
    return agent.api.job(given.job_id)


def _logs(agent: Agent, given: LogsInput) -> Any:
    api = agent.api
    if given.offset is None:
        snapshot = api.logs(given.job_id, rank=given.rank, tail=given.tail)
        text, offset, truncated = snapshot.text, snapshot.offset, snapshot.truncated
    else:
        api.job(given.job_id)  # the job exists and is this user's, before anything waits
        text, offset, truncated = "", given.offset, given.offset > 0
    end: dict[str, Any] | None = None
    if given.follow_seconds > 0:
        more, offset, end = _follow(api, given, offset)
        text += more
    job = api.job(given.job_id)
    return {
        "job_id": job.id,
        "rank": given.rank,
        "text": text,
        "offset": offset,
        "truncated": truncated,
        "state": job.state.value,
        "ended": end is not None or job.state.finished,
        "exit_code": end["exit_code"] if end else job.exit_code,
        "next": "" if job.state.finished else "call logs again with this offset to continue",
    }


def _follow(api: HyperPodAPI, given: LogsInput, offset: int) -> tuple[str, int, dict | None]:
    """Follow for at most `follow_seconds`: the stream is read in a thread that stops at its
    next event (data or heartbeat) after the deadline; the offset returned is that of the last
    text returned, so nothing is skipped by the next call."""
    events: queue.Queue[Any] = queue.Queue()
    stop = threading.Event()

    def read() -> None:
        stream = api.follow(given.job_id, rank=given.rank, offset=offset)
        try:
            for event in stream:
                events.put(event)
                if stop.is_set() or event.type in ("end", "error"):
                    break
        except Exception as error:  # handed to the caller's thread
            events.put(error)
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
            events.put(None)

    threading.Thread(target=read, name=f"mcp-follow-{given.job_id}", daemon=True).start()
    deadline = time.monotonic() + given.follow_seconds
    parts: list[str] = []
    size = 0
    end: dict[str, Any] | None = None
    try:
        while size < MAX_FOLLOW_BYTES:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                event = events.get(timeout=left)
            except queue.Empty:
                break
            if event is None:
                break
            if isinstance(event, Exception):
                raise event
            if event.type == "data" and event.data:
                parts.append(event.data)
                size += len(event.data)
                offset = event.offset if event.offset is not None else offset
            elif event.type == "end":
                end = {"state": event.state, "exit_code": event.exit_code}
                break
            elif event.type == "error":
                raise InvalidRequest(event.reason or "the log stream failed", field=event.field)
    finally:
        stop.set()
    return "".join(parts), offset, end


def _why(agent: Agent, given: WhyInput) -> Any:
    return explain(agent.api, given.job_id, lines=given.lines)


def _metrics(agent: Agent, given: JobInput) -> Any:
    return metrics_summary(agent.api.metrics(given.job_id))


def _queue(agent: Agent, given: QueueInput) -> Any:
    return agent.api.queue(
        mine=given.mine,
        state=given.state,
        partition=given.queue or None,
        offset=given.offset,
        limit=given.limit,
        fresh=given.refresh,
    )


def _cancel(agent: Agent, given: CancelInput) -> Any:
    job: Job = agent.api.job(given.job_id)
    if given.name != job.name:
        raise InvalidRequest(
            f"job {job.id} is named '{job.name}', not '{given.name[:60]}': pass its name to "
            "confirm which job to cancel",
            field="name",
        )
    if job.state.finished:
        return {"job": job, "note": f"job {job.id} had already ended ({job.state.value})"}
    agent.api.add_event(job.id, f"cancel requested {AGENT}")
    return {"job": agent.api.cancel(job.id), "note": f"cancelled {job.id}"}


TOOLS: list[ToolDef] = [
    ToolDef(
        "cluster",
        "The cluster (local, Slurm or Kubernetes), the user, the partition, what the backend "
        "can do, and whether this agent may act (agent_actions)",
        NoInput,
        _cluster,
        ("get", "/cluster"),
    ),
    ToolDef("nodes", "Nodes with state, health and free GPUs", NoInput, _nodes, ("get", "/nodes")),
    ToolDef(
        "templates",
        "Job templates and their parameters (for a template submission: name, template, params)",
        NoInput,
        _templates,
        ("get", "/templates"),
    ),
    ToolDef(
        "files",
        "A directory of the user's partition (the shared file system), paginated",
        FilesInput,
        _files,
        ("get", "/files"),
    ),
    ToolDef(
        "read_file",
        "A small UTF-8 text file of the partition (a script, a config): paths are relative to "
        "the partition and cannot leave it",
        ReadFileInput,
        _read_file,
        ("get", "/files/text"),
    ),
    ToolDef(
        "render",
        "Preview a job: exactly what submit would send (command, sbatch script or manifest), "
        "the spec after templates and defaults, and the preview_token that submit needs",
        RenderInput,
        _render,
        ("post", "/jobs/render"),
    ),
    ToolDef(
        "submit",
        "Submit a job (an action: needs actions on) with the preview_token render returned for "
        "the same spec",
        SubmitInput,
        _submit,
        ("post", "/jobs"),
        agent_only=frozenset({"preview_token"}),
        action=True,
    ),
    ToolDef("jobs", "The user's jobs, newest first", JobsInput, _jobs, ("get", "/jobs")),
    ToolDef(
        "job", "One job: state, ranks, events, progress", JobInput, _job, ("get", "/jobs/{job_id}")
    ),
    ToolDef(
        "logs",
        "The last lines of one rank's log; with follow_seconds, then the live log for that long "
        "at most (until the job ends); continue with the returned offset",
        LogsInput,
        _logs,
        ("get", "/jobs/{job_id}/logs"),
        agent_only=frozenset({"follow_seconds", "offset"}),
    ),
    ToolDef(
        "why",
        "Why a job is pending or failed: the scheduler's reason, the rank that failed first and "
        "the last lines of its log, its faults and the job's events",
        WhyInput,
        _why,
    ),
    ToolDef(
        "metrics",
        "A summary of the job's MLflow metrics: per metric the points, first, last, min, max",
        JobInput,
        _metrics,
        ("get", "/jobs/{job_id}/metrics"),
    ),
    ToolDef(
        "queue",
        "The cluster's queue: every user's jobs (others' read-only); my pending jobs explain "
        "their place",
        QueueInput,
        _queue,
        ("get", "/queue"),
    ),
    ToolDef(
        "cancel",
        "Cancel a job (an action: needs actions on); its name confirms which job. Forgetting a "
        "job is left to its user (forget, delete_files are not offered)",
        CancelInput,
        _cancel,
        ("delete", "/jobs/{job_id}"),
        agent_only=frozenset({"name"}),
        route_only=frozenset({"forget", "delete_files"}),
        action=True,
    ),
]

TOOLS_BY_NAME = {tool.name: tool for tool in TOOLS}


def spec_defs() -> dict[str, Any]:
    """The JSON schemas of the spec models (`JobSpec`, `TemplateSubmission`) and theirs."""
    from pydantic.json_schema import models_json_schema

    from ..core.models import JobSpec, TemplateSubmission

    _, schemas = models_json_schema(
        [(JobSpec, "validation"), (TemplateSubmission, "validation")],
        ref_template="#/$defs/{model}",
    )
    return dict(schemas.get("$defs", {}))


def input_schema(tool: ToolDef) -> dict[str, Any]:
    """The tool's JSON Schema: its input model's, with the spec models where it takes one."""
    schema = tool.input.model_json_schema()
    if "spec" in tool.input.model_fields:
        schema["properties"]["spec"] = dict(SPEC_SCHEMA)
        schema.setdefault("$defs", {}).update(spec_defs())
    return json.loads(json.dumps(schema))


__all__ = [
    "AGENT",
    "TOOLS",
    "TOOLS_BY_NAME",
    "Agent",
    "Policy",
    "ToolDef",
    "input_schema",
    "policy_for",
]
