-- Single-use invite codes: with registration by invite (--registration invite), a code created by
-- a team owner lets one person create an account, who then joins that team as a member. Only the
-- code's SHA-256 is stored. A code is claimed by the UPDATE that sets used_at where it is still
-- NULL, so two sign-ups racing for one code cannot both win.
CREATE TABLE invites (
    id         BIGSERIAL PRIMARY KEY,
    team_id    BIGINT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    code_hash  BYTEA NOT NULL,
    created_by BIGINT REFERENCES users (id) ON DELETE SET NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at TIMESTAMPTZ NOT NULL,
    used_by    BIGINT REFERENCES users (id) ON DELETE SET NULL,
    used_at    TIMESTAMPTZ,
    CONSTRAINT invites_code_hash_unique UNIQUE (code_hash),
    CONSTRAINT invites_code_hash_length CHECK (octet_length(code_hash) = 32),
    CONSTRAINT invites_expire_after_creation CHECK (expires_at > created_at)
);
CREATE INDEX invites_by_team ON invites (team_id);
