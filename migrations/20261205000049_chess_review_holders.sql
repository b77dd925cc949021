-- Which server's review holds a claimed game: only that review renews, releases or stores it, and
-- a server that stops gracefully gives back what it holds, so the next start reviews those games
-- at once instead of after their claims lapse. Claims taken before holders existed are dropped:
-- their reviews cannot prove they hold them.
UPDATE chess_games SET review_claimed_until = NULL WHERE review_claimed_until IS NOT NULL;
ALTER TABLE chess_games ADD COLUMN review_claimed_by BIGINT;
ALTER TABLE chess_games ADD CONSTRAINT chess_games_review_claim_held
    CHECK ((review_claimed_until IS NULL) = (review_claimed_by IS NULL));
