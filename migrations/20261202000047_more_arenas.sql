-- More arenas: two contenders place the same scene's objects (spatial), or choose a move in the
-- same chess position (chess).
ALTER TABLE arena_battles DROP CONSTRAINT arena_battles_arena_check;
ALTER TABLE arena_battles ADD CONSTRAINT arena_battles_arena_known
    CHECK (arena IN ('catbot', 'arithmetic', 'spatial', 'chess'));

-- The environment's own judge of each answer, written once with the answers: judging a spatial
-- plan runs the physics and a chess move a search, too costly to repeat on every public read.
ALTER TABLE arena_battles ADD COLUMN judged_a TEXT, ADD COLUMN judged_b TEXT;
