"""The OpenAI-compatible door (docs/api.md, "The OpenAI-compatible endpoint"):
`POST /v1/chat/completions` and `GET /v1/models` on the API's server, behind API_TOKENS.

Each caller (the request's `user`, else the X-OpenWebUI-User-Id header, else the token) is a
conversation of its own in the `v1` namespace, keyed by a digest of that name
(`ConversationId.v1_user` / `v1_token`). Only the last user message is the new turn: the
history a client sends again each time is never stored again.
"""
