-- The Pay-to-Play feed: one row per episode judged or skipped, kept so the marketplace page can
-- load its history and a replayed episode does not appear twice.
CREATE TABLE market_events (
    id         BIGSERIAL PRIMARY KEY,
    run        TEXT NOT NULL,
    episode    TEXT NOT NULL,
    -- The feed's wire shape (lachesis_shared::marketplace::MarketEvent).
    event      JSONB NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT market_events_episode_once UNIQUE (episode),
    CONSTRAINT market_events_kind_known CHECK (event ->> 'kind' IN ('round', 'skipped'))
);
CREATE INDEX market_events_by_run ON market_events (run, id);
