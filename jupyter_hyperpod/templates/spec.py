"""The one builder of a job spec from a template submission, for every entry point.

The panel, `%hyperpod`, `jupyter hyperpod`, the Python client and REST all send
`{name, template, params, overrides}`; this is where it becomes the stored `JobSpec`. `params`
holds only what the user set (the others take the template's or the config's defaults);
`overrides` are spec fields set on top of what the template built (the CLI's `--launcher`,
`--workdir`...), recorded on the spec so that a resubmit builds the same spec again.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ..core.errors import InvalidRequest, validation_error
from ..core.models import JobSpec, TemplateSubmission
from . import get_template
from .base import TemplateContext, check_params

NOT_OVERRIDABLE = ("name", "template", "params", "overrides")


def build_spec(submission: TemplateSubmission, context: TemplateContext) -> JobSpec:
    """The JobSpec that `submission` describes, with its params and overrides recorded."""
    template = get_template(submission.template)
    spec = template.make_spec(submission.name, submission.params, context)
    overrides = dict(submission.overrides)
    for key in overrides:
        if key in NOT_OVERRIDABLE or key not in JobSpec.model_fields:
            raise InvalidRequest(
                f"'{key}' cannot be overridden (spec fields: "
                f"{', '.join(f for f in JobSpec.model_fields if f not in NOT_OVERRIDABLE)})",
                field=f"overrides.{key}",
            )
    if not overrides:
        return spec
    merged: dict[str, Any] = {**spec.model_dump(mode="json"), **overrides}
    if isinstance(overrides.get("env"), dict):
        merged["env"] = {**spec.env, **overrides["env"]}
    merged["overrides"] = overrides
    try:
        return JobSpec.model_validate(merged)
    except ValidationError as error:
        raise validation_error(error, prefix="overrides.") from None


def parameter_values(submission: TemplateSubmission, context: TemplateContext) -> dict[str, Any]:
    """What each of the template's parameters will be for `submission` (see `Template.values`)."""
    template = get_template(submission.template)
    return template.values(check_params(template.info.params, submission.params), context)
