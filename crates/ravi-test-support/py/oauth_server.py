"""A streamable HTTP MCP server (the official Python SDK) protected by OAuth 2.1, acting as its
own authorization server: dynamic client registration, PKCE (the SDK enforces S256), refresh
tokens. Authorization is granted at once, with no login page, so a client can run the whole
flow unattended. Client tests start it and check that a client can sign in and call a tool.

    python oauth_server.py PORT

MCP endpoint            http://127.0.0.1:PORT/mcp   (401 + WWW-Authenticate without a token)
Resource metadata       http://127.0.0.1:PORT/.well-known/oauth-protected-resource/mcp
AS metadata             http://127.0.0.1:PORT/.well-known/oauth-authorization-server
Register / authorize / token / revoke   http://127.0.0.1:PORT/{register,authorize,token,revoke}

Prints `listening on http://127.0.0.1:PORT/mcp` on stderr once it accepts connections.
The tool `whoami` answers "authorized as CLIENT_ID", the client the access token was issued to.
"""

import secrets
import sys
import time

import anyio
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    OAuthAuthorizationServerProvider,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

HOST = "127.0.0.1"
SCOPE = "mcp:tools"
ACCESS_TTL = 3600  # seconds
CODE_TTL = 300  # seconds


def same_url(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


class MemoryProvider(OAuthAuthorizationServerProvider[AuthorizationCode, RefreshToken, AccessToken]):
    """Keeps clients, codes and tokens in dicts; approves every authorization request at once."""

    def __init__(self, resource: str):
        self.resource = resource
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access_tokens: dict[str, AccessToken] = {}
        self.refresh_tokens: dict[str, RefreshToken] = {}
        # access token <-> refresh token issued together, so revoking one revokes both
        self.pairs: dict[str, str] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        if params.resource is not None and not same_url(params.resource, self.resource):
            raise AuthorizeError("invalid_target", f"unknown resource {params.resource}")
        assert client.client_id is not None
        scopes = params.scopes or (client.scope.split() if client.scope else [SCOPE])
        code = secrets.token_urlsafe(32)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=scopes,
            expires_at=time.time() + CODE_TTL,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=self.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        code = self.codes.get(authorization_code)
        return code if code is not None and code.client_id == client.client_id else None

    def _issue(self, client_id: str, scopes: list[str], subject: str | None) -> OAuthToken:
        access = secrets.token_urlsafe(32)
        refresh = secrets.token_urlsafe(32)
        self.access_tokens[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + ACCESS_TTL,
            resource=self.resource,
            subject=subject,
        )
        self.refresh_tokens[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=self.resource, subject=subject
        )
        self.pairs[access] = refresh
        self.pairs[refresh] = access
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=ACCESS_TTL,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )

    def _forget(self, token: str) -> None:
        other = self.pairs.pop(token, None)
        if other is not None:
            self.pairs.pop(other, None)
        for t in (token, other):
            if t is not None:
                self.access_tokens.pop(t, None)
                self.refresh_tokens.pop(t, None)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        if self.codes.pop(authorization_code.code, None) is None:
            raise TokenError("invalid_grant", "authorization code already used")
        return self._issue(authorization_code.client_id, authorization_code.scopes, authorization_code.subject)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        token = self.refresh_tokens.get(refresh_token)
        return token if token is not None and token.client_id == client.client_id else None

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        if refresh_token.token not in self.refresh_tokens:
            raise TokenError("invalid_grant", "refresh token revoked")
        self._forget(refresh_token.token)  # rotate both tokens
        return self._issue(refresh_token.client_id, scopes or refresh_token.scopes, refresh_token.subject)

    async def load_access_token(self, token: str) -> AccessToken | None:
        access = self.access_tokens.get(token)
        if access is None:
            return None
        if access.expires_at is not None and access.expires_at < time.time():
            self._forget(token)
            return None
        return access

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self._forget(token.token)


def build(port: int) -> MCPServer:
    base = f"http://{HOST}:{port}"
    resource = f"{base}/mcp"
    server = MCPServer(
        "oauth",
        auth_server_provider=MemoryProvider(resource),
        auth=AuthSettings(
            issuer_url=base,
            resource_server_url=resource,
            validate_token_resource=True,
            required_scopes=[SCOPE],
            client_registration_options=ClientRegistrationOptions(
                enabled=True, valid_scopes=[SCOPE], default_scopes=[SCOPE]
            ),
            revocation_options=RevocationOptions(enabled=True),
        ),
        log_level="WARNING",
    )

    @server.tool()
    def whoami() -> str:
        """Names the OAuth client whose access token made this call."""
        token = get_access_token()
        if token is None:
            raise ToolError("no access token")
        return f"authorized as {token.client_id}"

    return server


async def serve(port: int) -> None:
    # As MCPServer.run_streamable_http_async does, but quiet (no access log, which uvicorn
    # writes to stdout) and announcing the URL once the socket accepts connections.
    app = build(port).streamable_http_app(host=HOST)
    config = uvicorn.Config(app, host=HOST, port=port, log_level="warning", access_log=False)
    server = uvicorn.Server(config)

    async def announce() -> None:
        while not server.started:
            if server.should_exit:
                return
            await anyio.sleep(0.02)
        print(f"listening on http://{HOST}:{port}/mcp", file=sys.stderr, flush=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(announce)
        await server.serve()


if __name__ == "__main__":
    anyio.run(serve, int(sys.argv[1]))
