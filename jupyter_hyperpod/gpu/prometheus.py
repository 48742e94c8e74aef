"""A small client of the Prometheus HTTP API (`/api/v1/query`, `/api/v1/query_range`) for the three
places HyperPod clusters keep their metrics:

- `prometheus`: a plain Prometheus server (the URL is its root, e.g. `http://prometheus:9090`);
- `amp`: Amazon Managed Service for Prometheus, whose Prometheus-compatible query API is
  `https://aps-workspaces.<region>.amazonaws.com/workspaces/<id>/api/v1/query` and must be signed
  with SigV4 for the service `aps` (AWS docs, "Query using Prometheus-compatible APIs");
- `grafana`: Grafana's data source proxy, `https://<grafana>/api/datasources/proxy/uid/<uid>`,
  with a service account token as `Authorization: Bearer` (Grafana HTTP API, "Data source proxy").
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Literal

from ..core.errors import BackendError, BackendUnavailable, Forbidden, InvalidRequest

Kind = Literal["prometheus", "amp", "grafana"]
AMP_HOST = re.compile(r"^aps-workspaces\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$")
TIMEOUT = 10.0


def detect_kind(url: str, configured: str = "auto") -> Kind:
    """The configured kind, or the one the URL's shape names."""
    if configured in ("prometheus", "amp", "grafana"):
        return configured  # type: ignore[return-value]
    parsed = urllib.parse.urlsplit(url)
    if AMP_HOST.match(parsed.hostname or ""):
        return "amp"
    if "/api/datasources/proxy/" in parsed.path:
        return "grafana"
    return "prometheus"


def amp_region(url: str) -> str | None:
    match = AMP_HOST.match(urllib.parse.urlsplit(url).hostname or "")
    return match.group(1) if match else None


class PrometheusClient:
    """Instant and range PromQL queries; answers are the API's `data` objects."""

    def __init__(
        self,
        url: str,
        *,
        kind: str = "auto",
        token: str = "",
        region: str = "",
        timeout: float = TIMEOUT,
        credentials: Any = None,
    ) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise InvalidRequest(
                f"gpu_metrics_url {url!r} is not an http(s) URL", field="gpu_metrics_url"
            )
        self.url = url.rstrip("/")
        self.kind: Kind = detect_kind(url, kind)
        self.token = token
        self.region = region or amp_region(url) or ""
        self.timeout = timeout
        self._credentials = credentials

    def __repr__(self) -> str:
        return f"PrometheusClient({self.url!r}, kind={self.kind!r})"

    def query(self, promql: str, *, time: float | None = None) -> dict[str, Any]:
        params = {"query": promql}
        if time is not None:
            params["time"] = f"{time:.3f}"
        return self._call("query", params)

    def query_range(self, promql: str, *, start: float, end: float, step: float) -> dict[str, Any]:
        return self._call(
            "query_range",
            {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"},
        )

    # -- HTTP ----------------------------------------------------------------------------------
    def _call(self, endpoint: str, params: dict[str, str]) -> dict[str, Any]:
        url = f"{self.url}/api/v1/{endpoint}"
        body: bytes | None = None
        headers = {"Accept": "application/json"}
        if self.kind == "grafana":
            # GET: the data source proxy lets viewers read with GET; POST may be refused to them.
            method, url = "GET", f"{url}?{urllib.parse.urlencode(params)}"
        else:
            # POST form (Prometheus HTTP API; AMP's example uses the same): no URL length limit.
            method, body = "POST", urllib.parse.urlencode(params).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        if self.kind == "amp":
            headers = self._sign(method, url, body, headers)
        elif self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(url, data=body, method=method, headers=headers)
        where = f"{self.kind} at {self.url}"
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            raise _http_error(error, where) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise BackendUnavailable(f"cannot reach {where}: {reason}") from None
        except ValueError:
            raise BackendError(f"{where} did not answer JSON") from None
        if not isinstance(payload, dict) or payload.get("status") != "success":
            detail = payload.get("error") if isinstance(payload, dict) else None
            raise BackendError(f"{where} refused the query: {detail or payload!r}")
        data = payload.get("data")
        return data if isinstance(data, dict) else {}

    def _sign(
        self, method: str, url: str, body: bytes | None, headers: dict[str, str]
    ) -> dict[str, str]:
        """SigV4 for the service `aps`, with the boto3 default credential chain."""
        try:
            from botocore.auth import SigV4Auth
            from botocore.awsrequest import AWSRequest
        except ImportError:  # pragma: no cover - depends on the install
            raise BackendUnavailable(
                "Amazon Managed Prometheus needs boto3: pip install 'jupyter-hyperpod[aws]'"
            ) from None
        credentials = self._credentials
        if credentials is None:
            from ..aws.calls import session

            found = session(self.region or None).get_credentials()
            if found is None:
                raise Forbidden(
                    "no AWS credentials to sign Amazon Managed Prometheus queries (aps:QueryMetrics)"
                )
            credentials = found.get_frozen_credentials()
        if not self.region:
            raise InvalidRequest(
                "no AWS region for Amazon Managed Prometheus: set c.HyperPodSettings.gpu_metrics_region",
                field="gpu_metrics_region",
            )
        request = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
        SigV4Auth(credentials, "aps", self.region).add_auth(request)
        return dict(request.headers.items())


def _http_error(error: urllib.error.HTTPError, where: str) -> Exception:
    try:
        text = error.read().decode("utf-8", "replace")
    except OSError:
        text = ""
    try:
        parsed = json.loads(text)
        detail = parsed.get("error") or parsed.get("message") or parsed.get("Message") or text
    except (ValueError, AttributeError):
        detail = text
    detail = str(detail).strip()[:300] or error.reason
    if error.code in (401, 403):
        return Forbidden(f"{where} refused the credentials (HTTP {error.code}): {detail}")
    if error.code in (400, 422):
        return BackendError(f"{where} refused the query (HTTP {error.code}): {detail}")
    if error.code == 404:
        return BackendError(f"{where} has no Prometheus query API here (HTTP 404): check the URL")
    return BackendUnavailable(f"{where} answered HTTP {error.code}: {detail}")
