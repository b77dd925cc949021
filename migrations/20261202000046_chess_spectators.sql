-- A game its owner made public: anyone may read it and watch its moves live; only the owner plays.
ALTER TABLE chess_games ADD COLUMN public BOOLEAN NOT NULL DEFAULT false;
CREATE INDEX chess_games_public ON chess_games (id DESC) WHERE public;
