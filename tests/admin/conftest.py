"""moto over real HTTP for domains and FSx, plus the SageMaker user-profile calls moto lacks
(CreateUserProfile, DescribeUserProfile, ListUserProfiles, UpdateUserProfile), answered inside
the same moto server as the SageMaker API reference describes them (cited at each behaviour)."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from typing import Any

import pytest
from moto.sagemaker.exceptions import ResourceInUseException, ResourceNotFound, ValidationError
from moto.sagemaker.responses import SageMakerResponse

from ..aws.conftest import ACCOUNT, REGION, USER_PROFILES, aws, moto_server  # noqa: F401

PROFILE_NAME_MAX = 63


def _now() -> float:
    return datetime.datetime.now(datetime.timezone.utc).timestamp()


def _domain_exists(self: SageMakerResponse, domain_id: str) -> bool:
    return domain_id in self.sagemaker_backend.domains


def create_user_profile(self: SageMakerResponse) -> str:
    """CreateUserProfile: DomainId and UserProfileName required; `ResourceInUse` when the name
    exists in the domain; `ResourceNotFound` for an unknown domain; answers UserProfileArn
    (API reference, CreateUserProfile: Errors ResourceInUse, ResourceLimitExceeded)."""
    domain_id = self._get_param("DomainId")
    name = self._get_param("UserProfileName")
    if not name or len(name) > PROFILE_NAME_MAX:
        raise ValidationError(message="UserProfileName must have length between 1 and 63")
    if not _domain_exists(self, domain_id):
        raise ResourceNotFound(message=f"Domain {domain_id} does not exist")
    if (domain_id, name) in USER_PROFILES:
        raise ResourceInUseException(message=f"User profile {name} already exists")
    arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:user-profile/{domain_id}/{name}"
    now = _now()
    USER_PROFILES[(domain_id, name)] = {
        "DomainId": domain_id,
        "UserProfileArn": arn,
        "UserProfileName": name,
        # DescribeUserProfile: "HomeEfsFileSystemUid: The ID of the user's profile in the
        # Amazon EFS volume" (allocated by SageMaker; consecutive from 200001 in practice).
        "HomeEfsFileSystemUid": str(200000 + len(USER_PROFILES) + 1),
        "Status": "InService",
        "CreationTime": now,
        "LastModifiedTime": now,
        "UserSettings": self._get_param("UserSettings") or {},
    }
    return json.dumps({"UserProfileArn": arn})


def describe_user_profile(self: SageMakerResponse) -> str:
    """DescribeUserProfile: the profile; `ResourceNotFound` when there is none (API reference,
    DescribeUserProfile: Errors ResourceLimitExceeded, ResourceNotFound)."""
    key = (self._get_param("DomainId"), self._get_param("UserProfileName"))
    if key not in USER_PROFILES:
        raise ResourceNotFound(message=f"User profile {key[1]} does not exist")
    return json.dumps(USER_PROFILES[key])


def list_user_profiles(self: SageMakerResponse) -> str:
    """ListUserProfiles: DomainIdEquals, UserProfileNameContains, SortBy (CreationTime |
    LastModifiedTime, default CreationTime), SortOrder (default Descending), MaxResults (1-100,
    default 10) and NextToken; items are UserProfileDetails {DomainId, UserProfileName, Status,
    CreationTime, LastModifiedTime} (API reference, ListUserProfiles)."""
    domain = self._get_param("DomainIdEquals")
    contains = self._get_param("UserProfileNameContains")
    sort_by = self._get_param("SortBy") or "CreationTime"
    descending = (self._get_param("SortOrder") or "Descending") == "Descending"
    limit = int(self._get_param("MaxResults") or 10)
    if not 1 <= limit <= 100:
        raise ValidationError(message="MaxResults must be between 1 and 100")
    start = int(self._get_param("NextToken") or 0)
    found = [
        p
        for (d, name), p in USER_PROFILES.items()
        if (not domain or d == domain) and (not contains or contains in name)
    ]
    found.sort(key=lambda p: (p[sort_by], p["UserProfileName"]), reverse=descending)
    page = found[start : start + limit]
    body: dict[str, Any] = {
        "UserProfiles": [
            {
                k: p[k]
                for k in (
                    "DomainId",
                    "UserProfileName",
                    "Status",
                    "CreationTime",
                    "LastModifiedTime",
                )
            }
            for p in page
        ]
    }
    if start + limit < len(found):
        body["NextToken"] = str(start + limit)
    return json.dumps(body)


def update_user_profile(self: SageMakerResponse) -> str:
    """UpdateUserProfile: the UserSettings members given replace the profile's (a list such as
    CustomFileSystemConfigs is replaced whole); `ResourceNotFound` for an unknown profile;
    answers UserProfileArn (API reference, UpdateUserProfile: Errors ResourceInUse,
    ResourceLimitExceeded, ResourceNotFound)."""
    key = (self._get_param("DomainId"), self._get_param("UserProfileName"))
    if key not in USER_PROFILES:
        raise ResourceNotFound(message=f"User profile {key[1]} does not exist")
    profile = USER_PROFILES[key]
    profile["UserSettings"] = {**profile["UserSettings"], **(self._get_param("UserSettings") or {})}
    profile["LastModifiedTime"] = _now()
    UPDATES.append({"profile": key[1], "UserSettings": self._get_param("UserSettings")})
    return json.dumps({"UserProfileArn": profile["UserProfileArn"]})


UPDATES: list[dict[str, Any]] = []


@pytest.fixture
def studio(aws: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:  # noqa: F811
    """moto plus the user-profile calls, for one test."""
    for name, method in [
        ("create_user_profile", create_user_profile),
        ("describe_user_profile", describe_user_profile),
        ("list_user_profiles", list_user_profiles),
        ("update_user_profile", update_user_profile),
    ]:
        monkeypatch.setattr(SageMakerResponse, name, method, raising=False)
    UPDATES.clear()
    yield aws
