"""The Kubernetes double with RBAC: namespaced permissions that the API enforces (403 on a list
or a pod log the user may not read) and answers through SelfSubjectAccessReview.

SelfSubjectAccessReview follows the Kubernetes API reference (authorization.k8s.io/v1): a POST of
`spec.resourceAttributes` {namespace, verb, group, resource, subresource, name} answers 201 with
the same object plus `status.allowed` (and `status.reason`); the review is not stored. A rule
with namespace "" is cluster-wide (a ClusterRoleBinding): it allows every namespace and the
all-namespaces lists; a namespaced rule (a RoleBinding) allows that namespace only. Refusals
carry the API server's message (`<resource>.<group> is forbidden: User ... cannot <verb>
resource ... in API group ... in the namespace ...`).
"""

from __future__ import annotations

from typing import Any

import aiohttp.web
import attrs
from kmock._internal import enums, rendering

from ..kubernetes.emulator import EmulatorThread, HyperPodEmulator

USER = "data-scientist@example.com"
VERBS = {
    enums.action.LIST: "list",
    enums.action.WATCH: "watch",
    enums.action.FETCH: "get",
    enums.action.CREATE: "create",
    enums.action.UPDATE: "patch",  # kmock: HTTP PATCH on a named object
    enums.action.DELETE: "delete",
}


@attrs.define(kw_only=True)
class RbacEmulator(HyperPodEmulator):
    rules: list[tuple[str, str, str, set[str]]] = attrs.field(factory=list)
    """(namespace or '' for cluster-wide, API group, resource[/subresource], verbs)."""
    reviews: int = 0

    def allows(self, namespace: str, group: str, resource: str, verb: str) -> bool:
        return any(
            (ns == "" or ns == namespace)
            and g == group
            and r == resource
            and (verb in verbs or "*" in verbs)
            for ns, g, r, verbs in self.rules
        )

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        if request.url.path.rstrip("/") == (
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
        ):
            self.reviews += 1
            body = request.data if isinstance(request.data, dict) else {}
            attributes = (body.get("spec") or {}).get("resourceAttributes") or {}
            resource = attributes.get("resource", "")
            if attributes.get("subresource"):
                resource += "/" + attributes["subresource"]
            allowed = self.allows(
                attributes.get("namespace", ""),
                attributes.get("group", ""),
                resource,
                attributes.get("verb", ""),
            )
            answer = {
                **body,
                "metadata": {"creationTimestamp": None},
                "status": {"allowed": allowed}
                | ({"reason": f'RBAC: allowed by RoleBinding for "{USER}"'} if allowed else {}),
            }
            return aiohttp.web.json_response(answer, status=201)
        return await super()._handle(request)

    def _refuse(self, request: rendering.Request) -> aiohttp.web.Response | None:
        refusal = super()._refuse(request)
        if refusal is not None or not self.rules or request.resource is None:
            return refusal
        resource = request.resource.plural
        if request.subresource:
            resource += "/" + request.subresource
        verb = VERBS.get(request.action, "get") if request.action else "get"
        namespace = request.namespace or ""
        if self.allows(namespace, request.resource.group or "", resource, verb):
            return None
        group = request.resource.group or ""
        where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
        return self._status(
            403,
            "Forbidden",
            f"{request.resource.plural}{'.' + group if group else ''} is forbidden: User "
            f'"{USER}" cannot {verb} resource "{resource}" in API group "{group}"{where}',
        )


class RbacEmulatorThread(EmulatorThread):
    def start(self) -> None:
        self._thread.start()

        async def enter() -> None:
            self.emulator = RbacEmulator()
            await self.emulator.__aenter__()

        self.run(enter())
        self.start_server()

    def rules(self, rules: list[tuple[str, str, str, set[str]]]) -> None:
        assert isinstance(self.emulator, RbacEmulator)
        self.emulator.rules = rules

    def objects(self) -> dict[Any, Any]:
        assert self.emulator is not None
        return self.emulator.objects
