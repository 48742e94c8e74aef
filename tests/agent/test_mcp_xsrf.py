"""The MCP endpoint keeps the browser session's XSRF rule, as every POST route does: a request
authenticated by the login cookie alone is refused unless it carries the XSRF token."""

from __future__ import annotations

import json
import re
import urllib.parse
from typing import Any

BODY = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def _cookies(response: Any) -> dict[str, str]:
    found = {}
    for header in response.headers.get_list("Set-Cookie"):
        name, _, rest = header.partition("=")
        found[name] = rest.split(";", 1)[0]
    return found


async def test_cookie_requests_need_the_xsrf_token(
    jp_serverapp: Any, http_server_client: Any, jp_base_url: str
) -> None:
    login = await http_server_client.fetch(f"{jp_base_url}login", raise_error=False)
    cookies = _cookies(login)
    xsrf = cookies["_xsrf"]
    form = urllib.parse.urlencode({"password": jp_serverapp.identity_provider.token, "_xsrf": xsrf})
    logged = await http_server_client.fetch(
        f"{jp_base_url}login",
        method="POST",
        body=form,
        headers={"Cookie": f"_xsrf={xsrf}"},
        follow_redirects=False,
        raise_error=False,
    )
    cookies.update(_cookies(logged))
    session = "; ".join(f"{k}={v}" for k, v in cookies.items())
    assert any(re.match(r"username-", name) for name in cookies), (logged.code, cookies)

    for route in ("hyperpod/mcp", "hyperpod/api/jobs/render"):
        without = await http_server_client.fetch(
            f"{jp_base_url}{route}",
            method="POST",
            body=BODY if "mcp" in route else "{}",
            headers={**HEADERS, "Cookie": session},
            raise_error=False,
        )
        assert without.code == 403, (route, without.code, without.body[:200])
    served = await http_server_client.fetch(
        f"{jp_base_url}hyperpod/mcp",
        method="POST",
        body=BODY,
        headers={**HEADERS, "Cookie": session, "X-XSRFToken": xsrf},
        raise_error=False,
    )
    assert served.code == 200, served.body[:300]
    assert {t["name"] for t in json.loads(served.body)["result"]["tools"]} >= {"render", "why"}
