-- Accounts, teams, sessions and API tokens; runs gain an owning team and a public flag.
-- Names are compared case-insensitively, so "Alice" and "alice" cannot both exist.

CREATE TABLE users (
    id            BIGSERIAL PRIMARY KEY,
    username      TEXT NOT NULL,
    -- argon2id, PHC string format (algorithm, parameters and salt inside).
    password_hash TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT users_username_format CHECK (username ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
    CONSTRAINT users_password_hash_argon2id CHECK (password_hash LIKE '$argon2id$%')
);
CREATE UNIQUE INDEX users_username_unique ON users (lower(username));

CREATE TABLE teams (
    id         BIGSERIAL PRIMARY KEY,
    name       TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT teams_name_format CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$')
);
CREATE UNIQUE INDEX teams_name_unique ON teams (lower(name));

CREATE TABLE memberships (
    team_id BIGINT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role    TEXT NOT NULL,
    PRIMARY KEY (team_id, user_id),
    CONSTRAINT memberships_role_known CHECK (role IN ('owner', 'member', 'viewer'))
);
CREATE INDEX memberships_by_user ON memberships (user_id);

-- A team never loses its last owner: checked at commit, so a transaction may swap owners.
CREATE FUNCTION memberships_keep_an_owner() RETURNS trigger AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM teams WHERE id = OLD.team_id)
       AND NOT EXISTS (SELECT 1 FROM memberships WHERE team_id = OLD.team_id AND role = 'owner') THEN
        RAISE EXCEPTION 'team % would have no owner', OLD.team_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'memberships_team_has_owner';
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE CONSTRAINT TRIGGER memberships_team_has_owner
    AFTER UPDATE OR DELETE ON memberships
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION memberships_keep_an_owner();

-- A browser session. The cookie carries the secret; only its SHA-256 is stored.
CREATE TABLE sessions (
    token_hash BYTEA PRIMARY KEY,
    user_id    BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    csrf_token TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at TIMESTAMPTZ NOT NULL,
    CONSTRAINT sessions_hash_length CHECK (octet_length(token_hash) = 32)
);
CREATE INDEX sessions_by_user ON sessions (user_id);

ALTER TABLE runs
    ADD COLUMN team_id BIGINT REFERENCES teams (id) ON DELETE CASCADE,
    ADD COLUMN public  BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX runs_by_team ON runs (team_id);

-- Tokens for trainers and environment workers: scoped to a team, optionally to one run.
CREATE TABLE api_tokens (
    id           BIGSERIAL PRIMARY KEY,
    team_id      BIGINT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    run_id       TEXT REFERENCES runs (id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    read_only    BOOLEAN NOT NULL DEFAULT FALSE,
    token_hash   BYTEA NOT NULL,
    created_by   BIGINT REFERENCES users (id) ON DELETE SET NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_used_at TIMESTAMPTZ,
    revoked_at   TIMESTAMPTZ,
    CONSTRAINT api_tokens_hash_unique UNIQUE (token_hash),
    CONSTRAINT api_tokens_hash_length CHECK (octet_length(token_hash) = 32),
    CONSTRAINT api_tokens_name_length CHECK (length(name) BETWEEN 1 AND 100)
);
CREATE INDEX api_tokens_by_team ON api_tokens (team_id);
