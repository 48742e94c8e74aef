"""One place where boto3 calls are made: sessions, pagination and error messages that name the call
and the IAM permission it needs."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

from ..core.errors import (
    BackendError,
    BackendUnavailable,
    Forbidden,
    HyperPodError,
    InvalidRequest,
    NotFound,
)

log = logging.getLogger(__name__)

DENIED_CODES = {
    "AccessDenied",
    "AccessDeniedException",
    "UnauthorizedOperation",
    "UnrecognizedClientException",
    "InvalidClientTokenId",
    "ExpiredTokenException",
    "ExpiredToken",
    "SignatureDoesNotMatch",
}
NOT_FOUND_CODES = {
    "ResourceNotFound",
    "ResourceNotFoundException",
    "FileSystemNotFound",
    "NoSuchEntity",
}
MAX_PAGES = 1000


REGION = re.compile(r"^[a-z]{2,4}(-[a-z]+)+-[0-9]{1,2}$")
"""AWS region names: `us-east-1`, `us-gov-west-1`, `cn-north-1`, `eusc-de-east-1`. botocore only
checks for a DNS host label (`botocore.utils.validate_region_name`, raising InvalidRegionError,
a 500 here) and would look a typo up in DNS: refuse it early instead."""


def check_region(region: str | None) -> None:
    """A 400 naming `region` unless it is absent or has the form of an AWS region name."""
    if region and not REGION.match(region):
        shown = region[:40].encode("utf-8", "backslashreplace").decode()
        raise InvalidRequest(
            f"'{shown}' is not an AWS region name (e.g. us-east-1, eu-west-2)", field="region"
        )


def session(region: str | None = None, profile: str | None = None) -> Any:
    check_region(region)
    try:
        import boto3
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise BackendUnavailable(
            "AWS discovery needs boto3: pip install 'jupyter-hyperpod[aws]'"
        ) from exc
    return boto3.Session(region_name=region or None, profile_name=profile or None)


def permission(client: Any, operation: str) -> str:
    """The IAM action for a boto3 method name, e.g. sagemaker:ListClusters."""
    api = client.meta.method_to_api_mapping.get(operation, operation)
    return f"{client.meta.service_model.signing_name}:{api}"


def call(client: Any, operation: str, **kwargs: Any) -> dict[str, Any]:
    """Run one AWS call; failures become typed errors naming the call and the permission."""
    import botocore.exceptions as bex

    action = permission(client, operation)
    try:
        return getattr(client, operation)(**kwargs)  # type: ignore[no-any-return]
    except bex.NoCredentialsError as exc:
        raise Forbidden(
            f"no AWS credentials for {action}: attach a role to the Studio execution role / instance, "
            "or set AWS_PROFILE or AWS_ACCESS_KEY_ID"
        ) from exc
    except (bex.PartialCredentialsError, bex.CredentialRetrievalError) as exc:
        raise Forbidden(f"incomplete AWS credentials for {action}: {exc}") from exc
    except bex.NoRegionError as exc:
        raise InvalidRequest(
            f"no AWS region for {action}: set AWS_REGION or c.KubernetesOrchestrator.aws_region"
        ) from exc
    except bex.ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        message = str(error.get("Message", "")) or code
        if (
            code in DENIED_CODES
            or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 403
        ):
            raise Forbidden(
                f"AWS denied {action} ({code}: {message}); the role needs the IAM permission {action}"
            ) from exc
        if code in NOT_FOUND_CODES:
            raise NotFound(f"{action}: {message}") from exc
        if code in ("ThrottlingException", "Throttling", "ServiceUnavailable", "InternalFailure"):
            raise BackendUnavailable(
                f"{action} is unavailable right now ({code}): {message}"
            ) from exc
        if code in ("ValidationException", "ValidationError") and "not find" in message.lower():
            raise NotFound(f"{action}: {message}") from exc
        raise BackendError(f"{action} failed ({code}): {message}") from exc
    except (bex.EndpointConnectionError, bex.ConnectTimeoutError, bex.ReadTimeoutError) as exc:
        raise BackendUnavailable(f"cannot reach AWS for {action}: {exc}") from exc
    except bex.BotoCoreError as exc:
        raise BackendError(f"{action} failed: {exc}") from exc


def paginate(
    client: Any, operation: str, result_key: str, **kwargs: Any
) -> Iterator[dict[str, Any]]:
    """Every item of a NextToken-paginated call; stops on a repeated token instead of looping."""
    seen: set[str] = set()
    token: str | None = None
    for _ in range(MAX_PAGES):
        page = call(client, operation, **kwargs, **({"NextToken": token} if token else {}))
        yield from page.get(result_key) or []
        token = page.get("NextToken") or None
        if not token:
            return
        if token in seen:
            log.warning(
                "%s returned the same NextToken twice; stopping", permission(client, operation)
            )
            return
        seen.add(token)
    log.warning("%s: more than %d pages; stopping", permission(client, operation), MAX_PAGES)


def describe_error(exc: HyperPodError) -> dict[str, Any]:
    return {"code": exc.code, "message": exc.message}
