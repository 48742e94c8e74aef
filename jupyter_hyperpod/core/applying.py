"""Submitting the user's own manifest or sbatch script as it is (`core/byo.py`; the backend reads
its own format): previewed, checked, fixed when asked, stored with the job and tracked like any
other job."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable

from .byo import (
    STORED_NAME,
    AppliedFile,
    ApplyRequest,
    FileContext,
    PreparedFile,
    apply_request,
    problems_message,
    stored_suffix,
    unified,
)
from .connection import Connection
from .errors import InvalidRequest, NotFound
from .jobbook import JobBook
from .models import Job, JobSpec
from .partition import Partition
from .paths import JOBS_DIR, ClusterPaths


class FileApply:
    """`nudge`: tell the tracker now (the feed's listeners hear the new job)."""

    def __init__(
        self,
        connection: Connection,
        book: JobBook,
        partition: Partition,
        paths: ClusterPaths,
        *,
        nudge: Callable[[], None],
    ) -> None:
        self.connection = connection
        self.book = book
        self.partition = partition
        self.paths = paths
        self.nudge = nudge

    def apply(
        self,
        text: str = "",
        /,
        *,
        filename: str = "",
        fix: bool = False,
        dry_run: bool = False,
        resubmit: str | None = None,
    ) -> AppliedFile:
        """Submit the user's own manifest or sbatch script as it is (plus our marks, shown):
        checked with the real schemas, the admin's policy and the operator's rules first;
        `dry_run` previews, `fix` accepts the offered fixes, `resubmit` sends a job's stored
        file again."""
        request = apply_request(
            {"text": text, "filename": filename, "fix": fix, "dry_run": dry_run}
            | ({"resubmit": resubmit} if resubmit else {})
        )
        if request.resubmit:
            request = self._stored_request(request)
        orchestrator = self.connection.orchestrator
        first = orchestrator.prepare_file(self._file_context(request, "job-xxxxxx"))
        name = job_name(first.name)
        job_id = f"{name[:55]}-{'xxxxxx' if request.dry_run else secrets.token_hex(3)}"
        context = self._file_context(request, job_id)
        prepared = orchestrator.prepare_file(context)
        shown = request.filename or f"job{stored_suffix(prepared.format)}"
        answer = AppliedFile(
            format=prepared.format,
            language=prepared.language,
            filename=shown,
            text=prepared.text,
            diff=unified(prepared.original, prepared.text, shown),
            changes=prepared.changes,
            problems=prepared.problems,
            fix_diff=unified(prepared.original, prepared.fixed, shown) if prepared.fixed else "",
            warnings=prepared.warnings,
            dry_run=request.dry_run,
        )
        if request.dry_run:
            return answer
        if prepared.problems and not (request.fix and prepared.fixed == prepared.text):
            raise InvalidRequest(problems_message(prepared.problems, shown), field="text")
        return answer.model_copy(update={"job": self._submit(request, prepared, context)})

    def _file_context(self, request: ApplyRequest, job_id: str) -> FileContext:
        job_dir = self.paths.job_dir(job_id)
        replaces = None
        if request.resubmit:
            before, _ = self.book.get(request.resubmit)
            replaces = before.backend_id if before.state.finished else None
        to_cluster = self.paths.to_cluster
        return FileContext(
            text=request.text,
            filename=request.filename,
            job_id=job_id,
            user=self.book.user,
            fix=request.fix,
            partition=to_cluster(self.partition.root),
            job_dir=to_cluster(job_dir),
            job_dir_local=job_dir,
            replaces=replaces,
            check_path=self.paths.check_cluster_path,
        )

    def _stored_request(self, request: ApplyRequest) -> ApplyRequest:
        job, _ = self.book.get(str(request.resubmit), connected=True)
        stored = job.spec.params.get("applied_file")
        if not stored:
            raise InvalidRequest(
                f"job {job.id} was not submitted from a file: resubmit it from the form",
                field="resubmit",
            )
        path = self.partition.resolve(str(stored), field="resubmit")
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise NotFound(
                f"the stored file of job {job.id} ({stored}) cannot be read: {error.strerror}",
                field="resubmit",
            ) from None
        return request.model_copy(
            update={
                "text": text,
                "filename": str(job.spec.params.get("filename") or ""),
                "fix": bool(job.spec.params.get("fix")) or request.fix,
            }
        )

    def _submit(self, request: ApplyRequest, prepared: PreparedFile, context: FileContext) -> Job:
        self.partition.ensure()
        job_id = context.job_id
        stored = f"{JOBS_DIR}/{job_id}/{STORED_NAME}{stored_suffix(prepared.format)}"
        spec = JobSpec(
            name=job_name(prepared.name),
            command=prepared.command or [f"({prepared.format} {request.filename})"],
            nodes=prepared.nodes,
            procs_per_node=prepared.procs_per_node,
            gpus_per_node=prepared.gpus_per_node,
            image=prepared.image,
            kind=prepared.kind,
            namespace=prepared.namespace,
            queue=prepared.queue,
            params={
                "applied_file": stored,
                "filename": request.filename,
                "fix": request.fix,
            },
        )
        orchestrator = self.connection.orchestrator
        job = self.book.new_job(
            job_id,
            spec,
            orchestrator.kind,
            events=[f"submitted from {request.filename or 'a file'} (stored as {stored})"],
        )
        data = {"mlflow_uri": self.paths.mlflow_uri_for_jobs}
        self.book.insert(job, data)
        try:
            with self.partition.new_directory(context.job_dir_local, shown=f"{JOBS_DIR}/{job_id}"):
                (
                    context.job_dir_local / f"{STORED_NAME}{stored_suffix(prepared.format)}"
                ).write_text(request.text, encoding="utf-8")
                update = orchestrator.submit_file(prepared, context)
        except BaseException:
            self.book.store.delete(job_id)
            raise
        update.events = [*job.events, *(update.events or [])]
        saved = self.book.save(job, data, update)
        self.nudge()  # after the save: the feed's listeners read the record as it now is
        return saved


def job_name(name: str) -> str:
    """A file's job name as a job name of ours (RFC 1123, at most 52 characters)."""
    cleaned = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:52].strip("-")
    return cleaned or "job"
