-- Sessions also end after a spell of disuse (the server's --session-idle-hours); the server
-- refreshes last_seen_at at most once a minute per session.
ALTER TABLE sessions ADD COLUMN last_seen_at TIMESTAMPTZ NOT NULL DEFAULT now();

-- API tokens may expire, and calling the embedded model (which spends the server's compute) is a
-- scope of its own that existing tokens do not have.
ALTER TABLE api_tokens
    ADD COLUMN expires_at TIMESTAMPTZ,
    ADD COLUMN inference  BOOLEAN NOT NULL DEFAULT FALSE,
    ADD CONSTRAINT api_tokens_expire_after_creation
        CHECK (expires_at IS NULL OR expires_at > created_at);
