-- A team card's endpoint key, supplied by the team and sealed (AES-256-GCM under the server's
-- secrets key) before it is stored; it is never returned by any read.
ALTER TABLE agent_cards ADD COLUMN judge_key BYTEA;

-- Naming one of the server's environment variables as a judge's key is the operator's alone: a
-- team card that did so would make the server send that variable to the team's endpoint.
UPDATE agent_cards SET judge = judge - 'api_key_env' WHERE owner_team IS NOT NULL;
ALTER TABLE agent_cards ADD CONSTRAINT agent_cards_team_cards_name_no_server_variable
    CHECK (owner_team IS NULL OR NOT (judge ? 'api_key_env'));
ALTER TABLE agent_cards ADD CONSTRAINT agent_cards_key_only_for_endpoints
    CHECK (judge_key IS NULL OR (owner_team IS NOT NULL AND judge ->> 'kind' = 'openai'));
