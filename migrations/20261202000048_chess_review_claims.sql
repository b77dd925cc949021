-- A review in progress holds its game until this time, renewed as it judges each move: two
-- servers never review one game at once, and a review whose server stopped is taken up by the
-- next sweep once its claim lapses.
ALTER TABLE chess_games ADD COLUMN review_claimed_until TIMESTAMPTZ;
-- The sweep reads the ended games without a review; they are few among all games.
CREATE INDEX chess_games_unreviewed ON chess_games (id) WHERE result IS NOT NULL AND game_return IS NULL;
